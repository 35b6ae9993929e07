"""OpenAI-compatible and KServe generate endpoints over the generation models' engines.

    POST /v1/completions                   {"model", "prompt", "max_tokens", "temperature", "top_p",
                                            "seed", "n", "stop", "stream", "stream_options"}
    POST /v1/chat/completions              {"model", "messages", ...}: the model's chat template
    GET  /v1/models
    POST /v2/models/{name}/generate        KServe's generate extension: {"text_input", "parameters"}
    POST /v2/models/{name}/generate_stream   the same, as Server-Sent Events

With "stream": true the answer is Server-Sent Events, one `data: {chunk}` per new piece of text,
ending in `data: [DONE]`; with stream_options.include_usage a last chunk carries the usage.
Requests go into the model's engine (continuous batching, llm_engine.py) as soon as they are
parsed; a client that disconnects cancels its requests, which frees their KV blocks. Bad input
answers OpenAI's error JSON ({"error": {"message", "type", "param", "code"}}) with a 4xx status;
the connection and the other streams carry on.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from typing import AsyncIterator, Optional

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from inferx_compiler.errors import InputValidationError
from inferx_compiler.runtime.generation import Sampling

MAX_N = 16
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def response(self) -> JSONResponse:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return JSONResponse({"error": {"message": self.message, "type": kind, "param": self.param,
                                       "code": self.code}}, status_code=self.status)


@dataclass
class Params:
    """What a completion request asks for, checked."""

    max_tokens: int
    sampling: list  # a Sampling per choice
    stop: list
    n: int
    stream: bool
    include_usage: bool


def _number(body: dict, key: str, default, kind, low=None, high=None):
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise ApiError(400, f"'{key}' must be {'an integer' if kind is int else 'a number'}, got {value!r}", key)
    value = kind(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ApiError(400, f"'{key}' must be in [{low}, {high}], got {value}", key)
    return value


def parse_params(body: dict, default_max_tokens: int, can_sample: bool) -> Params:
    max_tokens = _number(body, "max_tokens", None, int, 1) or _number(body, "max_completion_tokens", None, int, 1) \
        or default_max_tokens
    temperature = _number(body, "temperature", 1.0, float, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, float, 0.0, 1.0)
    if top_p <= 0.0:
        raise ApiError(400, "'top_p' must be > 0", "top_p")
    top_k = _number(body, "top_k", 0, int, 0)
    n = _number(body, "n", 1, int, 1, MAX_N)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ApiError(400, f"'seed' must be an integer, got {seed!r}", "seed")
    base = seed if seed is not None else secrets.randbits(31)
    if temperature > 0 and not can_sample:
        raise ApiError(400, "this model was compiled --greedy-only: 'temperature' must be 0", "temperature")
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 4:
        raise ApiError(400, "'stop' must be a string or a list of up to 4 non-empty strings", "stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, f"'stream' must be true or false, got {stream!r}", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", "stream_options")
    sampling = [Sampling(temperature, top_k, top_p, (base + i) & 0x7FFFFFFF) for i in range(n)]
    return Params(max_tokens, sampling, stop, n, stream, bool(options.get("include_usage")))


class TextStream:
    """Token ids -> text pieces (whole characters only) and the stop strings: `push` returns the
    new text safe to send and whether a stop string ended it."""

    def __init__(self, tokenizer, stop: list):
        self.tokenizer, self.stop = tokenizer, stop
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def push(self, token: Optional[int]) -> str:
        if token is not None:
            self.ids.append(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if token is not None and text.endswith("\ufffd"):
            return ""  # a character cut between tokens
        for s in self.stop:
            at = text.find(s)
            if at >= 0:
                text, self.stopped = text[:at], True
        # hold back what could still become the start of a stop string
        hold = 0 if self.stopped or token is None else max(
            (k for s in self.stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        piece = text[len(self.sent):len(text) - hold]
        self.sent += piece
        return piece


class OpenAIFrontEnd:
    """The routes over `GenerationModels` (llm_models.py)."""

    def __init__(self, models, default_max_tokens: int = 256):
        self.models = models
        self.default_max_tokens = default_max_tokens

    def routes(self) -> list:
        return [Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
                Route("/v1/models", self.list_models, methods=["GET"]),
                Route("/v2/models/{name}/generate", self.kserve_generate, methods=["POST"]),
                Route("/v2/models/{name}/generate_stream", self.kserve_generate_stream, methods=["POST"])]

    # -- endpoints ------------------------------------------------------------------------
    async def list_models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": m.name, "object": "model", "created": m.created, "owned_by": "inferx",
             "max_model_len": m.context_length} for m in self.models.all()]})

    async def completions(self, request: Request) -> Response:
        return await self._handle(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._handle(request, chat=True)

    async def kserve_generate(self, request: Request) -> Response:
        return await self._handle_kserve(request, stream=False)

    async def kserve_generate_stream(self, request: Request) -> Response:
        return await self._handle_kserve(request, stream=True)

    # -- OpenAI ---------------------------------------------------------------------------
    async def _handle(self, request: Request, chat: bool) -> Response:
        try:
            body = await _json_body(request)
            model = self._model(body.get("model"))
            params = parse_params(body, self.default_max_tokens, model.session.can_sample)
            prompt = self._chat_prompt(model, body) if chat else self._prompt(body)
            handles = [self._submit(model, prompt, params, s) for s in params.sampling]
        except ApiError as e:
            return e.response()
        created, rid = int(time.time()), ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        kind = "chat.completion" if chat else "text_completion"
        if params.stream:
            return StreamingResponse(self._sse(request, model, handles, params, chat, rid, created, kind + ".chunk"
                                               if chat else kind),
                                     media_type="text/event-stream", headers=SSE_HEADERS)
        results = await self._collect(request, handles, params)
        if results is None:
            return Response(status_code=499)
        choices = []
        for i, (text, reason) in enumerate(results):
            body_choice = {"index": i, "finish_reason": reason, "logprobs": None}
            body_choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            choices.append(body_choice)
        return JSONResponse({"id": rid, "object": kind, "created": created, "model": model.name,
                             "choices": choices, "usage": _usage(handles)})

    def _model(self, name):
        if name is not None and not isinstance(name, str):
            raise ApiError(400, "'model' must be a string", "model")
        model = self.models.find(name)
        if model is None:
            raise ApiError(404, f"the model '{name}' does not exist; this server has {self.models.names()}", "model",
                           "model_not_found")
        return model

    @staticmethod
    def _prompt(body: dict):
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and
                                       all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)):
            return prompt
        raise ApiError(400, "'prompt' must be a string or a list of token ids (one prompt a request)", "prompt")

    @staticmethod
    def _chat_prompt(model, body: dict) -> str:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            raise ApiError(400, "'messages' must be a non-empty list of {role, content} objects", "messages")
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
                if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                    raise ApiError(400, "only text content is supported", "messages")
                m["content"] = "".join(p.get("text", "") for p in content)
            elif not isinstance(content, str):
                raise ApiError(400, "each message's 'content' must be a string", "messages")
        try:
            return model.session.chat_prompt(messages)
        except InputValidationError as e:
            raise ApiError(400, str(e), "messages") from None

    def _submit(self, model, prompt, params: Params, sampling: Sampling):
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def on_event(kind, value):
            loop.call_soon_threadsafe(events.put_nowait, (kind, value))

        try:
            handle = model.engine.submit(prompt, params.max_tokens, sampling, on_event=on_event)
        except InputValidationError as e:
            raise ApiError(400, str(e), "prompt" if "prompt" in str(e) else None,
                           "context_length_exceeded" if "context" in str(e) else None) from None
        return _Handle(handle, events, TextStream(model.session.tokenizer, params.stop))

    async def _collect(self, request: Request, handles, params: Params):
        """Every choice to its end; None if the client went away (its requests are cancelled)."""
        waiter = asyncio.ensure_future(_disconnected(request))
        try:
            results = []
            for h in handles:
                text = ""
                async for piece in h.pieces(waiter):
                    text += piece
                if waiter.done():
                    return None
                results.append((text, h.finish_reason))
            return results
        finally:
            waiter.cancel()
            for h in handles:
                h.request.cancel()

    async def _sse(self, request, model, handles, params: Params, chat: bool, rid: str, created: int,
                   kind: str) -> AsyncIterator[bytes]:
        waiter = asyncio.ensure_future(_disconnected(request))

        def chunk(i, delta_text=None, finish=None, first=False):
            if chat:
                delta = {"role": "assistant", "content": ""} if first else (
                    {"content": delta_text} if delta_text is not None else {})
                choice = {"index": i, "delta": delta, "finish_reason": finish, "logprobs": None}
            else:
                choice = {"index": i, "text": delta_text or "", "finish_reason": finish, "logprobs": None}
            payload = {"id": rid, "object": kind, "created": created, "model": model.name, "choices": [choice]}
            if params.include_usage:
                payload["usage"] = None
            return _sse_line(payload)

        try:
            if chat:
                for i in range(len(handles)):
                    yield chunk(i, first=True)
            # choices stream side by side: whichever has news
            pending = {asyncio.ensure_future(h.next_piece(waiter)): i for i, h in enumerate(handles)}
            while pending:
                done, _ = await asyncio.wait(list(pending) + [waiter], return_when=asyncio.FIRST_COMPLETED)
                if waiter in done:
                    return
                for fut in done:
                    i = pending.pop(fut)
                    piece = fut.result()
                    h = handles[i]
                    if piece is None:  # the end of choice i
                        yield chunk(i, finish=h.finish_reason)
                        continue
                    if piece:
                        yield chunk(i, piece)
                    pending[asyncio.ensure_future(h.next_piece(waiter))] = i
            if params.include_usage:
                yield _sse_line({"id": rid, "object": kind, "created": created, "model": model.name, "choices": [],
                                 "usage": _usage(handles)})
            yield b"data: [DONE]\n\n"
        finally:
            waiter.cancel()
            for h in handles:
                h.request.cancel()  # (a no-op for a finished request)

    # -- KServe generate ------------------------------------------------------------------
    async def _handle_kserve(self, request: Request, stream: bool) -> Response:
        try:
            body = await _json_body(request)
            model = self._model(request.path_params["name"])
            text = body.get("text_input")
            if not isinstance(text, str) or not text:
                raise ApiError(400, "'text_input' must be a non-empty string", "text_input")
            parameters = body.get("parameters") or {}
            if not isinstance(parameters, dict):
                raise ApiError(400, "'parameters' must be an object", "parameters")
            parameters = {"temperature": 0.0, **parameters}
            parameters.setdefault("max_tokens", parameters.get("max_new_tokens"))
            params = parse_params(parameters, self.default_max_tokens, model.session.can_sample)
            handle = self._submit(model, text, params, params.sampling[0])
        except ApiError as e:
            return e.response()
        if not stream:
            results = await self._collect(request, [handle], params)
            if results is None:
                return Response(status_code=499)
            return JSONResponse({"model_name": model.name, "model_version": "1", "text_output": results[0][0],
                                 "finish_reason": results[0][1], "usage": _usage([handle])})

        async def events():
            waiter = asyncio.ensure_future(_disconnected(request))
            try:
                async for piece in handle.pieces(waiter):
                    yield _sse_line({"model_name": model.name, "model_version": "1", "text_output": piece})
                if not waiter.done():
                    yield _sse_line({"model_name": model.name, "model_version": "1", "text_output": "",
                                     "finish_reason": handle.finish_reason, "usage": _usage([handle])})
            finally:
                waiter.cancel()
                handle.request.cancel()

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


class _Handle:
    """One choice: the engine's Request, its events on this loop, its text."""

    def __init__(self, request, events: asyncio.Queue, text: TextStream):
        self.request, self.events, self.text = request, events, text
        self._ended = False

    @property
    def finish_reason(self) -> Optional[str]:
        if self.text.stopped:
            return "stop"
        reason = self.request.finish_reason
        return {"cancelled": "stop", "error": "error"}.get(reason, reason)

    async def next_piece(self, waiter) -> Optional[str]:
        """The next text piece ("" when a token gave no whole character yet), None at the end."""
        if self._ended:
            return None
        get = asyncio.ensure_future(self.events.get())
        done, _ = await asyncio.wait([get, waiter], return_when=asyncio.FIRST_COMPLETED)
        if get not in done:
            get.cancel()
            self._ended = True
            return None
        kind, value = get.result()
        if kind == "done":
            self._ended = True
            rest = self.text.push(None)
            return rest if rest else None
        piece = self.text.push(value)
        if self.text.stopped:
            self.request.cancel()
            self._ended = True
            return piece if piece else None
        return piece

    async def pieces(self, waiter) -> AsyncIterator[str]:
        while True:
            piece = await self.next_piece(waiter)
            if piece is None:
                return
            if piece:
                yield piece


def _usage(handles) -> dict:
    prompt = len(handles[0].request.prompt) if handles else 0
    completion = sum(len(h.request.output) for h in handles)
    cached = handles[0].request.cached_tokens if handles else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _sse_line(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _json_body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the request body is not valid JSON ({e})") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone away (its http.disconnect message)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
