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

from collections.abc import Iterator

import numpy as np


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
        out = np.empty(len(index), dtype=self.dtypes[name])
        for block, at in self._by_block(index):
            arrays = self.blocks[block]
            if arrays is not None:
                out[at] = arrays[name][index[at] - self.bases[block]]
            elif gone is None:
                raise LookupError(f"request {int(index[at][0])}: its block was let go")
            else:
                out[at] = gone
        return out

    def put(self, name: str, index: np.ndarray, value: object) -> None:
        """Set the ``name`` value of requests ``index`` (each in a block still held)."""
        for block, at in self._by_block(index):
            arrays = self.blocks[block]
            if arrays is None:
                raise LookupError(f"request {int(index[at][0])}: its block was let go")
            arrays[name][index[at] - self.bases[block]] = value

    def done(self, index: np.ndarray) -> None:
        """Requests ``index`` are written (each once): a block with none left is let go."""
        for block, at in self._by_block(index):
            self.left[block] -= len(index) if isinstance(at, slice) else int(at.sum())
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

    def _by_block(self, index: np.ndarray) -> Iterator[tuple[int, np.ndarray | slice]]:
        """(block, which of ``index`` lie in it) for each block ``index`` touches."""
        if not len(index):
            return
        if int(index.min()) < 0 or int(index.max()) >= self.size:
            raise LookupError(f"requests {int(index.min())}..{int(index.max())}: not the run's")
        blocks = np.searchsorted(self._starts, index, side="right") - 1
        first, last = int(blocks.min()), int(blocks.max())
        if first == last:  # a batch's requests are nearly always of one block
            yield first, slice(None)
            return
        for block in np.unique(blocks):
            yield int(block), blocks == block
