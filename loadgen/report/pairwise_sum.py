"""numpy's sum of a float64 array, to the last bit, from the array's values given as chunks.

numpy's ``np.add.reduce`` of a contiguous float64 array is a pairwise sum whose tree depends
only on the count: blocks of at most 128 values (``BLOCK``) summed with 8 accumulators
(``UNROLL``), split in two with the left half a multiple of 8 above that. With the count known
the same tree is summed over the chunks (``PairwiseSum``): each chunk's whole leaves summed
together, vectorized over leaves, then the tree combined level by level
(loadgen/report/chunked_stats.py: the mean and std of a sample too large to hold).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

BLOCK = 128  # numpy's PW_BLOCKSIZE: a leaf of the pairwise sum
UNROLL = 8


def tree_levels(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pairwise sum's tree over ``n`` values, level by level from the root: each level's
    node lengths in order and which of them split in two (longer than a leaf; the others are
    carried down unchanged), the last level's nodes the leaves."""
    levels = []
    lengths = np.array([n], np.int64)
    while True:
        split = lengths > BLOCK
        levels.append((lengths, split))
        if not split.any():
            return levels
        half = lengths // 2
        half -= half % UNROLL
        width = np.where(split, 2, 1)
        at = np.cumsum(width) - width
        children = np.empty(int(width.sum()), np.int64)
        children[at] = np.where(split, half, lengths)
        children[at[split] + 1] = (lengths - half)[split]
        lengths = children


def combine_leaves(levels: list[tuple[np.ndarray, np.ndarray]], sums: np.ndarray) -> float:
    """The root's sum from the leaves' (``sums``, in order): each split node the sum of its
    left and right child, as numpy adds them, level by level up."""
    for _, split in reversed(levels[:-1]):
        width = np.where(split, 2, 1)
        at = np.cumsum(width) - width
        right = np.minimum(at + 1, len(sums) - 1)
        sums = np.where(split, sums[at] + sums[right], sums[at])
    return float(sums[0])


def leaf_sums(values: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """The sums numpy takes of the leaves ``values[s:s + length]`` for each s in ``starts``:
    one accumulator below 8 values, else 8 accumulators then the rest one by one."""
    block = values[starts[:, None] + np.arange(length)]
    if length < UNROLL:
        total = np.zeros(len(starts))
        for i in range(length):
            total = total + block[:, i]
        return total
    acc = [block[:, j].copy() for j in range(UNROLL)]
    i = UNROLL
    while i < length - length % UNROLL:
        for j in range(UNROLL):
            acc[j] = acc[j] + block[:, i + j]
        i += UNROLL
    total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    for k in range(i, length):
        total = total + block[:, k]
    return total


def _aligned_leaf_sums(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``leaf_sums`` of leaves that start on a multiple of 8 and hold one (all the pairwise
    sum's leaves but perhaps its last): the 8 accumulators are a row of 8 values, each leaf's
    rows added in turn (the same additions in the same order), all leaves at once."""
    rows = values[: len(values) - len(values) % UNROLL].reshape(-1, UNROLL)
    at = starts // UNROLL
    height = sizes // UNROLL
    acc = rows[at]
    for i in range(1, int(height.max())):
        longer = np.flatnonzero(height > i)
        if len(longer) == len(at):
            acc += rows[at + i]
        else:
            acc[longer] += rows[at[longer] + i]
    return ((acc[:, 0] + acc[:, 1]) + (acc[:, 2] + acc[:, 3])) + (
        (acc[:, 4] + acc[:, 5]) + (acc[:, 6] + acc[:, 7])
    )


def _sums_in_order(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The sums of the leaves at ``starts`` of ``sizes``, in their order."""
    out = np.empty(len(starts))
    aligned = (sizes >= UNROLL) & (sizes % UNROLL == 0) & (starts % UNROLL == 0)
    if aligned.all():
        return _aligned_leaf_sums(values, starts, sizes)
    if aligned.any():
        out[aligned] = _aligned_leaf_sums(values, starts[aligned], sizes[aligned])
    for length in np.unique(sizes[~aligned]).tolist():
        picked = ~aligned & (sizes == length)
        out[picked] = leaf_sums(values, starts[picked], length)
    return out


class PairwiseSum:
    """numpy's ``np.add.reduce`` of ``n`` float64 values given as chunks, in their order, bit
    for bit: each chunk's whole leaves summed together (numpy's leaf loop, vectorized over
    leaves), then the tree (``tree_levels``) combined level by level. Memory: one float per
    leaf (at least 64 values each), a chunk, and a leaf's worth of values carried over."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.levels = tree_levels(n)
        self.lengths = self.levels[-1][0]
        self.ends = np.cumsum(self.lengths)
        self.sums = np.empty(len(self.lengths))
        self.done = self.seen = 0  # leaves summed, values they hold
        self.carry = np.zeros(0)

    def add(self, chunk: np.ndarray) -> None:
        """The next values."""
        if len(self.carry):  # the leaf begun by the chunks before, ended from this one's head
            if self.done >= len(self.lengths):
                self.carry = np.concatenate((self.carry, chunk))  # more than counted
                return
            need = int(self.lengths[self.done])
            head = np.concatenate((self.carry, chunk[: need - len(self.carry)]))
            chunk = chunk[need - len(self.carry) :]
            if len(head) < need:
                self.carry = head
                return
            self.sums[self.done] = _sums_in_order(
                head, np.zeros(1, np.int64), self.lengths[self.done : self.done + 1]
            )[0]
            self.carry, self.seen, self.done = np.zeros(0), self.seen + need, self.done + 1
        last = int(np.searchsorted(self.ends, self.seen + len(chunk), side="right"))
        if last > self.done:
            sizes = self.lengths[self.done : last]
            starts = self.ends[self.done : last] - sizes - self.seen
            self.sums[self.done : last] = _sums_in_order(chunk, starts, sizes)
            used = int(self.ends[last - 1]) - self.seen
            self.carry, self.seen, self.done = chunk[used:].copy(), self.seen + used, last
        else:
            self.carry = chunk.copy()

    def total(self) -> float:
        """The sum, once every value was added."""
        if self.done < len(self.lengths):
            raise ValueError(f"the chunks hold fewer values than the {self.n} counted")
        if len(self.carry):
            raise ValueError(f"the chunks hold more values than the {self.n} counted")
        return combine_leaves(self.levels, self.sums)


def pairwise_sum(chunks: Iterable[np.ndarray], n: int) -> float:
    """numpy's ``np.add.reduce`` of the ``n`` float64 values the chunks hold (``PairwiseSum``)."""
    total = PairwiseSum(n)
    for chunk in chunks:
        total.add(chunk)
    return total.total()
