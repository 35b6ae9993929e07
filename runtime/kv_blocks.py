"""The paged KV cache's bookkeeping on the host: which blocks are free, which hold which tokens.

The device cache is `[layers, 2, blocks, kv_heads, block_size, head_dim]` (the decoder's
docstring); every entry point reads and writes it through a block table. `BlockPool` hands out
its blocks (block 0 is the scratch block: never handed out) with reference counts, and keeps a
prefix cache: a block whose `block_size` positions are all written is registered under a hash
of (its parent block's hash, its tokens), so a later sequence with the same tokens at the same
positions takes the block instead of computing it again. A registered block nobody holds stays
cached until a block is needed and none is free: then the least recently released one is
evicted (LRU).

Thread-safe: the engine's loop and `GenerationSession.generate_ids` share one pool.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional, Sequence

SCRATCH_BLOCK = 0


def block_hash(parent: Optional[int], tokens: Sequence[int]) -> int:
    """The prefix-cache key of a full block: its tokens and everything before them."""
    return hash((parent, tuple(tokens)))


class BlockPool:
    """Blocks 1 .. blocks-1 of the device cache; `limit` (default all) caps how many are used."""

    def __init__(self, blocks: int, block_size: int, prefix_caching: bool = True, limit: Optional[int] = None):
        if blocks < 2:
            raise ValueError(f"a paged cache needs at least 2 blocks (block 0 is scratch), got {blocks}")
        self.blocks = blocks
        self.block_size = block_size
        self._lock = threading.Lock()
        self._reset(prefix_caching, limit)

    def _reset(self, prefix_caching: bool, limit: Optional[int]) -> None:
        usable = self.blocks - 1 if limit is None else max(1, min(limit, self.blocks - 1))
        self.capacity = usable
        self.prefix_caching = prefix_caching
        self._free = list(range(usable, 0, -1))  # popped from the end: block 1 first
        self._refs = [0] * self.blocks
        self._hash_of: dict[int, int] = {}
        self._cached: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()  # registered, unreferenced: LRU first
        self.prefix_queries = 0  # full prompt blocks looked up
        self.prefix_hits = 0  # of which found cached

    def configure(self, prefix_caching: bool = True, limit: Optional[int] = None) -> None:
        """Prefix caching on or off and the most blocks used, for a pool nobody holds a block of
        (an engine taking over its session's pool); the cached prefixes are forgotten."""
        with self._lock:
            held = sum(1 for r in self._refs if r > 0)
            if held:
                raise RuntimeError(f"{held} cache blocks are held (a generation is running on this session): "
                                   f"the pool can be reconfigured only while every block is free")
            self._reset(prefix_caching, limit)

    # -- what is left ---------------------------------------------------------------------
    @property
    def available(self) -> int:
        """Blocks a request can get now: free ones and cached ones nobody holds."""
        with self._lock:
            return len(self._free) + len(self._evictable)

    @property
    def in_use(self) -> int:
        """Blocks some sequence holds."""
        with self._lock:
            return self.capacity - len(self._free) - len(self._evictable)

    @property
    def cached(self) -> int:
        with self._lock:
            return len(self._cached)

    # -- taking and giving back -----------------------------------------------------------
    def allocate(self) -> Optional[int]:
        """A block for one sequence (reference count 1), or None when every block is held."""
        with self._lock:
            if self._free:
                block = self._free.pop()
            elif self._evictable:
                block, _ = self._evictable.popitem(last=False)
                del self._cached[self._hash_of.pop(block)]
            else:
                return None
            self._refs[block] = 1
            return block

    def release(self, blocks: Sequence[int]) -> None:
        """A sequence lets its blocks go: registered ones stay cached (most recent last)."""
        with self._lock:
            for block in blocks:
                self._refs[block] -= 1
                if self._refs[block] > 0:
                    continue
                if block in self._hash_of:
                    self._evictable[block] = None
                else:
                    self._free.append(block)

    # -- the prefix cache -----------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int]) -> tuple[list[int], list[int]]:
        """The cached blocks that hold the leading full blocks of `tokens`, each now held once
        more, and their hashes; stops at the first block not cached."""
        blocks, hashes = [], []
        if not self.prefix_caching:
            return blocks, hashes
        bs = self.block_size
        parent = None
        with self._lock:
            for i in range(len(tokens) // bs):
                h = block_hash(parent, tokens[i * bs:(i + 1) * bs])
                self.prefix_queries += 1
                block = self._cached.get(h)
                if block is None:
                    break
                self.prefix_hits += 1
                if self._refs[block] == 0:
                    self._evictable.pop(block, None)
                self._refs[block] += 1
                blocks.append(block)
                hashes.append(h)
                parent = h
        return blocks, hashes

    def register(self, block: int, parent: Optional[int], tokens: Sequence[int]) -> int:
        """`block` now holds `tokens` (block_size of them) after the block hashed `parent`: cache
        it under its hash (unless another block holds the same already). Returns the hash."""
        h = block_hash(parent, tokens)
        if self.prefix_caching:
            with self._lock:
                if h not in self._cached and block not in self._hash_of:
                    self._cached[h] = block
                    self._hash_of[block] = h
        return h

    @property
    def hit_rate(self) -> float:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0
