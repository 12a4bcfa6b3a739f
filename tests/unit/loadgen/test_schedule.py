"""Tests for the global arrival schedule (reference §3.3) and its sharding over workers."""

from __future__ import annotations

import hashlib
import math
import struct
from datetime import datetime, timedelta

import numpy as np
import pytest

from loadgen.schedule import (
    arrival_offsets_s,
    assign_workers,
    ramp_up_offsets_s,
    ramp_up_rates,
    rps_change_events,
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


@pytest.mark.parametrize("cap", [None, 5])
def test_ramp_up_schedule_is_independent_of_worker_count(cap):
    n = 1001
    offsets_ns = to_ns(ramp_up_offsets_s(n, "linear", 5, 80, 0.5, seed=77))
    one = merged_schedule(n, 1, cap, offsets_ns)
    four = merged_schedule(n, 4, cap, offsets_ns)
    np.testing.assert_array_equal(one, offsets_ns)
    np.testing.assert_array_equal(four, offsets_ns)


# --- ramp-up ------------------------------------------------------------------------------


def upstream_ramp_up_offsets(
    n: int, strategy: str, start: int, end: int, burstiness: float, seed: int
) -> list[float]:
    """Upstream's get_request arithmetic, one request at a time, with scalar draws."""
    rng = np.random.RandomState(seed)
    delays = []
    for i in range(n):
        progress = i / max(n - 1, 1)
        if strategy == "linear":
            rate = start + (end - start) * progress
        else:
            rate = start * ((end / start) ** progress)
        if rate == INF:
            delays.append(0.0)
        elif burstiness == INF:
            delays.append(1.0 / rate)
        else:
            delays.append(rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
    for i in range(1, n):
        delays[i] += delays[i - 1]
    return delays  # no rescaling with ramp-up


def test_ramp_up_rates_run_from_start_to_end():
    np.testing.assert_array_equal(
        ramp_up_rates(5, "linear", 50, 200), [50.0, 87.5, 125.0, 162.5, 200.0]
    )
    np.testing.assert_allclose(
        ramp_up_rates(5, "exponential", 10, 160), [10.0, 20.0, 40.0, 80.0, 160.0], rtol=1e-15
    )
    for strategy in ("linear", "exponential"):
        assert ramp_up_rates(1, strategy, 7, 90).tolist() == [7.0]  # progress 0 / max(0, 1)
        rates = ramp_up_rates(1000, strategy, 3, 300)
        assert (rates[0], rates[-1]) == (3.0, 300.0)
        assert (np.diff(rates) > 0).all()


def test_linear_and_exponential_shapes():
    linear = ramp_up_rates(101, "linear", 2, 200)
    exponential = ramp_up_rates(101, "exponential", 2, 200)
    # linear: equal steps in rate; exponential: equal ratios (x10 every 50 requests)
    np.testing.assert_allclose(np.diff(linear), 1.98, rtol=1e-12)
    np.testing.assert_allclose(exponential[1:] / exponential[:-1], 100 ** (1 / 100), rtol=1e-12)
    assert exponential[50] == pytest.approx(20.0, rel=1e-12)
    # exponential stays longer at low rates, so the same ramp lasts longer
    assert (exponential[1:-1] < linear[1:-1]).all()
    lin_s = ramp_up_offsets_s(101, "linear", 2, 200, INF, seed=0)
    exp_s = ramp_up_offsets_s(101, "exponential", 2, 200, INF, seed=0)
    assert exp_s[-1] > lin_s[-1]


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
@pytest.mark.parametrize(("burstiness", "seed"), [(1.0, 0), (0.5, 7), (3.0, 42), (INF, 0)])
def test_ramp_up_matches_upstream_bit_for_bit(strategy, burstiness, seed):
    offsets = ramp_up_offsets_s(500, strategy, 4, 120, burstiness, seed)
    assert offsets.dtype == np.float64
    assert offsets.shape == (500,)
    np.testing.assert_array_equal(
        offsets, upstream_ramp_up_offsets(500, strategy, 4, 120, burstiness, seed)
    )


def test_ramp_up_is_not_rescaled():
    # a flat "ramp" at 10 rps with constant gaps: the first request waits one gap, and the
    # sum of ten float 0.1s stays short of 1.0, where the flat-rate schedule is rescaled to it
    offsets = ramp_up_offsets_s(10, "linear", 10, 10, INF, seed=0)
    assert offsets[0] == 0.1
    assert offsets[-1] == sum([0.1] * 10) != 1.0
    assert arrival_offsets_s(10, 10.0, INF, seed=0)[-1] == 1.0


def test_ramp_up_gaps_shrink_from_start_to_end():
    n = 20000
    offsets = ramp_up_offsets_s(n, "linear", 50, 200, 1.0, seed=2024)
    gaps = np.diff(np.concatenate(([0.0], offsets)))
    rates = ramp_up_rates(n, "linear", 50, 200)
    head, tail = slice(0, 1000), slice(n - 1000, n)
    # each gap is exponential with mean 1 / r_i
    assert gaps[head].mean() == pytest.approx((1 / rates[head]).mean(), rel=0.07)
    assert gaps[tail].mean() == pytest.approx((1 / rates[tail]).mean(), rel=0.07)
    assert gaps[head].mean() / gaps[tail].mean() == pytest.approx(
        (1 / rates[head]).mean() / (1 / rates[tail]).mean(), rel=0.1
    )  # close to 200 / 51.9


def test_ramp_up_same_seed_same_schedule_different_seed_different():
    a = ramp_up_offsets_s(300, "exponential", 1, 50, 1.0, seed=3)
    np.testing.assert_array_equal(a, ramp_up_offsets_s(300, "exponential", 1, 50, 1.0, seed=3))
    assert not np.allclose(a, ramp_up_offsets_s(300, "exponential", 1, 50, 1.0, seed=4))


@pytest.mark.parametrize(
    ("n", "strategy", "start", "end", "burstiness", "message"),
    [
        (10, "linear", 0, 10, 1.0, "non-positive request rate 0.0"),  # upstream asserts > 0
        (10, "linear", 0, 10, INF, "non-positive request rate 0.0"),
        (10, "exponential", 0, 10, 1.0, "--ramp-up-start-rps > 0"),
        (10, "step", 1, 10, 1.0, "--ramp-up-strategy"),
        (0, "linear", 1, 10, 1.0, "--num-prompts"),
        (10, "linear", 1, 10, 0.0, "--burstiness"),
    ],
)
def test_ramp_up_bad_arguments_raise(n, strategy, start, end, burstiness, message):
    with pytest.raises(ValueError, match=message):
        ramp_up_offsets_s(n, strategy, start, end, burstiness, seed=0)


# --- rps_change_events --------------------------------------------------------------------

T0 = datetime(2026, 3, 4, 5, 6, 7, 250000)


def test_rps_change_events_one_per_whole_rps_at_the_first_request_reaching_it():
    # rates 1, 1.5, 2, 2.5, 3, 3.5, 4: whole rps 2, 3 and 4 are reached by requests 2, 4, 6
    offsets = ramp_up_offsets_s(7, "linear", 1, 4, INF, seed=0)
    events = rps_change_events("linear", 1, 4, offsets, T0)
    assert events == [
        {"rps": 1, "timestamp": "2026-03-04T05:06:07.250000"},
        {"rps": 2, "timestamp": (T0 + timedelta(seconds=offsets[2])).isoformat()},
        {"rps": 3, "timestamp": (T0 + timedelta(seconds=offsets[4])).isoformat()},
        {"rps": 4, "timestamp": (T0 + timedelta(seconds=offsets[6])).isoformat()},
    ]
    # 1 + 1/1.5 + 1/2 s after t0
    assert events[1]["timestamp"] == "2026-03-04T05:06:09.416667"


def test_rps_change_events_fill_every_whole_rps_a_jump_passes():
    # rates 2, 6, 10: request 1 jumps from 2 to 6, request 2 from 6 to 10
    offsets = np.array([0.5, 0.6, 0.7])
    events = rps_change_events("linear", 2, 10, offsets, T0)
    assert [e["rps"] for e in events] == list(range(2, 11))
    stamps = [e["timestamp"] for e in events]
    assert stamps[0] == T0.isoformat()
    assert stamps[1:5] == ["2026-03-04T05:06:07.850000"] * 4
    assert stamps[5:] == ["2026-03-04T05:06:07.950000"] * 4


def test_rps_change_events_timestamp_format_is_upstreams_isoformat():
    # datetime.isoformat: no time zone, and no fraction when the microseconds are 0
    start = datetime(2026, 1, 2, 3, 4, 5)
    events = rps_change_events("exponential", 5, 5, np.array([0.2]), start)
    assert events == [{"rps": 5, "timestamp": "2026-01-02T03:04:05"}]


def test_rps_change_events_cover_the_whole_ramp():
    n = 40
    offsets = ramp_up_offsets_s(n, "exponential", 3, 70, 1.0, seed=1)
    events = rps_change_events("exponential", 3, 70, offsets, T0)
    rates = ramp_up_rates(n, "exponential", 3, 70)
    top = int(rates[-1])  # 70, or 69 if the float ramp ends a hair below it, as upstream's
    assert [e["rps"] for e in events] == list(range(3, top + 1))
    stamps = [datetime.fromisoformat(e["timestamp"]) for e in events]
    assert stamps == sorted(stamps)
    assert stamps[-1] == T0 + timedelta(seconds=float(offsets[-1]))
