"""A worker's requests as blocks that come one after another: its SHARD, then --duration's
TOPUP blocks, each appended as it arrives.

Request k (the k-th the worker releases, over all its blocks) is found in the block that
holds it; a block whose every request has been released is let go (its bodies with it), so a
worker's memory holds the blocks it has not finished releasing, not the run's length.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from workers.protocol import Shard


class ShardBlocks:
    """The shard's requests in release order, block by block."""

    def __init__(self, first: Shard) -> None:
        self.blocks: deque[tuple[int, Shard]] = deque([(0, first)])  # (first k, block)
        self.size = len(first.indices)  # requests received so far, over all blocks
        self.final = not first.config.topup  # no block follows

    def append(self, block: Shard, last: bool) -> None:
        """A TOPUP's requests join the end; ``last``: none follows."""
        if len(block.indices):
            self.blocks.append((self.size, block))
            self.size += len(block.indices)
        self.final = self.final or last

    def _at(self, k: int) -> tuple[Shard, int]:
        for first, block in self.blocks:
            if k < first + len(block.indices):
                return block, k - first
        raise IndexError(f"request {k} of a shard of {self.size}")

    def body(self, k: int) -> bytes:
        """Request k's ready-to-send body."""
        block, j = self._at(k)
        return block.body(j)

    def index(self, k: int) -> int:
        """Request k's index in the run."""
        block, j = self._at(k)
        return int(block.indices[j])

    def due_ns(self, k: int) -> int:
        """Request k's scheduled offset from t0."""
        block, j = self._at(k)
        return int(block.scheduled_ns[j])

    def guard(self, k: int) -> int:
        """Request k's output guard (0: none)."""
        block, j = self._at(k)
        return int(block.max_events[j])

    def let_go(self, released: int) -> None:
        """Drop the blocks whose every request is below ``released`` (keeping the last one,
        whose requests' fields may still be read as they start)."""
        while len(self.blocks) > 1:
            first, block = self.blocks[0]
            if first + len(block.indices) > released:
                return
            self.blocks.popleft()

    def due_count(self, now_ns: int, released: int) -> int:
        """Requests due by ``now_ns`` (from t0) and not yet released."""
        due = 0
        for first, block in self.blocks:
            end = first + len(block.indices)
            if end <= released:
                continue
            start = max(0, released - first)
            late = int(np.searchsorted(block.scheduled_ns[start:], now_ns, "right"))
            due += late
            if late < end - first - start:
                break  # the rest is due later
        return due

    def indices_from(self, k: int) -> list[int]:
        """The run's indices of requests k onwards (those never released, at the end)."""
        out: list[int] = []
        for first, block in self.blocks:
            start = max(0, k - first)
            out.extend(block.indices[start:].tolist())
        return out
