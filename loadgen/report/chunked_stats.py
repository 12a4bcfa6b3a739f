"""``sample_stats`` of a sample too large to hold: the same figures, to the last bit, from chunks.

The sample is read as chunks of float64 values, once per pass, in one fixed order
(``ChunkedSample``: a pass is ``begin``, ``add`` of each chunk, ``end``; ``chunked_stats`` runs
the passes over a ``chunks()`` that returns a fresh iterable each call). Memory is bounded by a
chunk, a table of counts and the values of the few buckets that hold the ranks asked for;
never the sample. Two passes where the count is known (a first one counts it otherwise):
the sum, the max and a first table of counts; then the squares and the ranks' values.

Each figure is the one numpy computes on the whole array (loadgen/report/stats.py):

- **mean and std**: numpy's sum of a contiguous float64 array is a pairwise sum whose tree
  depends only on the count, so with the count known the same tree is summed over the chunks
  (loadgen/report/pairwise_sum.py); std sums the squares of the deviations from that mean
  with the same tree, as ``np.std`` does.
- **median and percentiles**: the values at the ranks numpy's linear interpolation reads
  (``np.percentile``'s virtual index, its floor and its neighbour) are found by counting the
  values per bucket of their sortable bit pattern (the top ``ROOT_BITS`` bits first), then
  counting again inside the bucket that holds a rank, until the values left are few enough to
  load (loaded in the same pass as other buckets are counted); the interpolation is numpy's
  own formula on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from loadgen.report.pairwise_sum import PairwiseSum
from loadgen.report.stats import SampleStats

Chunks = Callable[[], Iterable[np.ndarray]]

ROOT_BITS = 20  # the first table of counts splits the keys 1,048,576 ways (8 MiB)
BUCKET_BITS = 16  # each later counting pass splits a bucket 65,536 ways
LOAD_LIMIT = 1 << 20  # at most this many values are loaded to find a rank


def chunked_stats(
    chunks: Chunks,
    percentiles: Sequence[float] = (),
    *,
    scale: float = 1.0,
    empty: float = 0.0,
    load_limit: int = LOAD_LIMIT,
    count: int | None = None,
) -> SampleStats:
    """``sample_stats(np.concatenate(list(chunks())), percentiles, scale=..., empty=...)``,
    computed a chunk at a time (the sample is never in memory at once); ``count``: the
    sample's size where it is known (saves the pass that counts it)."""
    sample = ChunkedSample(percentiles, count, load_limit)
    while sample.wants_pass():
        sample.begin()
        for chunk in chunks():
            sample.add(np.ascontiguousarray(chunk, dtype=np.float64))
        sample.end()
    return sample.stats(scale, empty)


class ChunkedSample:
    """The figures of one sample read in passes over its chunks: ``wants_pass``, then
    ``begin``, ``add`` of every chunk in the same order each pass, ``end``; then ``stats``."""

    def __init__(
        self, percentiles: Sequence[float], count: int | None = None, load_limit: int = LOAD_LIMIT
    ) -> None:
        self.percentiles = list(percentiles)
        self.count = count
        self.largest = -np.inf
        self.mean: float | None = None
        self.std: float | None = None
        self.ranks = RankSearch(load_limit)
        self._counting = 0
        self._sum: PairwiseSum | None = None
        self._squares: PairwiseSum | None = None
        self._first = True

    def wants_pass(self) -> bool:
        """Whether a figure still needs a pass over the chunks."""
        if self.count == 0:
            return False
        return self.count is None or self.std is None or not self.ranks.done

    def begin(self) -> None:
        """Start a pass: what it computes follows from what the passes before found."""
        self._counting = 0
        if self.count is not None and self.mean is None:
            self._sum = PairwiseSum(self.count)
        elif self.mean is not None and self.std is None:
            self._squares = PairwiseSum(self.count or 0)
        self.ranks.begin()

    def add(self, chunk: np.ndarray) -> None:
        """A chunk of the pass (contiguous float64)."""
        if self._first:
            self._counting += len(chunk)
            if len(chunk):
                self.largest = max(self.largest, float(np.max(chunk)))
        if self._sum is not None:
            self._sum.add(chunk)
        if self._squares is not None:
            deviations = chunk - self.mean
            self._squares.add(np.multiply(deviations, deviations, out=deviations))
        if self.ranks.reading:
            self.ranks.add(ChunkKeys(chunk))

    def end(self) -> None:
        """The pass's figures."""
        if self._first and self.count is None:
            self.count = self._counting
        self._first = False
        count = self.count or 0
        if self._sum is not None:
            self.mean = float(np.float64(self._sum.total()) / count)
            self._sum = None
        if self._squares is not None:
            self.std = float(np.sqrt(np.float64(self._squares.total()) / count))
            self._squares = None
        self.ranks.end()
        if count and not self.ranks.searching:
            self.ranks.find(self._wanted_ranks())

    def _wanted_ranks(self) -> list[int]:
        count = self.count or 0
        previous, following, _ = percentile_ranks(count, self.percentiles)
        middle = [(count - 1) // 2, count // 2]
        return sorted({*previous.tolist(), *following.tolist(), *middle})

    def stats(self, scale: float, empty: float) -> SampleStats:
        """The sample's figures, each scaled (``empty`` for all of an empty sample)."""
        count = self.count or 0
        if count == 0:
            return SampleStats(
                0, empty, empty, empty, empty, [(p, empty) for p in self.percentiles]
            )
        assert self.mean is not None and self.std is not None  # wants_pass was followed
        values = self.ranks.values
        previous, following, gamma = percentile_ranks(count, self.percentiles)
        at = lerp(
            np.array([values[r] for r in previous.tolist()], dtype=np.float64),
            np.array([values[r] for r in following.tolist()], dtype=np.float64),
            gamma,
        )
        middle = [(count - 1) // 2, count // 2]
        pair = [values[middle[0]]] if count % 2 else [values[middle[0]], values[middle[1]]]
        median = float(np.mean(np.array(pair, dtype=np.float64)))
        return SampleStats(
            count=count,
            mean=self.mean * scale,
            median=median * scale,
            std=self.std * scale,
            max=self.largest * scale,
            percentiles=[(p, float(v) * scale) for p, v in zip(self.percentiles, at, strict=True)],
        )


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


SIGN = np.uint64(1 << 63)


def sortable_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys in the order of the float64 values (negatives' bits flipped, the sign bit
    set on the rest); -0.0 and 0.0 get different keys but sort next to each other."""
    flip = values.view(np.int64) >> np.int64(63)  # all ones for a negative, else 0
    return values.view(np.uint64) ^ (flip.view(np.uint64) | SIGN)


def key_value(key: int) -> float:
    """The float64 whose sortable key is ``key`` (``sortable_keys``' inverse)."""
    bits = key & ~(1 << 63) if key >> 63 else ~key & ((1 << 64) - 1)
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def count_into(counts: np.ndarray, buckets: np.ndarray) -> None:
    """``counts[b] += 1`` for each b in ``buckets`` (int64): a bincount over the span the
    buckets cover, or over the distinct ones where that span is sparse."""
    if not len(buckets):
        return
    low, high = int(buckets.min()), int(buckets.max())
    if high - low < 4 * len(buckets) + 4096:
        counts[low : high + 1] += np.bincount(buckets - low, minlength=high - low + 1)
    else:
        distinct, times = np.unique(buckets, return_counts=True)
        counts[distinct] += times


# A rank's search: the key prefix its value is known to have (``shift``: the bits below the
# prefix; 64 for no prefix yet), its rank among the values with that prefix, and their count.
Search = tuple[int, int, int, int]


class RankSearch:
    """The values at ranks of a sample (0-based, ascending), over passes: the first counts
    every value's top ROOT_BITS key bits (before the ranks are known: the sample's size may
    not be); each later one narrows each rank's bucket BUCKET_BITS further by counting its
    values, or loads them where they are at most ``load_limit`` (or read its value off its key
    where one key is left)."""

    def __init__(self, load_limit: int) -> None:
        self.load_limit = load_limit
        self.values: dict[int, float] = {}
        self.root: np.ndarray | None = None  # the first pass's counts, until the ranks come
        self.searching = False  # ``find`` was given the ranks
        self.reading = False  # this pass reads the chunks
        self._searches: dict[int, Search] = {}
        self._narrowing: dict[tuple[int, int], np.ndarray] = {}
        self._loading: dict[tuple[int, int], list[np.ndarray]] = {}

    @property
    def done(self) -> bool:
        """Whether every rank's value is known."""
        return self.searching and not self._searches

    def find(self, ranks: Sequence[int]) -> None:
        """The ranks to find, once the first pass counted the root buckets."""
        assert self.root is not None  # the first pass ran
        self.searching = True
        total = int(self.root.sum())
        self._searches = {r: (0, 64, r, total) for r in ranks}
        self._searches = self._narrowed({(0, 64): self.root})
        self.root = None
        self._read_off_keys()

    def begin(self) -> None:
        """Plan a pass: the first counts the root buckets; later ones narrow or load."""
        self._narrowing, self._loading = {}, {}
        if not self.searching:
            if self.root is None:
                self.root = np.zeros(1 << ROOT_BITS, np.int64)
                self.reading = True
            return
        for prefix, shift, _, size in self._searches.values():
            if size <= self.load_limit:
                self._loading[prefix, shift] = []
            else:
                self._narrowing[prefix, shift] = np.zeros(1 << min(BUCKET_BITS, shift), np.int64)
        self.reading = bool(self._narrowing or self._loading)

    def add(self, chunk: ChunkKeys) -> None:
        """A chunk's values (and their keys)."""
        if self.root is not None and not self.searching:
            count_into(self.root, chunk.buckets(64, ROOT_BITS))
            return
        for (prefix, shift), counts in self._narrowing.items():
            step = min(BUCKET_BITS, shift)
            count_into(counts, chunk.buckets(shift, step, chunk.inside(prefix, shift)))
        for (prefix, shift), kept in self._loading.items():
            kept.append(chunk.values[chunk.inside(prefix, shift)])

    def end(self) -> None:
        """The pass's narrowed buckets and loaded values."""
        self.reading = False
        if not self.searching:
            return
        for rank, (prefix, shift, within, _) in list(self._searches.items()):
            if (prefix, shift) in self._loading:
                values = np.concatenate(self._loading[prefix, shift])
                self.values[rank] = float(np.partition(values, within)[within])
                del self._searches[rank]
        self._searches.update(self._narrowed(self._narrowing))
        self._narrowing, self._loading = {}, {}
        self._read_off_keys()

    def _narrowed(self, counted: dict[tuple[int, int], np.ndarray]) -> dict[int, Search]:
        """Each search whose prefix was counted, extended to the bucket that holds its rank."""
        out = {}
        for rank, (prefix, shift, within, _) in self._searches.items():
            if (prefix, shift) not in counted:
                continue
            counts = counted[prefix, shift]
            step = len(counts).bit_length() - 1
            cumulative = np.cumsum(counts)
            bucket = int(np.searchsorted(cumulative, within, side="right"))
            before = int(cumulative[bucket - 1]) if bucket else 0
            size = int(cumulative[bucket]) - before
            out[rank] = ((prefix << step) | bucket, shift - step, within - before, size)
        return out

    def _read_off_keys(self) -> None:
        """The ranks whose bucket is down to one key: its value, with no pass."""
        for rank, (prefix, shift, _, _) in list(self._searches.items()):
            if shift == 0:
                self.values[rank] = key_value(prefix)
                del self._searches[rank]


class ChunkKeys:
    """A chunk's sortable keys as far as a search reads them. Where no value has its sign bit
    set (latencies, mostly) a key is its bits plus 2**63: its prefixes and buckets are read
    off the bits themselves, no key computed."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        bits = values.view(np.int64)
        self.plain = not len(bits) or int(bits.min()) >= 0
        self._keys = bits if self.plain else sortable_keys(values)
        self._tops: dict[int, np.ndarray] = {}

    def inside(self, prefix: int, shift: int) -> np.ndarray:
        """Which keys have ``prefix`` above their ``shift`` low bits."""
        if shift >= 64:
            return np.ones(len(self.values), dtype=bool)
        if shift not in self._tops:
            by = np.int64(shift) if self.plain else np.uint64(shift)
            self._tops[shift] = self._keys >> by
        if self.plain:  # (bits + 2**63) >> shift == (bits >> shift) + 2**(63 - shift)
            return self._tops[shift] == np.int64(prefix - (1 << (63 - shift)))
        return self._tops[shift] == np.uint64(prefix)

    def buckets(self, shift: int, step: int, picked: np.ndarray | None = None) -> np.ndarray:
        """The ``step`` key bits below the top ``64 - shift`` of the (``picked``) keys (int64)."""
        keys = self._keys if picked is None else self._keys[picked]
        low = shift - step
        if not self.plain:
            mask = np.uint64((1 << step) - 1)
            return ((keys >> np.uint64(low)) & mask).astype(np.int64)
        top = keys >> np.int64(low)  # the key's 2**63 adds 2**(63 - low): above the step's bits
        if shift >= 64:
            return top + np.int64(1 << (63 - low))
        return top & np.int64((1 << step) - 1)


def values_at_ranks(
    chunks: Chunks, n: int, ranks: Sequence[int], load_limit: int
) -> dict[int, float]:
    """The value at each rank (0-based, ascending) of the sample of ``n`` values the chunks
    hold (``RankSearch``, a pass over the chunks at a time)."""
    search = RankSearch(load_limit)
    while not search.done:
        search.begin()
        for chunk in chunks():
            search.add(ChunkKeys(np.ascontiguousarray(chunk, dtype=np.float64)))
        search.end()
        if not search.searching:
            search.find(ranks)
    return search.values
