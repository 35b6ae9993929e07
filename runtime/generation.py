"""Generation models at run time: prompts in, tokens streamed out.

A generation artifact (manifest `generation`, built from a Hugging Face folder or a GGUF file)
holds prefill entry points (a chunk of T tokens per sequence, at each compiled chunk length)
and decode entry points (one token per sequence), at each compiled batch size, over one paged KV
cache `[layers, 2, blocks, kv_heads, block_size, head_dim]` that this session allocates once on
the device and every call reads through a block table and writes in place (`kv_blocks.BlockPool`
hands out the blocks). Sampling runs on the device: each call returns the next token id of every
sequence (greedy, or temperature / top-k / top-p with a seed), never logits.

    sess = inferx_compiler.load("smollm2.ixa")
    for piece in sess.generate("The capital of France is", max_new_tokens=32):
        print(piece, end="", flush=True)

Positions 0 .. max_seq-1 of a sequence are usable; block 0 is the scratch block that padding
tokens and idle batch rows write to. `llm_engine.Engine` serves many requests over one session
(continuous batching); `generate` runs one call's prompts together.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence, Union

import numpy as np

from inferx_compiler.artifact.archive import open_for_running
from inferx_compiler.errors import ArtifactError, InputValidationError
from inferx_compiler.runtime.devices import check_compatible, default_device_for, hal_device, parse_device
from inferx_compiler.runtime.kv_blocks import BlockPool
from inferx_compiler.runtime.parameters import parameters_module, referenced_parameters_module

Prompt = Union[str, Sequence[int]]


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen, per sequence: temperature 0 is greedy (argmax); otherwise
    top-k (0: off) then top-p (1.0: off) over the rest, drawn with noise seeded by `seed` and the
    position (reproducible: the same seed gives the same tokens)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if self.temperature < 0:
            raise InputValidationError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise InputValidationError(f"top_k must be >= 0 (0: off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise InputValidationError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class GenerationStats:
    """What one generate() call measured (wall clock)."""

    prompt_tokens: int = 0
    new_tokens: int = 0
    time_to_first_token_s: float = 0.0
    total_s: float = 0.0
    decode_steps: int = 0

    @property
    def tokens_per_s(self) -> float:
        decode_s = self.total_s - self.time_to_first_token_s
        return (self.new_tokens - 1) / decode_s if self.new_tokens > 1 and decode_s > 0 else 0.0


@dataclass
class _Batch:
    """The per-sequence state of one generate() call."""

    prompts: list[list[int]]
    sampling: list[Sampling]
    max_new_tokens: int
    stop_ids: set
    out: list[list[int]] = field(default_factory=list)
    finished: Optional[np.ndarray] = None


class GenerationSession:
    """One generation artifact on one device: the module, its weights, a cache per batch size."""

    def __init__(self, path, device: Optional[str] = None, verify: Optional[str] = None,
                 weights: Optional[str] = None):
        import iree.runtime as rt

        # (a path, or an Artifact open_for_running returned: load() opens it once)
        self.artifact = open_for_running(path, verify) if isinstance(path, str) else path
        m = self.artifact.manifest
        if not m.generation:
            raise ArtifactError(f"{path}: not a generation model (its manifest has no 'generation' record)")
        self.record = m.generation
        self.config = self.record["config"]
        self.max_seq = int(self.record["max_seq"])
        backend = m.target.get("backend", "none")
        spec = parse_device(device or default_device_for(backend))
        check_compatible(spec, backend if m.executable else "none", m.target.get("name", "?"))
        self._rt = rt
        self._device = hal_device(spec)
        self._instance = rt.VmInstance()
        modules = [rt.create_hal_module(self._instance, self._device)]
        referenced = (self.record.get("weights") or {}).get("mode") == "reference"
        if referenced:
            modules.append(referenced_parameters_module(rt, self._instance, self.artifact.path, self.record["weights"],
                                                        weights, self))
        elif m.weights:
            modules.append(parameters_module(rt, self._instance, self.artifact, self))
        self._module = rt.VmModule.copy_buffer(self._instance, self.artifact.member_view(m.module))
        modules.append(self._module)
        self._context = rt.VmContext(self._instance, modules=modules)
        self._entries = {e["name"]: e for e in self.record["entries"]}
        self._invokers: dict = {}
        geometry = self.record["cache"]
        self.block_size, self.table_width = int(geometry["block_size"]), int(geometry["table_width"])
        self.blocks = BlockPool(int(geometry["blocks"]), self.block_size)
        self._cache = None
        self._lock = threading.RLock()  # one generate() at a time
        self._invoke_lock = threading.Lock()  # one entry-point call at a time (the engine's thread, generate)
        self.tokenizer = _tokenizer(self.artifact, self.record)
        self.eos_ids = tuple(self.config.get("eos_ids") or ())
        self.last_stats = GenerationStats()

    # -- what was compiled ----------------------------------------------------------------
    @property
    def batch_sizes(self) -> list[int]:
        return sorted({e["batch"] for e in self._entries.values() if e["kind"] == "decode"})

    def prefill_lengths(self, batch: int) -> list[int]:
        return sorted(e["length"] for e in self._entries.values()
                      if e["kind"] == "prefill" and e["batch"] == batch and e["output"] in ("sample", "greedy"))

    @property
    def prefill_batch_sizes(self) -> list[int]:
        return sorted({e["batch"] for e in self._entries.values() if e["kind"] == "prefill"})

    def prefill_batch_for(self, sequences: int) -> int:
        """The smallest compiled prefill batch that holds `sequences`, else the largest (the
        sequences then go through in groups)."""
        sizes = self.prefill_batch_sizes
        return next((b for b in sizes if b >= sequences), sizes[-1])

    @property
    def can_sample(self) -> bool:
        """Whether a sampler was compiled (not --greedy-only)."""
        return any(e["output"] == "sample" for e in self._entries.values())

    def batch_for(self, sequences: int) -> int:
        """The smallest compiled batch that holds `sequences` (the rest of it idles)."""
        fitting = [b for b in self.batch_sizes if b >= sequences]
        if not fitting:
            raise InputValidationError(f"{sequences} sequences at once: this artifact is compiled for batches "
                                       f"{self.batch_sizes}; rebuild with --batch-sizes including {sequences}")
        return fitting[0]

    # -- the cache ------------------------------------------------------------------------
    def cache_shape(self) -> tuple[int, ...]:
        c, geometry = self.config, self.record["cache"]
        row = int(geometry.get("row", c["head_dim"]))  # an int8 cache: head_dim + the scale's exponent
        return (c["layers"], 2, int(geometry["blocks"]), c["kv_heads"], self.block_size, row)

    def cache(self):
        """The device-resident paged cache (allocated once, zeros; calls write it in place)."""
        if self._cache is None:
            zeros = np.zeros(self.cache_shape(), _numpy_dtype(self.record["cache"]["dtype"]))
            self._cache = self._rt.asdevicearray(self._device, zeros)
        return self._cache

    def block_table(self, rows: Sequence[Sequence[int]], batch: int) -> np.ndarray:
        """[batch, table_width] int64: each sequence's blocks in position order, the rest (and
        rows past len(rows): idle) the scratch block 0."""
        table = np.zeros((batch, self.table_width), np.int64)
        for b, blocks in enumerate(rows):
            table[b, :len(blocks)] = blocks
        return table

    # -- one call of an entry point ---------------------------------------------------------
    def _call(self, name: str, *args):
        invoker = self._invoker(name)
        with self._invoke_lock:
            # a copy: on the CPU `to_host` maps the device's memory, which a later call or the
            # session's end may reuse (logits read after the session was dropped came back NaN)
            return np.array(_first(invoker(*args)).to_host())

    def _invoker(self, name: str):
        invoker = self._invokers.get(name)
        if invoker is None:
            if name not in self._entries:
                raise InputValidationError(f"no compiled entry point {name}; this artifact has "
                                           f"{', '.join(sorted(self._entries))}")
            fn = self._module.lookup_function(name)
            if fn is None:
                raise ArtifactError(f"{self.artifact.path}: the module has no function {name}")
            invoker = self._invokers[name] = self._rt.FunctionInvoker(self._context, self._device, fn)
        return invoker

    def prefill(self, tokens: np.ndarray, start: np.ndarray, lens: np.ndarray, table: np.ndarray,
                sampling: Sequence[Sampling]) -> np.ndarray:
        """One chunk: tokens [B, T] at positions start[b] + t (t < lens[b]; the rest padding), in
        the blocks of table [B, table_width] -> the next token id [B] of each sequence, sampled on
        the device."""
        B, T = tokens.shape
        name = f"prefill_b{B}_t{T}"
        args = (_i64(tokens), _i64(start), _i64(lens), _i64(table), self.cache())
        if self._entries.get(name, {}).get("output") == "greedy":
            self._check_greedy(sampling)
        else:
            args += tuple(_sampling_arrays(sampling))
        return self._call(name, *args).astype(np.int64)

    def _check_greedy(self, sampling: Sequence[Sampling]) -> None:
        if any(s.temperature > 0 for s in sampling):
            raise InputValidationError(f"{self.artifact.path} was compiled --greedy-only (no sampler on the device): "
                                       f"temperature must be 0")

    def decode(self, tokens: np.ndarray, positions: np.ndarray, table: np.ndarray,
               sampling: Sequence[Sampling]) -> np.ndarray:
        """One step: token [B] at positions [B] (blocks: table) -> the next token id [B], chosen on
        the device (the greedy entry when every sequence is greedy, else the sampling one)."""
        B = tokens.shape[0]
        args = (_i64(tokens).reshape(B, 1), _i64(positions), _i64(table), self.cache())
        if f"decode_b{B}_sample" not in self._entries:
            self._check_greedy(sampling)
        if all(s.temperature <= 0 for s in sampling):
            out = self._call(f"decode_b{B}", *args)
        else:
            out = self._call(f"decode_b{B}_sample", *args, *_sampling_arrays(sampling))
        return out.astype(np.int64)

    def prefill_logits(self, tokens, start, lens, table) -> np.ndarray:
        """The `_logits` prefill entry (built with logits: references and tests)."""
        B, T = tokens.shape
        return self._call(f"prefill_b{B}_t{T}_logits", _i64(tokens), _i64(start), _i64(lens), _i64(table),
                          self.cache())

    def decode_logits(self, tokens, positions, table) -> np.ndarray:
        B = tokens.shape[0]
        return self._call(f"decode_b{B}_logits", _i64(tokens).reshape(B, 1), _i64(positions), _i64(table),
                          self.cache())

    # -- generation -----------------------------------------------------------------------
    def chat_prompt(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The model's chat template (from its folder or GGUF file) applied to `messages`
        ([{"role": "user", "content": ...}, ...]), as transformers' apply_chat_template renders it."""
        template = self.record.get("chat_template")
        if not template:
            raise InputValidationError("this model has no chat template: give the prompt as plain text")
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise InputValidationError("chat templates need jinja2: pip install jinja2") from None

        def raise_exception(message):
            raise InputValidationError(f"the chat template refused the messages: {message}")

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        vocab = self.tokenizer
        special = {name: vocab.id_to_token(i) for name, i in (("bos_token", self.config.get("bos_id")),
                                                              ("eos_token", (self.eos_ids or (None,))[0]))
                   if i is not None}
        return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                **special)

    def encode(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer.encode(prompt, add_special_tokens=False).ids)
        return [int(t) for t in prompt]

    def generate(self, prompt: Prompt, max_new_tokens: int = 64, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, stop_ids: Sequence[int] = None) -> Iterator[str]:
        """Stream the text of the new tokens as they come (pieces, split on whole characters).
        The ids are `last_token_ids`; the timings `last_stats`."""
        ids: list[int] = []
        shown = ""
        self.last_token_ids = ids
        for step in self.generate_ids([prompt], max_new_tokens, Sampling(temperature, top_k, top_p, seed),
                                      stop_ids=stop_ids):
            ids.append(step[0])
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            if text.endswith("\ufffd"):
                continue  # a character cut between tokens: wait for its other bytes
            piece, shown = text[len(shown):], text
            if piece:
                yield piece
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if len(text) > len(shown):
            yield text[len(shown):]

    def generate_ids(self, prompts: Sequence[Prompt], max_new_tokens: int,
                     sampling: Union[Sampling, Sequence[Sampling]] = Sampling(),
                     stop_ids: Sequence[int] = None) -> Iterator[list]:
        """Several prompts at once (ragged): yields, at each step, the new token id of each
        sequence (None for a sequence that has finished). A sequence ends at one of `stop_ids`
        (default: the model's end-of-sequence ids), after max_new_tokens, or when its cache is full."""
        if max_new_tokens < 1:
            raise InputValidationError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        encoded = [self.encode(p) for p in prompts]
        samplings = list(sampling) if isinstance(sampling, (list, tuple)) else [sampling] * len(encoded)
        batch = self.batch_for(len(encoded))
        longest = max(len(p) for p in encoded)
        if min(len(p) for p in encoded) < 1:
            raise InputValidationError("every prompt needs at least one token")
        if longest > self.max_seq:
            raise InputValidationError(f"a prompt of {longest} tokens does not fit: this artifact holds "
                                       f"{self.max_seq} positions per sequence (--max-seq {self.max_seq})")
        stops = set(self.eos_ids if stop_ids is None else stop_ids)
        idle = batch - len(encoded)  # rows of the compiled batch no prompt uses: a table row of scratch blocks
        prompts = encoded + [[0]] * idle
        samplings += [Sampling()] * idle
        with self._lock:
            blocks = self.allocate_blocks([min(self.max_seq, len(p) + max_new_tokens) for p in encoded])
            try:
                table = self.block_table(blocks, batch)
                yield from self._run(prompts, samplings, len(encoded), max_new_tokens, stops, table)
            finally:
                for held in blocks:
                    self.blocks.release(held)

    def allocate_blocks(self, positions: Sequence[int]) -> list[list[int]]:
        """Blocks for sequences of these many positions, or an error naming the shortfall."""
        need = [-(-n // self.block_size) for n in positions]
        if sum(need) > self.blocks.available:
            raise InputValidationError(f"these sequences need {sum(need)} KV cache blocks of {self.block_size} "
                                       f"positions; {self.blocks.available} are free (rebuild with a larger "
                                       f"--kv-blocks, or ask for fewer tokens)")
        return [[self.blocks.allocate() for _ in range(n)] for n in need]

    def _run(self, prompts, samplings, live: int, max_new_tokens: int, stops: set, table) -> Iterator[list]:
        stats = self.last_stats = GenerationStats(prompt_tokens=sum(len(p) for p in prompts[:live]))
        t0 = time.perf_counter()
        B = len(prompts)
        nxt = self.prefill_prompts(prompts, samplings, table)
        pos = np.array([len(p) for p in prompts], np.int64)
        finished = np.zeros(B, bool)
        finished[live:] = True
        limit = np.array([min(self.max_seq, len(p) + max_new_tokens) for p in prompts], np.int64)
        for step in range(max_new_tokens):
            row = [None if finished[b] else int(nxt[b]) for b in range(live)]
            if step == 0:
                stats.time_to_first_token_s = time.perf_counter() - t0
            stats.new_tokens += sum(t is not None for t in row)
            yield row
            for b in range(live):
                if not finished[b] and (int(nxt[b]) in stops or pos[b] >= limit[b]):
                    finished[b] = True
            if step == max_new_tokens - 1 or finished.all():
                break
            # finished rows: the scratch block
            nxt = self.decode(nxt, np.where(finished, 0, pos), np.where(finished[:, None], 0, table), samplings)
            stats.decode_steps += 1
            pos = pos + 1
        stats.total_s = time.perf_counter() - t0

    def prefill_prompts(self, prompts: list[list[int]], samplings, table: np.ndarray) -> np.ndarray:
        """Ragged prompts through the compiled chunk lengths, in groups of a compiled prefill
        batch; the first new token of each."""
        B = len(prompts)
        P = self.prefill_batch_for(B)
        first = np.zeros(B, np.int64)
        for g in range(0, B, P):
            rows = list(range(g, min(B, g + P)))
            group_table = np.zeros((P, table.shape[1]), np.int64)
            group_table[:len(rows)] = table[rows]
            group = [prompts[b] for b in rows] + [[]] * (P - len(rows))  # idle rows: nothing to read
            group_sampling = [samplings[b] for b in rows] + [Sampling()] * (P - len(rows))
            first[rows] = self._prefill_group(group, group_sampling, group_table)[:len(rows)]
        return first

    def _prefill_group(self, prompts: list[list[int]], samplings, table: np.ndarray) -> np.ndarray:
        P = len(prompts)
        lengths = self.prefill_lengths(P)
        total = np.array([len(p) for p in prompts], np.int64)
        done = np.zeros(P, np.int64)
        first = np.zeros(P, np.int64)
        while (done < total).any():
            T = next((n for n in lengths if n >= int((total - done).max())), lengths[-1])
            take = np.minimum(total - done, T)
            tokens = np.zeros((P, T), np.int64)
            for b, p in enumerate(prompts):
                tokens[b, : take[b]] = p[done[b]: done[b] + take[b]]
            ids = self.prefill(tokens, done, take, table, samplings)  # rows already done: lens 0, no write
            first = np.where(take > 0, ids, first)
            done += take
        return first


def _numpy_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _first(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def _sampling_arrays(sampling: Sequence[Sampling]) -> tuple:
    return (np.array([s.temperature for s in sampling], np.float32), _i64([s.top_k for s in sampling]),
            np.array([s.top_p for s in sampling], np.float32), _i64([s.seed & 0xFFFFFFFF for s in sampling]))


def _tokenizer(artifact, record: dict):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ArtifactError("a generation model needs the tokenizers package: pip install tokenizers") from None
    return Tokenizer.from_str(bytes(artifact.member_view(record["tokenizer"])).decode())


def load(path: str, device: Optional[str] = None, verify: Optional[str] = None) -> GenerationSession:
    return GenerationSession(path, device, verify)
