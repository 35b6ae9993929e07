"""Continuous batching of generation requests over one GenerationSession and its paged KV cache.

One engine thread runs the loop; each iteration
  1. drops cancelled requests (their blocks go back to the pool),
  2. admits waiting requests while the decode batch has room and blocks are free, taking the
     cached blocks of a shared prompt prefix first (kv_blocks.BlockPool.match_prefix),
  3. runs ONE prefill chunk for the requests still reading their prompt (a compiled chunk
     length, the prompts of several requests side by side), and
  4. runs ONE decode step for every request that is generating, padded to a compiled batch.
So requests join and leave the decode batch at every step, and a long prompt is read a chunk
per iteration between decode steps: running streams never wait for a whole prefill.

When a block is needed and none is free, the request admitted last is preempted: its blocks
go back and it waits again, to be recomputed later from its prompt and the tokens it has
(a sampled token depends only on the seed and its position: the recomputed stream is the same).

A request's tokens come out through its handle (`tokens()` in a thread, or a callback that
an asyncio server turns into a queue); `cancel()` ends it at the next iteration.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from inferx_compiler.errors import InputValidationError
from inferx_compiler.runtime.generation import GenerationSession, Sampling

FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR = "stop", "length", "cancelled", "error"


@dataclass
class RequestTimes:
    """Monotonic seconds: when the request came, its first token, its end."""

    arrived: float = 0.0
    first_token: Optional[float] = None
    finished: Optional[float] = None


@dataclass(eq=False)
class Request:
    """One prompt and what became of it. The engine thread alone changes the state fields."""

    id: str
    prompt: list[int]
    max_new_tokens: int
    sampling: Sampling
    stop_ids: frozenset
    on_event: Optional[Callable[[str, object], None]] = None  # ("token", id) / ("done", reason)
    output: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)  # of the leading full blocks, registered
    computed: int = 0  # positions whose keys and values are in the cache
    cached_tokens: int = 0  # of the prompt, found in the prefix cache at admission
    preemptions: int = 0
    finish_reason: Optional[str] = None
    error: Optional[str] = None
    times: RequestTimes = field(default_factory=RequestTimes)
    _cancelled: bool = False
    _events: "queue.Queue" = field(default_factory=queue.Queue)

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    @property
    def prefilling(self) -> bool:
        return self.computed < len(self.tokens)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    # -- the caller's side ----------------------------------------------------------------
    def cancel(self) -> None:
        self._cancelled = True

    def token_ids(self, timeout: Optional[float] = None) -> Iterator[int]:
        """The new token ids as they come; ends when the request does (see finish_reason)."""
        while True:
            kind, value = self._events.get(timeout=timeout)
            if kind == "done":
                return
            yield value

    def _emit(self, kind: str, value) -> None:
        self._events.put((kind, value))
        if self.on_event is not None:
            self.on_event(kind, value)


@dataclass
class EngineStats:
    """Counters since the engine started."""

    prefill_calls: int = 0
    decode_steps: int = 0
    preemptions: int = 0
    finished: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0


class Engine:
    """The scheduler over one session. `max_batch`: the most requests decoding together (at most
    the largest compiled batch); `kv_blocks`: the most cache blocks used (default: all)."""

    def __init__(self, session: GenerationSession, max_batch: Optional[int] = None, kv_blocks: Optional[int] = None,
                 prefix_caching: bool = True, clock=time.monotonic):
        self.session = session
        largest = max(session.batch_sizes)
        self.max_batch = min(max_batch or largest, largest)
        # the session's own pool (generate() on the same session takes blocks from it too, so a
        # block is never handed out twice), set to this engine's limit and prefix caching
        self.pool = session.blocks
        self.pool.configure(prefix_caching, limit=kv_blocks)
        self.block_size = session.block_size
        self.clock = clock
        self.stats = EngineStats()
        self._ids = itertools.count(1)
        self._incoming: "queue.Queue[Request]" = queue.Queue()
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []  # in admission order
        self._wake = threading.Event()
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self.listeners: list[Callable[[Request], None]] = []  # called with each finished request

    # -- the caller's side ----------------------------------------------------------------
    def submit(self, prompt, max_new_tokens: int = 64, sampling: Sampling = Sampling(),
               stop_ids: Optional[Sequence[int]] = None, request_id: Optional[str] = None,
               on_event: Optional[Callable[[str, object], None]] = None) -> Request:
        """Queue a prompt (text or token ids); returns its Request (a handle). Refuses at once what
        can never run: an empty prompt, one longer than a sequence holds, max_new_tokens < 1."""
        ids = self.session.encode(prompt)
        if not ids:
            raise InputValidationError("the prompt has no tokens")
        if max_new_tokens < 1:
            raise InputValidationError(f"max_tokens must be >= 1, got {max_new_tokens}")
        limit = self.session.max_seq
        if len(ids) >= limit:
            raise InputValidationError(f"the prompt has {len(ids)} tokens; this model's context holds {limit} "
                                       f"(prompt and new tokens)")
        need = -(-min(limit, len(ids) + max_new_tokens) // self.block_size)
        if need > self.pool.capacity:
            raise InputValidationError(f"this request needs {need} KV cache blocks; the cache has "
                                       f"{self.pool.capacity}")
        if sampling.temperature > 0 and not self.session.can_sample:
            raise InputValidationError("this model was compiled --greedy-only: temperature must be 0")
        stops = frozenset(self.session.eos_ids if stop_ids is None else stop_ids)
        request = Request(request_id or f"req-{next(self._ids)}", ids, max_new_tokens, sampling, stops, on_event)
        request.times.arrived = self.clock()
        self._incoming.put(request)
        self._wake.set()
        return request

    def start(self) -> "Engine":
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="inferx-engine", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting) + self._incoming.qsize()

    # -- the loop -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop:
            try:
                worked = self.step()
            except Exception as e:  # a failed call fails the requests in it, never the loop
                self._fail_all(f"{type(e).__name__}: {e}")
                worked = True
            if not worked:
                self._wake.wait(timeout=0.05)
                self._wake.clear()
        self._fail_all("the engine stopped")

    def step(self) -> bool:
        """One iteration (see the module docstring); False when there was nothing to do."""
        while True:
            try:
                self._waiting.append(self._incoming.get_nowait())
            except queue.Empty:
                break
        self._drop_cancelled()
        self._admit()
        prefilled = self._prefill_chunk()
        decoded = self._decode_step()
        return prefilled or decoded

    def _drop_cancelled(self) -> None:
        for r in [r for r in self._waiting if r._cancelled]:
            self._waiting.remove(r)
            self._finish(r, FINISH_CANCELLED)
        for r in [r for r in self._running if r._cancelled]:
            self._finish(r, FINISH_CANCELLED)

    def _admit(self) -> None:
        while self._waiting and len(self._running) < self.max_batch:
            r = self._waiting[0]
            tokens = r.tokens
            # the last token is always computed (its logits give the next one): match before it
            blocks, hashes = self.pool.match_prefix(tokens[:len(tokens) - 1])
            need = -(-len(tokens) // self.block_size) - len(blocks)
            if need > self.pool.available:
                self.pool.release(blocks)
                if not self._running:  # nothing to wait for: the pool is smaller than one prompt
                    self._waiting.popleft()
                    self._finish(r, FINISH_ERROR, f"the prompt needs {need} KV cache blocks; "
                                                  f"{self.pool.available} exist")
                    continue
                return
            self._waiting.popleft()
            r.blocks, r.hashes = blocks, hashes
            r.computed = len(blocks) * self.block_size
            if not r.output and not r.preemptions:
                r.cached_tokens = r.computed
            self._running.append(r)

    def _ensure_blocks(self, r: Request, positions: int) -> bool:
        """Blocks for r's first `positions` positions; preempts the request admitted last while
        none is free. False if r itself was preempted (now or earlier in this iteration)."""
        if r not in self._running:
            return False
        while len(r.blocks) * self.block_size < positions:
            block = self.pool.allocate()
            if block is None:
                victim = self._running[-1]
                self._preempt(victim)
                if victim is r:
                    return False
                continue
            r.blocks.append(block)
        return True

    def _preempt(self, r: Request) -> None:
        self._running.remove(r)
        self.pool.release(r.blocks)
        r.blocks, r.hashes, r.computed = [], [], 0
        r.preemptions += 1
        self.stats.preemptions += 1
        self._waiting.appendleft(r)

    # -- prefill --------------------------------------------------------------------------
    def _prefill_chunk(self) -> bool:
        reading = [r for r in self._running if r.prefilling]
        if not reading:
            return False
        batch = self.session.prefill_batch_for(len(reading))
        lengths = self.session.prefill_lengths(batch)
        group = reading[:batch]
        longest = max(len(r.tokens) - r.computed for r in group)
        T = next((n for n in lengths if n >= longest), lengths[-1])
        takes = {}
        for r in group:
            take = min(len(r.tokens) - r.computed, T)
            if self._ensure_blocks(r, r.computed + take):
                takes[r] = take
        group = [r for r in group if r in takes and r in self._running]  # (a later one may preempt an earlier)
        if not group:
            return True
        tokens = np.zeros((batch, T), np.int64)
        start, lens = np.zeros(batch, np.int64), np.zeros(batch, np.int64)
        for b, r in enumerate(group):
            tokens[b, :takes[r]] = r.tokens[r.computed:r.computed + takes[r]]
            start[b], lens[b] = r.computed, takes[r]
        samplings = [r.sampling for r in group] + [Sampling()] * (batch - len(group))
        ids = self.session.prefill(tokens, start, lens, self.session.block_table([r.blocks for r in group], batch),
                                   samplings)
        self.stats.prefill_calls += 1
        for b, r in enumerate(group):
            r.computed += takes[r]
            self._register_full_blocks(r)
            if not r.prefilling:  # the whole prompt (and any tokens it had) is in: a new token
                self._accept(r, int(ids[b]))
        return True

    # -- decode ---------------------------------------------------------------------------
    def _decode_step(self) -> bool:
        generating = [r for r in self._running if not r.prefilling and not r.done]
        generating = [r for r in generating if self._ensure_blocks(r, r.computed + 1)]
        generating = [r for r in generating if r in self._running]  # (a later one may preempt an earlier)
        if not generating:
            return False
        batch = self.session.batch_for(len(generating))
        tokens, positions = np.zeros(batch, np.int64), np.zeros(batch, np.int64)
        for b, r in enumerate(generating):
            tokens[b], positions[b] = r.tokens[-1], r.computed
        samplings = [r.sampling for r in generating] + [Sampling()] * (batch - len(generating))
        ids = self.session.decode(tokens, positions, self.session.block_table([r.blocks for r in generating], batch),
                                  samplings)
        self.stats.decode_steps += 1
        for b, r in enumerate(generating):
            r.computed += 1
            self._register_full_blocks(r)
            self._accept(r, int(ids[b]))
        return True

    def _register_full_blocks(self, r: Request) -> None:
        bs = self.block_size
        tokens = r.tokens
        while len(r.hashes) < r.computed // bs:
            i = len(r.hashes)
            r.hashes.append(self.pool.register(r.blocks[i], r.hashes[-1] if r.hashes else None,
                                               tokens[i * bs:(i + 1) * bs]))

    def _accept(self, r: Request, token: int) -> None:
        """A new token of r: out to its caller, then r ends or goes on."""
        r.output.append(token)
        if r.times.first_token is None:
            r.times.first_token = self.clock()
        self.stats.generated_tokens += 1
        r._emit("token", token)
        if token in r.stop_ids:
            self._finish(r, FINISH_STOP)
        elif len(r.output) >= r.max_new_tokens or len(r.tokens) >= self.session.max_seq:
            self._finish(r, FINISH_LENGTH)

    def _finish(self, r: Request, reason: str, error: Optional[str] = None) -> None:
        if r in self._running:
            self._running.remove(r)
        self.pool.release(r.blocks)
        r.blocks = []
        r.finish_reason, r.error = reason, error
        r.times.finished = self.clock()
        self.stats.finished += 1
        self.stats.prompt_tokens += len(r.prompt)
        for listener in self.listeners:
            listener(r)
        r._emit("done", reason)

    def _fail_all(self, error: str) -> None:
        for r in list(self._running) + list(self._waiting):
            self._finish(r, FINISH_ERROR, error)
        self._waiting.clear()
        while True:
            try:
                self._finish(self._incoming.get_nowait(), FINISH_ERROR, error)
            except queue.Empty:
                break
