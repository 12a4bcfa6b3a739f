"""Percentiles of each time bin of a sample too large to hold, to the last bit numpy's per bin.

report.html draws a latency's p50/p90/p99 per time bin (``html_figures.percentile_bands``); for
ITL the sample is one value per token event, read a chunk at a time. ``binned_percentiles``
finds, for every bin at once, the values at the ranks ``np.percentile`` reads (its virtual
index, floor and neighbour: ``chunked_stats.percentile_ranks``) by counting passes over
buckets of the values' sortable keys (``chunked_stats.sortable_keys``), each search keyed by
its bin and its key prefix, until a search's bucket is small enough to load; then numpy's own
interpolation. Memory: a chunk, a count table of (searches x 256) and the values loaded for the
last step, never the sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from loadgen.report.chunked_stats import key_value, lerp, percentile_ranks, sortable_keys

# Each call gives a fresh pass: (bin index in [0, bins), value) pairs, one chunk at a time.
BinnedChunks = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]

STEP_BITS = 8  # each counting pass splits a search's key range 256 ways
LOAD_LIMIT = 1 << 12  # a search loads its bucket's values once it holds at most this many
MAX_BINS = 1 << 8  # the bin index and a key prefix of up to 56 bits share one uint64 code


def binned_percentiles(
    chunks: BinnedChunks, bins: int, quantiles: Sequence[float], load_limit: int = LOAD_LIMIT
) -> np.ndarray:
    """``np.percentile`` of each bin's values at ``quantiles`` (percent), shape [bins,
    quantiles]; NaN where a bin has no value."""
    if bins > MAX_BINS:
        raise ValueError(f"binned_percentiles: at most {MAX_BINS} bins, not {bins}")
    out = np.full((bins, len(quantiles)), np.nan)
    counts = np.zeros(bins, np.int64)
    for index, _ in chunks():
        counts += np.bincount(index, minlength=bins)
    # A search: (bin, rank) -> [prefix, shift, rank within the prefix's values, their count].
    searches: dict[tuple[int, int], list[int]] = {}
    plans = {}
    for b in np.flatnonzero(counts).tolist():
        n = int(counts[b])
        previous, following, gamma = percentile_ranks(n, quantiles)
        plans[b] = (previous, following, gamma)
        for rank in {*previous.tolist(), *following.tolist()}:
            searches[b, rank] = [0, 64, rank, n]
    shift = 64
    while shift > 0:
        wide = {key: s for key, s in searches.items() if s[3] > load_limit}
        if not wide:
            break
        _narrow(chunks, wide, shift)
        shift -= STEP_BITS
    values = _load(chunks, searches)
    for b, (previous, following, gamma) in plans.items():
        below = np.array([values[b, r] for r in previous.tolist()], dtype=np.float64)
        above = np.array([values[b, r] for r in following.tolist()], dtype=np.float64)
        out[b] = lerp(below, above, gamma)
    return out


def _codes(index: np.ndarray, keys: np.ndarray, shift: int) -> np.ndarray:
    """Each value's (bin, key prefix above ``shift`` bits) as one uint64."""
    if shift >= 64:
        return index.astype(np.uint64)
    prefix = keys >> np.uint64(shift)
    return (index.astype(np.uint64) << np.uint64(64 - shift)) | prefix


def _code(b: int, prefix: int, shift: int) -> int:
    return b if shift >= 64 else (b << (64 - shift)) | prefix


def _narrow(chunks: BinnedChunks, wide: dict[tuple[int, int], list[int]], shift: int) -> None:
    """One counting pass: each wide search's prefix extended by STEP_BITS bits, to the bucket
    that holds its rank (every wide search is at ``shift``: all were narrowed alike)."""
    codes = np.array(sorted({_code(b, s[0], shift) for (b, _), s in wide.items()}), np.uint64)
    size = 1 << STEP_BITS
    table = np.zeros(len(codes) * size, np.int64)
    low = np.uint64(shift - STEP_BITS)
    for index, values in chunks():
        keys = sortable_keys(np.ascontiguousarray(values, dtype=np.float64))
        value_codes = _codes(index, keys, shift)
        at = np.searchsorted(codes, value_codes)
        at[at == len(codes)] = 0
        match = codes[at] == value_codes
        bucket = ((keys[match] >> low) & np.uint64(size - 1)).astype(np.int64)
        table += np.bincount(at[match] * size + bucket, minlength=len(table))
    for (b, _), search in wide.items():
        row = int(np.searchsorted(codes, np.uint64(_code(b, search[0], shift))))
        cumulative = np.cumsum(table[row * size : (row + 1) * size])
        bucket = int(np.searchsorted(cumulative, search[2], side="right"))
        before = int(cumulative[bucket - 1]) if bucket else 0
        search[0] = (search[0] << STEP_BITS) | bucket
        search[1] = shift - STEP_BITS
        search[2] -= before
        search[3] = int(cumulative[bucket]) - before


def _load(
    chunks: BinnedChunks, searches: dict[tuple[int, int], list[int]]
) -> dict[tuple[int, int], float]:
    """The value at each search's rank: read off its key where the prefix is the whole key,
    else from one pass that keeps the values of each remaining (bin, prefix)."""
    out = {key: key_value(s[0]) for key, s in searches.items() if s[1] == 0}
    loading = {(b, s[0], s[1]) for (b, r), s in searches.items() if (b, r) not in out}
    if not loading:
        return out
    by_shift: dict[int, np.ndarray] = {}
    for shift in {s for _, _, s in loading}:
        by_shift[shift] = np.array(
            sorted(_code(b, p, s) for b, p, s in loading if s == shift), np.uint64
        )
    kept: dict[tuple[int, int], list[np.ndarray]] = {}
    for index, values in chunks():
        values = np.ascontiguousarray(values, dtype=np.float64)
        keys = sortable_keys(values)
        for shift, codes in by_shift.items():
            value_codes = _codes(index, keys, shift)
            at = np.searchsorted(codes, value_codes)
            at[at == len(codes)] = 0
            match = codes[at] == value_codes
            for row in np.unique(at[match]).tolist():
                kept.setdefault((shift, int(codes[row])), []).append(values[match & (at == row)])
    for (b, rank), search in searches.items():
        if (b, rank) in out:
            continue
        parts = kept.get((search[1], _code(b, search[0], search[1])), [])
        loaded = np.concatenate(parts) if parts else np.zeros(0)
        out[b, rank] = float(np.partition(loaded, search[2])[search[2]])
    return out
