"""Per-request values of a run, held block by block until each block's requests are written.

The records file's writer needs each row's schedule offset, prompt length and input sequences
when the row arrives (its columns), and a --duration run's requests come in blocks while it
goes (loadgen/session/topup.py). ``RequestBlocks`` holds those values a block at a time and
lets a block's go once every one of its requests has been written: the file keeps them from
then on, and they are read back from it at the run's end (loadgen/records/read_back.py), so
what the coordinator holds is the blocks still being answered, whatever the run's length. A
block with a request never written (a lost worker's, or one the file refused on a full disk)
is held to the end: its values are there for the report. The collector holds each request's
worker and whether one reported it the same way (loadgen/fleet/collector.py), a block let go
once each of its requests is reported.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import numpy as np

# Which of a lookup's requests lie in one block: all of them (None), or a mask.
Where = np.ndarray | None


class RequestBlocks:
    """Named per-request arrays over a run's requests, block after block (each name keeps
    its first block's dtype); a block's arrays are let go once each of its requests is
    ``done``."""

    def __init__(self, **first: np.ndarray) -> None:
        self.names = tuple(first)
        self.dtypes = {name: np.asarray(values).dtype for name, values in first.items()}
        self.size = 0  # requests in every block so far
        self.bases: list[int] = []  # each block's first request
        self.blocks: list[dict[str, np.ndarray] | None] = []  # None: let go
        self.left: list[int] = []  # each block's requests not done yet
        self._starts = np.zeros(0, dtype=np.int64)
        self.add(**first)

    def add(self, **arrays: np.ndarray) -> None:
        """A block's requests join, after every block so far (each name's array)."""
        if set(arrays) != set(self.names):
            raise ValueError(f"a block has {sorted(arrays)}, not {sorted(self.names)}")
        values = {name: np.asarray(arrays[name], dtype=self.dtypes[name]) for name in self.names}
        count = len(values[self.names[0]])
        self.bases.append(self.size)
        self.blocks.append(values if count else None)
        self.left.append(count)
        self.size += count
        self._starts = np.array(self.bases, dtype=np.int64)

    def take(self, name: str, index: np.ndarray, gone: object = None) -> np.ndarray:
        """The ``name`` values of requests ``index``: ``gone`` for those of a block let go
        (None: each must be in a block still held)."""
        located = self._by_block(index)
        if len(located) == 1:  # (nearly always) one block: no copy through ``out``
            block, _ = located[0]
            arrays = self.blocks[block]
            if arrays is not None:
                return arrays[name][index - self.bases[block]]
        out = np.empty(len(index), dtype=self.dtypes[name])
        for block, at in located:
            arrays = self.blocks[block]
            mine = index if at is None else index[at]
            if arrays is not None:
                out[_all(at)] = arrays[name][mine - self.bases[block]]
            elif gone is None:
                raise LookupError(f"request {int(mine[0])}: its block was let go")
            else:
                out[_all(at)] = gone
        return out

    def done(self, index: np.ndarray, **values: object) -> None:
        """Requests ``index`` are done (each once), their ``values`` set first: a block with
        none left is let go."""
        for block, at in self._by_block(index):
            arrays = self.blocks[block]
            mine = index if at is None else index[at]
            if arrays is None:
                raise LookupError(f"request {int(mine[0])}: its block was let go")
            for name, value in values.items():
                arrays[name][mine - self.bases[block]] = value
            self.left[block] -= len(mine)
            if self.left[block] <= 0:
                self.blocks[block] = None

    def held(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """The blocks still held, as (first request, arrays)."""
        for base, arrays in zip(self.bases, self.blocks, strict=True):
            if arrays is not None:
                yield base, arrays

    def whole(self, known: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Every request's values by name: ``known`` (values read back; -1 where none was),
        then the blocks still held over them."""
        out = {}
        for name in self.names:
            values = None if known is None else known.get(name)
            dtype = self.dtypes[name]
            out[name] = (
                np.full(self.size, -1, dtype=dtype)
                if values is None
                else np.asarray(values, dtype=dtype).copy()
            )
        for base, arrays in self.held():
            for name in self.names:
                out[name][base : base + len(arrays[name])] = arrays[name]
        return out

    def _by_block(self, index: np.ndarray) -> list[tuple[int, Where]]:
        """(block, which of ``index`` lie in it) for each block ``index`` touches."""
        if not len(index):
            return []
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= self.size:
            raise LookupError(f"requests {low}..{high}: not the run's")
        # (an empty block shares its base with the next: bisect_right finds the next)
        first = bisect.bisect_right(self.bases, low) - 1
        if first == bisect.bisect_right(self.bases, high) - 1:  # nearly always: one block
            return [(first, None)]
        blocks = np.searchsorted(self._starts, index, side="right") - 1
        return [(int(block), blocks == block) for block in np.unique(blocks)]


def _all(at: Where) -> np.ndarray | slice:
    """``at`` as an index: every position where it is None."""
    return slice(None) if at is None else at
