"""loadgen/report/intervals.py: no interval below 3 runs, the request bootstrap's replicates
against a plain loop that draws the requests, the two-level interval (never below 0, holding
the point's value, the same for the same samples) and the clipped t interval of per-run
figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.report.intervals import (
    MIN_RUNS,
    Clusters,
    gather,
    no_interval_reason,
    point_interval,
    request_replicates,
    runs_fixed_replicates,
    runs_interval,
    t_quantile_975,
    two_level_replicates,
)

STATISTICS = ["mean", "median", "p90", "p99"]


def drawn_by_a_loop(values: np.ndarray, sizes: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The statistics of ``resamples`` draws of the requests, each draw made and measured."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    out = []
    for _ in range(resamples):
        drawn = gather(values, offsets, rng.integers(0, len(sizes), len(sizes)))
        out.append([drawn.mean(), np.median(drawn), *np.percentile(drawn, [90, 99])])
    return np.array(out)


def a_run(seed: int, requests: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A run's TTFTs and ITL gaps: each request streams at its own speed (its gaps alike)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 40, requests)
    speed = rng.gamma(2.0, 1.0, requests)
    gaps = np.concatenate([rng.exponential(speed[r], s) for r, s in enumerate(sizes)])
    return rng.lognormal(0.0, 1.0, requests), gaps, sizes


def test_fewer_than_three_runs_have_no_interval_and_it_says_why() -> None:
    assert MIN_RUNS == 3
    assert no_interval_reason(2) == "2 run(s) at this point; intervals need >= 3 (--num-runs)"
    assert no_interval_reason(3) is None
    assert all(math.isnan(end) for end in runs_interval([10.0, 12.0]))
    reps = [np.full(100, 1.0), np.full(100, 2.0)]
    assert all(math.isnan(end) for end in point_interval(1.5, reps))


@pytest.mark.parametrize("clustered", [False, True])
def test_the_replicates_are_those_of_drawing_the_requests(clustered: bool) -> None:
    ttft, gaps, sizes = a_run(5)
    if clustered:
        values, owned = gaps, sizes
        sample = Clusters(gaps, sizes)
    else:
        values, owned = ttft, np.ones(len(ttft), np.int64)
        sample = Clusters.singletons(ttft)
    fast = request_replicates({"x": sample}, STATISTICS, resamples=2000, seed=1)["x"]
    slow = drawn_by_a_loop(values, owned, 2000, seed=2)
    for column, name in enumerate(STATISTICS):
        ends = np.percentile(slow[:, column], [2.5, 50, 97.5])
        width = ends[2] - ends[0]
        got = np.percentile(fast[:, column], [2.5, 50, 97.5])
        assert np.abs(got - ends).max() < 0.15 * width, name


def test_a_requests_gaps_travel_together() -> None:
    # every request's gaps alike: 200 requests, not 6,000 independent gaps
    rng = np.random.default_rng(3)
    speeds = rng.gamma(2.0, 1.0, 200)
    sizes = np.full(200, 30)
    gaps = np.repeat(speeds, 30)
    clustered = request_replicates({"itl": Clusters(gaps, sizes)}, ["median"])["itl"][:, 0]
    loose = request_replicates({"itl": Clusters.singletons(gaps)}, ["median"])["itl"][:, 0]
    assert np.std(clustered) > 3 * np.std(loose)


def test_a_point_s_interval_holds_its_value_stays_above_0_and_repeats_itself() -> None:
    runs = [a_run(seed) for seed in range(3)]
    reps = [
        request_replicates({"ttft": Clusters.singletons(ttft)}, ["p99"])["ttft"][:, 0]
        for ttft, _, _ in runs
    ]
    values = [float(np.percentile(ttft, 99)) for ttft, _, _ in runs]
    estimate = sum(values) / 3
    low, high = point_interval(estimate, reps)
    assert 0 < low <= estimate <= high
    assert low >= min(ttft.min() for ttft, _, _ in runs)  # within the values measured
    assert (low, high) == point_interval(estimate, reps)  # seeded: the same, to the last bit
    # three runs far apart: their t interval reaches below 0, the bootstrap's cannot
    spread = [values[0] / 20, values[1], values[2] * 3]
    wide = [np.full(1000, v) for v in spread]
    far_low, _ = point_interval(sum(spread) / 3, wide)
    t_low = sum(spread) / 3 - t_quantile_975(2) * float(np.std(spread, ddof=1)) / math.sqrt(3)
    assert t_low < 0 <= far_low


def test_runs_are_drawn_in_the_two_level_bootstrap() -> None:
    # no request noise at all: the runs' spread alone widens the interval
    reps = [np.full(1000, v) for v in (10.0, 11.0, 14.0)]
    drawn = two_level_replicates(reps)
    assert drawn.min() == 10.0 and drawn.max() == 14.0
    fixed = runs_fixed_replicates(reps)  # the runs as they are: no spread left
    assert np.all(fixed == pytest.approx(35.0 / 3))


def test_a_per_run_figure_gets_students_t_clipped_to_its_range() -> None:
    low, high = runs_interval([10.0, 12.0, 14.0])
    assert (low, high) == (
        pytest.approx(12 - 4.303 * 2 / math.sqrt(3)),
        pytest.approx(12 + 4.303 * 2 / math.sqrt(3)),
    )
    assert runs_interval([0.1, 0.2, 50.0])[0] == 0.0  # a throughput: never below 0
    assert runs_interval([60.0, 99.0, 100.0], upper=100.0)[1] == 100.0  # a percentage
    assert runs_interval([24.0, 24.0, 24.0]) == (24.0, 24.0)
    assert math.isnan(runs_interval([5.0, math.nan, 6.0])[0])  # two runs measured it
    assert t_quantile_975(30) == 2.042 and abs(t_quantile_975(60) - 2.000) < 0.001


def test_empty_samples_give_no_replicates() -> None:
    empty = request_replicates({"tpot": Clusters.singletons(np.zeros(0))}, ["mean", "p99"])
    assert np.isnan(empty["tpot"]).all()
    none_owned = request_replicates(
        {"itl": Clusters(np.zeros(0), np.zeros(5, np.int64))}, ["median"]
    )
    assert np.isnan(none_owned["itl"]).all()
