"""Tests for the global arrival schedule (reference §3.3) and its sharding over workers."""

from __future__ import annotations

import hashlib
import math
import struct

import numpy as np
import pytest

from loadgen.schedule import (
    arrival_offsets_s,
    assign_workers,
    schedule_hash,
    split_concurrency,
    to_ns,
)

INF = float("inf")


# --- arrival_offsets_s ----------------------------------------------------------------------


@pytest.mark.parametrize("burstiness", [1.0, 0.3, INF])
def test_infinite_rate_gives_all_zeros(burstiness):
    offsets = arrival_offsets_s(50, INF, burstiness, seed=0)
    assert offsets.shape == (50,)
    assert offsets.dtype == np.float64
    assert not offsets.any()


@pytest.mark.parametrize(("n", "rate"), [(1, 2.0), (10, 4.0), (7, 0.3), (1000, 13.7)])
def test_infinite_burstiness_gives_constant_gaps(n, rate):
    offsets = arrival_offsets_s(n, rate, INF, seed=123)
    gaps = np.diff(np.concatenate(([0.0], offsets)))
    np.testing.assert_allclose(gaps, 1.0 / rate, rtol=1e-9)
    assert offsets[-1] == pytest.approx(n / rate, rel=1e-15)
    # the seed plays no part when there is no randomness
    np.testing.assert_array_equal(offsets, arrival_offsets_s(n, rate, INF, seed=999))


def test_same_seed_same_schedule():
    a = arrival_offsets_s(500, 8.0, 0.7, seed=42)
    b = arrival_offsets_s(500, 8.0, 0.7, seed=42)
    np.testing.assert_array_equal(a, b)


def test_different_seed_different_schedule():
    a = arrival_offsets_s(500, 8.0, 0.7, seed=42)
    b = arrival_offsets_s(500, 8.0, 0.7, seed=43)
    assert not np.allclose(a[:-1], b[:-1])
    assert a[-1] == pytest.approx(b[-1], rel=1e-15)  # both end at N/rate


@pytest.mark.parametrize(
    ("n", "rate", "burstiness", "seed"),
    [
        (1000, 10.0, INF, 0),  # constant gaps: 1000 * 0.1 sums to 99.9999999999986
        (1000, 13.7, INF, 0),
        (1000, 10.0, 1.0, 7),
        (100, 4.0, 1.0, 0),
        (10, 3.0, 1.0, 1),
        (200, 3.0, 0.5, 0),
        (500, 7.0, 2.0, 3),
        (1, 5.0, 1.0, 0),
    ],
)
def test_last_offset_is_exactly_n_over_rate(n, rate, burstiness, seed):
    # the module promises t_{N-1} = N / rate exactly (reference §3.3: "exactly N/rate")
    offsets = arrival_offsets_s(n, rate, burstiness, seed)
    assert offsets[-1] == n / rate


@pytest.mark.parametrize("burstiness", [0.05, 0.25, 1.0, 4.0, INF])
def test_offsets_are_monotone_and_positive(burstiness):
    offsets = arrival_offsets_s(5000, 50.0, burstiness, seed=11)
    assert (np.diff(offsets) >= 0).all()
    assert offsets[0] >= 0


@pytest.mark.parametrize("burstiness", [1.0, 4.0, 0.25])
def test_gap_statistics(burstiness):
    n, rate = 20000, 25.0
    offsets = arrival_offsets_s(n, rate, burstiness, seed=2024)
    gaps = np.diff(np.concatenate(([0.0], offsets)))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    # gamma(k, theta): CV = sqrt(k) theta / (k theta) = 1 / sqrt(k)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.07)


def test_rate_only_scales_the_schedule():
    # gamma(k, 1/(r k)) = standard_gamma(k) / (r k): same seed, rate r gives offsets(1) / r
    base = arrival_offsets_s(300, 1.0, 0.5, seed=5)
    fast = arrival_offsets_s(300, 20.0, 0.5, seed=5)
    np.testing.assert_allclose(fast * 20.0, base, rtol=1e-12)


@pytest.mark.parametrize(
    ("n", "rate", "burstiness", "seed"), [(64, 5.0, 1.0, 0), (200, 3.3, 0.4, 9)]
)
def test_matches_hand_computation(n, rate, burstiness, seed):
    offsets = arrival_offsets_s(n, rate, burstiness, seed)

    # vectorised: RandomState.gamma + cumsum + rescale
    theta = 1.0 / (rate * burstiness)
    gaps = np.random.RandomState(seed).gamma(shape=burstiness, scale=theta, size=n)
    cum = np.cumsum(gaps)
    expected = cum * ((n / rate) / cum[-1])

    # upstream's loop: one scalar draw per request from the seeded legacy generator, a running
    # sum, then `delay * normalize_factor` per element
    rng = np.random.RandomState(seed)
    delays = [rng.gamma(shape=burstiness, scale=theta) for _ in range(n)]
    for i in range(1, n):
        delays[i] += delays[i - 1]
    factor = (n / rate) / delays[-1]
    upstream = [d * factor for d in delays]

    np.testing.assert_array_equal(expected, upstream)
    # bit-identical to upstream's instants; the last may differ from it by the rounding that
    # makes it exactly N / rate
    np.testing.assert_array_equal(offsets[:-1], expected[:-1])
    assert offsets[-1] == pytest.approx(expected[-1], rel=1e-15)


@pytest.mark.parametrize(
    ("n", "rate", "burstiness"),
    [
        (0, 1.0, 1.0),
        (-1, 1.0, 1.0),
        (10, 0.0, 1.0),
        (10, -2.0, 1.0),
        (10, float("nan"), 1.0),
        (10, 1.0, 0.0),
        (10, 1.0, -1.0),
        (10, 1.0, float("nan")),
    ],
)
def test_bad_arguments_raise(n, rate, burstiness):
    with pytest.raises(ValueError):
        arrival_offsets_s(n, rate, burstiness, seed=0)


# --- to_ns / schedule_hash ----------------------------------------------------------------


def test_to_ns_rounds_to_int64_nanoseconds():
    ns = to_ns(np.array([0.0, 1.0, 1.2345678904, 2.0000000006, 100.0 / 3]))
    assert ns.dtype == np.int64
    assert ns.tolist() == [0, 1_000_000_000, 1_234_567_890, 2_000_000_001, 33_333_333_333]


def test_schedule_hash_is_sha256_of_little_endian_int64():
    values = [0, 1, 250_000_000, 2**40 + 7]
    expected = hashlib.sha256(struct.pack("<4q", *values)).hexdigest()[:16]
    assert schedule_hash(np.array(values, dtype=np.int64)) == expected
    assert len(expected) == 16
    # independent of the container's dtype or byte order
    assert schedule_hash(np.array(values[:3], dtype=np.int32)) == schedule_hash(
        np.array(values[:3], dtype=">i8")
    )
    assert schedule_hash(values) == expected


def test_schedule_hash_stable_and_sensitive():
    ns = to_ns(arrival_offsets_s(1000, 10.0, 1.0, seed=0))
    h = schedule_hash(ns)
    assert h == schedule_hash(ns.copy())
    assert h == schedule_hash(to_ns(arrival_offsets_s(1000, 10.0, 1.0, seed=0)))
    for i in (0, 500, 999):
        bumped = ns.copy()
        bumped[i] += 1  # one nanosecond
        assert schedule_hash(bumped) != h
    assert schedule_hash(ns[::-1]) != h
    assert schedule_hash(to_ns(arrival_offsets_s(1000, 10.0, 1.0, seed=1))) != h


# --- split_concurrency / assign_workers ---------------------------------------------------


@pytest.mark.parametrize("cap", [None, 0])
def test_split_concurrency_uncapped(cap):
    assert split_concurrency(cap, 4) == [0, 0, 0, 0]


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("cap", [1, 2, 3, 5, 10, 64, 100, 257])
def test_split_concurrency_shares_sum_to_cap(cap, workers):
    shares = split_concurrency(cap, workers)
    assert len(shares) == workers
    assert sum(shares) == cap
    assert max(shares) - min(shares) <= 1
    assert shares == sorted(shares, reverse=True)


def test_split_concurrency_examples():
    assert split_concurrency(5, 3) == [2, 2, 1]
    assert split_concurrency(2, 3) == [1, 1, 0]
    assert split_concurrency(12, 4) == [3, 3, 3, 3]


def test_assign_workers_uncapped_is_round_robin():
    owner = assign_workers(10, 3)
    assert owner.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]


def test_assign_workers_capped_pattern():
    # cap 5 over 3 workers: slots 0..4 are owned by 0, 1, 2, 0, 1 (shares 2, 2, 1)
    owner = assign_workers(12, 3, max_concurrency=5)
    assert owner.tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 0, 1, 0, 1]


@pytest.mark.parametrize(("workers", "cap"), [(3, 5), (4, 10), (3, 7), (2, 1), (3, 2), (5, 64)])
def test_weighted_assignment_follows_shares(workers, cap):
    shares = np.array(split_concurrency(cap, workers))
    # the slot owners are exactly the shares
    slot_counts = np.bincount(assign_workers(cap, workers, cap), minlength=workers)
    np.testing.assert_array_equal(slot_counts, shares)
    # whole cycles: each worker gets requests exactly in proportion to its share
    n = cap * 37
    counts = np.bincount(assign_workers(n, workers, cap), minlength=workers)
    np.testing.assert_array_equal(counts, shares * 37)
    # a partial last cycle adds at most one share per worker
    n = cap * 37 + cap // 2 + 1
    counts = np.bincount(assign_workers(n, workers, cap), minlength=workers)
    assert counts.sum() == n
    assert ((counts - shares * 37 >= 0) & (counts - shares * 37 <= shares)).all()
    # a worker with no share of the cap gets no requests
    assert (counts[shares == 0] == 0).all()


def merged_schedule(n: int, workers: int, cap: int | None, offsets_ns: np.ndarray) -> np.ndarray:
    """Shard a schedule like the coordinator does, then put it back together by index."""
    owner = assign_workers(n, workers, cap)
    merged = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=int)
    for w in range(workers):
        indices = np.flatnonzero(owner == w)
        scheduled = offsets_ns[indices]
        assert (np.diff(scheduled) >= 0).all()  # each shard is still in time order
        merged[indices] = scheduled
        seen[indices] += 1
    assert (seen == 1).all()  # a partition: every request goes to exactly one worker
    return merged


@pytest.mark.parametrize("cap", [None, 5, 8])
def test_schedule_is_independent_of_worker_count(cap):
    n = 1001
    offsets_ns = to_ns(arrival_offsets_s(n, 40.0, 0.5, seed=77))
    one = merged_schedule(n, 1, cap, offsets_ns)
    three = merged_schedule(n, 3, cap, offsets_ns)
    np.testing.assert_array_equal(one, offsets_ns)
    np.testing.assert_array_equal(three, offsets_ns)
    assert schedule_hash(one) == schedule_hash(three)
