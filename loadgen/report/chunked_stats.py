"""``sample_stats`` of a sample too large to hold: the same figures, to the last bit, from chunks.

The sample is read as chunks of float64 values, again for each pass (``chunks()`` returns a
fresh iterable each call), in one fixed order. Memory is bounded by a chunk, a table of
counts and the values of the few buckets that hold the ranks asked for; never the sample.

Each figure is the one numpy computes on the whole array (loadgen/report/stats.py):

- **mean and std**: numpy's sum of a contiguous float64 array is a pairwise sum whose tree
  depends only on the count (blocks of at most 128 summed with 8 accumulators, split in two
  with the left half a multiple of 8 above that: ``pairwise_sum``), so with the count known
  from a first pass the same tree is summed over the chunks; std sums the squares of the
  deviations from that mean with the same tree, as ``np.std`` does.
- **median and percentiles**: the values at the ranks numpy's linear interpolation reads
  (``np.percentile``'s virtual index, its floor and its neighbour) are found by counting the
  values per bucket of their sortable bit pattern, then counting again inside the bucket that
  holds a rank, until the values left are few enough to load; the interpolation is numpy's
  own formula on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from loadgen.report.stats import SampleStats

Chunks = Callable[[], Iterable[np.ndarray]]

BLOCK = 128  # numpy's PW_BLOCKSIZE: a leaf of the pairwise sum
UNROLL = 8
BUCKET_BITS = 16  # each counting pass splits a key range 65,536 ways
LOAD_LIMIT = 1 << 20  # at most this many values are loaded to find a rank


def chunked_stats(
    chunks: Chunks,
    percentiles: Sequence[float] = (),
    *,
    scale: float = 1.0,
    empty: float = 0.0,
    load_limit: int = LOAD_LIMIT,
) -> SampleStats:
    """``sample_stats(np.concatenate(list(chunks())), percentiles, scale=..., empty=...)``,
    computed a chunk at a time (the sample is never in memory at once)."""
    count, largest = 0, -np.inf
    for chunk in _float_chunks(chunks):
        count += len(chunk)
        if len(chunk):
            largest = max(largest, float(np.max(chunk)))
    if count == 0:
        return SampleStats(0, empty, empty, empty, empty, [(p, empty) for p in percentiles])
    mean = float(np.float64(pairwise_sum(_float_chunks(chunks), count)) / count)
    squares = ((chunk - mean) * (chunk - mean) for chunk in _float_chunks(chunks))
    std = float(np.sqrt(np.float64(pairwise_sum(squares, count)) / count))
    previous, following, gamma = percentile_ranks(count, percentiles)
    middle = [(count - 1) // 2, count // 2]
    ranks = sorted({*previous.tolist(), *following.tolist(), *middle})
    values = values_at_ranks(chunks, count, ranks, load_limit)
    at = lerp(
        np.array([values[r] for r in previous.tolist()], dtype=np.float64),
        np.array([values[r] for r in following.tolist()], dtype=np.float64),
        gamma,
    )
    pair = [values[middle[0]]] if count % 2 else [values[middle[0]], values[middle[1]]]
    median = float(np.mean(np.array(pair, dtype=np.float64)))
    return SampleStats(
        count=count,
        mean=mean * scale,
        median=median * scale,
        std=std * scale,
        max=largest * scale,
        percentiles=[(p, float(v) * scale) for p, v in zip(percentiles, at, strict=True)],
    )


def _float_chunks(chunks: Chunks) -> Iterator[np.ndarray]:
    for chunk in chunks():
        yield np.ascontiguousarray(chunk, dtype=np.float64)


# --- the pairwise sum ------------------------------------------------------------------------


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


def _sums_in_order(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The sums of the leaves at ``starts`` of ``sizes``, in their order."""
    out = np.empty(len(starts))
    for length in np.unique(sizes).tolist():
        picked = sizes == length
        out[picked] = leaf_sums(values, starts[picked], length)
    return out


def pairwise_sum(chunks: Iterable[np.ndarray], n: int) -> float:
    """numpy's ``np.add.reduce`` of the ``n`` float64 values the chunks hold, in their order,
    bit for bit: each chunk's whole leaves summed together (numpy's leaf loop, vectorized over
    leaves), then the tree (``tree_levels``) combined level by level. Memory: one float per
    leaf (at least 64 values each), a chunk, and a leaf's worth of values carried over."""
    levels = tree_levels(n)
    lengths = levels[-1][0]
    ends = np.cumsum(lengths)
    sums = np.empty(len(lengths))
    done = seen = 0  # leaves summed, values they hold
    carry = np.zeros(0)
    for chunk in chunks:
        values = np.concatenate((carry, chunk)) if len(carry) else chunk
        last = int(np.searchsorted(ends, seen + len(values), side="right"))
        if last > done:
            sizes = lengths[done:last]
            sums[done:last] = _sums_in_order(values, ends[done:last] - sizes - seen, sizes)
            used = int(ends[last - 1]) - seen
            carry, seen, done = values[used:], seen + used, last
        else:
            carry = values
    if done < len(lengths):
        raise ValueError(f"the chunks hold fewer values than the {n} counted")
    if len(carry):
        raise ValueError(f"the chunks hold more values than the {n} counted")
    return combine_leaves(levels, sums)


# --- ranks -----------------------------------------------------------------------------------


def percentile_ranks(
    n: int, percentiles: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranks ``np.percentile`` (linear) reads in a sorted sample of ``n`` values, below and
    above each percentile, and its interpolation weights, as numpy computes them."""
    if not len(percentiles):
        empty = np.zeros(0, np.intp)
        return empty, empty, np.zeros(0)
    quantiles = np.true_divide(np.asanyarray(list(percentiles)), 100)
    virtual = np.asanyarray((n - 1) * quantiles)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = -1
    following[above] = -1
    below = virtual < 0
    previous[below] = 0
    following[below] = 0
    previous_i, following_i = previous.astype(np.intp), following.astype(np.intp)
    gamma = np.asanyarray(virtual - previous_i, dtype=virtual.dtype)
    return previous_i % n, following_i % n, gamma


def lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's linear interpolation between neighbours (``np.percentile``'s own formula)."""
    diff_b_a = b - a
    out = np.add(a, diff_b_a * t)
    np.subtract(b, diff_b_a * (1 - t), out=out, where=t >= 0.5)
    return out


def sortable_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys in the order of the float64 values (negatives flipped, the sign bit set on
    the rest); -0.0 and 0.0 get different keys but sort next to each other."""
    bits = values.view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    return np.where(negative, ~bits, bits | np.uint64(1 << 63))


def key_value(key: int) -> float:
    """The float64 whose sortable key is ``key`` (``sortable_keys``' inverse)."""
    bits = key & ~(1 << 63) if key >> 63 else ~key & ((1 << 64) - 1)
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


# A rank's search: the key prefix its value is known to have (``shift``: the bits below the
# prefix; 64 for no prefix yet), its rank among the values with that prefix, and their count.
Search = tuple[int, int, int, int]


def values_at_ranks(
    chunks: Chunks, n: int, ranks: Sequence[int], load_limit: int
) -> dict[int, float]:
    """The value at each rank (0-based, ascending) of the sample of ``n`` values: counting
    passes over buckets of the values' sortable keys narrow each rank to the bucket that holds
    it, until its bucket has at most ``load_limit`` values (or one key); one last pass loads
    those values."""
    searches: dict[int, Search] = {rank: (0, 64, rank, n) for rank in ranks}
    while True:
        wide = {r: s for r, s in searches.items() if s[3] > load_limit and s[1] > 0}
        if not wide:
            break
        searches.update(_narrow(chunks, wide))
    return _load(chunks, searches)


def _in_prefix(keys: np.ndarray, prefix: int, shift: int) -> np.ndarray:
    """Which keys have ``prefix`` above their ``shift`` low bits."""
    if shift >= 64:
        return np.ones(len(keys), dtype=bool)
    return (keys >> np.uint64(shift)) == np.uint64(prefix)


def _narrow(chunks: Chunks, searches: dict[int, Search]) -> dict[int, Search]:
    """One counting pass: each search's prefix extended by up to BUCKET_BITS bits, to the
    bucket that holds its rank."""
    prefixes = {(prefix, shift) for prefix, shift, _, _ in searches.values()}
    counts = {key: np.zeros(1 << min(BUCKET_BITS, key[1]), np.int64) for key in prefixes}
    for chunk in _float_chunks(chunks):
        keys = sortable_keys(chunk)
        for prefix, shift in prefixes:
            step = min(BUCKET_BITS, shift)
            inside = keys[_in_prefix(keys, prefix, shift)]
            bucket = (inside >> np.uint64(shift - step)) & np.uint64((1 << step) - 1)
            counts[prefix, shift] += np.bincount(bucket.astype(np.int64), minlength=1 << step)
    out = {}
    for rank, (prefix, shift, within, _) in searches.items():
        step = min(BUCKET_BITS, shift)
        cumulative = np.cumsum(counts[prefix, shift])
        bucket = int(np.searchsorted(cumulative, within, side="right"))
        before = int(cumulative[bucket - 1]) if bucket else 0
        size = int(cumulative[bucket]) - before
        out[rank] = ((prefix << step) | bucket, shift - step, within - before, size)
    return out


def _load(chunks: Chunks, searches: dict[int, Search]) -> dict[int, float]:
    """The value at each search's rank: read off its key where that is down to one key, else
    by one pass that keeps the values with its prefix."""
    out = {
        rank: key_value(prefix) for rank, (prefix, shift, _, _) in searches.items() if shift == 0
    }
    loading = {(p, s) for r, (p, s, _, _) in searches.items() if r not in out}
    if not loading:
        return out
    kept: dict[tuple[int, int], list[np.ndarray]] = {key: [] for key in loading}
    for chunk in _float_chunks(chunks):
        keys = sortable_keys(chunk)
        for prefix, shift in loading:
            kept[prefix, shift].append(chunk[_in_prefix(keys, prefix, shift)])
    for rank, (prefix, shift, within, _) in searches.items():
        if rank not in out:
            values = np.concatenate(kept[prefix, shift])
            out[rank] = float(np.partition(values, within)[within])
    return out
