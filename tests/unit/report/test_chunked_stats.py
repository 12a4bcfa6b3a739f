"""Statistics from chunks equal numpy's on the whole sample, bit for bit: the pairwise sum's
tree, std over the same tree, and the ranks of every percentile and the median, found by
bucket counts with any load limit and any cut of the sample into chunks."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.report.chunked_stats import (
    ROOT_BITS,
    ChunkKeys,
    chunked_stats,
    count_into,
    key_value,
    sortable_keys,
    values_at_ranks,
)
from loadgen.report.pairwise_sum import pairwise_sum, tree_levels
from loadgen.report.stats import sample_stats

PERCENTILES = [50, 90, 99, 99.9, 0, 100, 25, 33.3]
SIZES = [1, 2, 3, 7, 8, 9, 127, 128, 129, 136, 255, 256, 257, 1000, 4099, 30011]


def samples(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Latency-like samples of n values: spread, rounded (ties), constant, and with negatives."""
    return [
        rng.exponential(0.02, n),
        np.round(rng.normal(0.01, 0.003, n), 4),
        np.full(n, 0.0125),
        rng.integers(0, 5, n) / 1e3 - 0.001,
    ]


def cut(rng: np.random.Generator, x: np.ndarray) -> list[np.ndarray]:
    """``x`` in a few chunks at random places, empty ones included."""
    return np.split(x, np.sort(rng.integers(0, len(x) + 1, rng.integers(0, 6))))


@pytest.mark.parametrize("n", SIZES)
def test_the_pairwise_sum_is_numpys_for_any_chunks(n: int) -> None:
    rng = np.random.default_rng(n)
    for x in samples(rng, n):
        assert pairwise_sum(cut(rng, x), n) == np.add.reduce(x)
        leaves = tree_levels(n)[-1][0]
        assert leaves.sum() == n and (leaves <= 128).all()


@pytest.mark.parametrize("n", SIZES)
def test_every_figure_is_sample_stats_to_the_last_bit(n: int) -> None:
    rng = np.random.default_rng(1000 + n)
    for x in samples(rng, n):
        parts = cut(rng, x)
        for limit in (1, 3, 100, 1 << 20):
            got = chunked_stats(lambda p=parts: iter(p), PERCENTILES, scale=1000, load_limit=limit)
            assert got == sample_stats(x, PERCENTILES, scale=1000), (n, limit)


def test_an_empty_sample_gives_the_empty_value() -> None:
    nan = chunked_stats(lambda: iter([np.zeros(0)]), [50, 99], empty=float("nan"))
    assert nan.count == 0 and np.isnan(nan.mean) and np.isnan(nan.at(99))
    assert chunked_stats(lambda: iter([]), [99]) == sample_stats([], [99])


def test_ranks_in_one_key_are_read_off_it_without_loading() -> None:
    x = np.full(5000, 0.003)
    calls = 0

    def chunks() -> list[np.ndarray]:
        nonlocal calls
        calls += 1
        return [x[:2000], x[2000:]]

    assert values_at_ranks(chunks, 5000, [0, 2500, 4999], load_limit=10) == dict.fromkeys(
        [0, 2500, 4999], 0.003
    )
    assert calls == 4  # 64 bits narrowed 16 at a time; no pass loads the 5,000 values


def test_sortable_keys_order_the_values_and_invert() -> None:
    x = np.array([-np.inf, -2.5, -1e-300, 0.0, 1e-300, 1e-3, 2.5, np.inf])
    keys = sortable_keys(x)
    assert (np.diff(keys.astype(object)) > 0).all()
    assert [key_value(int(k)) for k in keys] == x.tolist()


def test_fewer_or_more_values_than_counted_is_an_error() -> None:
    with pytest.raises(ValueError, match="fewer"):
        pairwise_sum([np.ones(100)], 300)
    with pytest.raises(ValueError, match="more"):
        pairwise_sum([np.ones(300)], 200)


@pytest.mark.parametrize("n", SIZES)
def test_a_known_count_gives_the_same_figures(n: int) -> None:
    rng = np.random.default_rng(2000 + n)
    for x in samples(rng, n):
        parts = cut(rng, x)
        for limit in (1, 3, 1 << 20):
            got = chunked_stats(lambda p=parts: iter(p), PERCENTILES, load_limit=limit, count=n)
            assert got == sample_stats(x, PERCENTILES), (n, limit)


def test_two_passes_where_the_count_is_known_and_the_ranks_buckets_are_small() -> None:
    x = np.random.default_rng(5).exponential(0.02, 200_000)
    passes = 0

    def chunks() -> list[np.ndarray]:
        nonlocal passes
        passes += 1
        return np.array_split(x, 7)

    want = sample_stats(x, PERCENTILES, scale=1000)
    assert chunked_stats(chunks, PERCENTILES, scale=1000, count=len(x)) == want
    assert passes == 2  # the sum, max and root counts; the squares and the ranks' values
    passes = 0
    assert chunked_stats(chunks, PERCENTILES, scale=1000) == want
    assert passes == 3  # the count first
    passes = 0
    assert chunked_stats(chunks, PERCENTILES, scale=1000, count=len(x), load_limit=100) == want
    assert passes == 3  # a bucket of more than 100 values narrowed, then loaded


def test_count_into_counts_dense_and_sparse_buckets() -> None:
    counts = np.zeros(1 << 20, np.int64)
    dense = np.array([5, 5, 6, 9], np.int64)
    sparse = np.array([0, 1 << 19, (1 << 20) - 1, 0], np.int64)
    count_into(counts, dense)
    count_into(counts, sparse)
    count_into(counts, np.zeros(0, np.int64))
    want = np.bincount(np.concatenate((dense, sparse)), minlength=1 << 20)
    assert counts.tolist() == want.tolist()


def test_a_chunk_without_a_sign_bit_reads_its_keys_off_its_bits() -> None:
    rng = np.random.default_rng(8)
    positive = np.concatenate((rng.exponential(0.02, 5000), [0.0, np.inf, 5e-324]))
    mixed = np.concatenate((positive, [-0.0, -1e-3]))
    for values in (positive, mixed):
        chunk = ChunkKeys(values)
        assert chunk.plain == (values is positive)
        keys = sortable_keys(values)
        root = (keys >> np.uint64(64 - ROOT_BITS)).astype(np.int64)
        assert chunk.buckets(64, ROOT_BITS).tolist() == root.tolist()
        for shift in (44, 28, 12, 1):
            for key in keys[::997].tolist():
                prefix = key >> shift
                inside = (keys >> np.uint64(shift)) == np.uint64(prefix)
                assert chunk.inside(prefix, shift).tolist() == inside.tolist()
                step = min(16, shift)
                low = (keys[inside] >> np.uint64(shift - step)) & np.uint64((1 << step) - 1)
                got = chunk.buckets(shift, step, chunk.inside(prefix, shift))
                assert got.tolist() == low.astype(np.int64).tolist()
