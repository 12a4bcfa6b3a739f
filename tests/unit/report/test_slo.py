"""--slo's marks on a campaign (loadgen/report/slo.py): which runs and points meet it, the best
point, the columns it adds to summary.csv, the keys it accepts, and the intervals the search
weighs (their coverage measured on known distributions); no sockets."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from loadgen.config.gates import parse_slo
from loadgen.report.campaign_summary import PointRuns, summary_rows
from loadgen.report.slo import (
    Estimate,
    best_line,
    mark_points,
    misses,
    pooled,
    quantile_interval,
    sample_estimate,
    slo_gates,
    slo_problem,
    with_slo,
)

SLO = ("p99_ttft_ms<=500", "p99_itl_ms<=50")


def run(ttft: float, itl: float, rps: float) -> dict[str, float]:
    return {"p99_ttft_ms": ttft, "p99_itl_ms": itl, "request_throughput": rps}


def test_the_grammar_is_fail_ons_comma_separated_or_repeated() -> None:
    assert parse_slo(("p99_ttft_ms<=500, p99_itl_ms<=50", "failed==0")) == (
        "p99_ttft_ms<=500",
        "p99_itl_ms<=50",
        "failed==0",
    )
    with pytest.raises(ValueError, match="not a condition"):
        parse_slo(("p99_ttft_ms",))


def test_runs_and_points_are_marked_and_the_best_named() -> None:
    points = [
        PointRuns("c=1", 1, math.inf, metrics=[run(100, 10, 5.0), run(120, 11, 5.1)]),
        PointRuns("c=4", 4, math.inf, metrics=[run(300, 20, 18.0), run(520, 21, 18.5)]),
        PointRuns("c=2", 2, math.inf, metrics=[run(200, 12, 9.0), run(210, 12, 9.2)]),
        PointRuns("c=8", 8, math.inf, metrics=[run(400, 30, 30.0)], errors=["run=1: failed"]),
    ]
    marks = mark_points(points, slo_gates(SLO))
    assert marks.met_runs == [2, 1, 2, 1]
    assert marks.meets == [True, False, True, False]  # one run over; one run failed
    assert marks.best == 2
    assert best_line(SLO, points, marks) == (
        "Highest throughput within the SLO (p99_ttft_ms<=500, p99_itl_ms<=50): c=2, 9.10 req/s"
    )
    rows = with_slo(summary_rows(points, 2), marks)
    assert list(rows[0])[-3:] == ["slo_met_runs", "slo_met", "error"]
    assert [(r["slo_met_runs"], r["slo_met"]) for r in rows] == [
        (2, "yes"), (1, "no"), (2, "yes"), (1, "no"),
    ]  # fmt: skip


def test_no_point_meeting_it_is_said_and_an_unmeasured_value_misses() -> None:
    points = [PointRuns("c=1", 1, 1.0, metrics=[run(math.nan, 10, 5.0)])]
    marks = mark_points(points, slo_gates(SLO))
    assert marks.best is None
    assert best_line(SLO, points, marks).startswith("No point meets the SLO")
    assert misses(slo_gates(SLO), run(math.nan, 60, 1.0)) == [
        "p99_ttft_ms nan (SLO p99_ttft_ms<=500)",
        "p99_itl_ms 60 (SLO p99_itl_ms<=50)",
    ]


def test_a_key_summary_csv_lacks_is_refused_with_a_hint() -> None:
    assert slo_problem(SLO, ()) is None
    assert slo_problem(("p99.9_ttft_ms<=5",), (99.9,)) is None
    problem = slo_problem(("p99_tft_ms<=5",), ()) or ""
    assert "p99_tft_ms is not one of summary.csv's metrics" in problem
    assert "p99_ttft_ms" in problem
    assert "--metric-percentiles" in (slo_problem(("p50_ttft_ms<=5",), ()) or "")


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_a_quantiles_interval_holds_the_true_quantile_about_95_percent_of_the_time(
    q: float,
) -> None:
    rng = np.random.default_rng(7)
    truth = -math.log(1 - q)  # the exponential distribution's q-quantile
    trials = 400
    held = 0
    for _ in range(trials):
        low, high = quantile_interval(rng.exponential(size=1000), q)
        held += low <= truth <= high
    assert 0.90 <= held / trials <= 0.995


def test_a_means_interval_and_its_edges() -> None:
    values = np.array([10.0, 12.0, 14.0])
    e = sample_estimate("mean", values, 12.0)
    assert (e.low, e.high) == (pytest.approx(12 - 1.96 * 2 / math.sqrt(3), rel=1e-4),
                               pytest.approx(12 + 1.96 * 2 / math.sqrt(3), rel=1e-4))  # fmt: skip
    assert math.isnan(sample_estimate("p99", np.array([]), math.nan).low)
    few = sample_estimate("p99", np.array([1.0, 2.0, 3.0]), 2.98)
    assert few.low <= 2.98 <= few.high  # the value is always inside


def test_pooled_runs_narrow_the_interval_or_fall_back_to_t() -> None:
    rng = random.Random(1)
    runs = [Estimate(v, v - 4, v + 4) for v in (rng.gauss(100, 2) for _ in range(4))]
    one = pooled(runs)
    assert one.value == pytest.approx(sum(r.value for r in runs) / 4)
    assert one.high - one.low == pytest.approx(8 / 2)  # sqrt(4) narrower
    bare = pooled([Estimate(10.0), Estimate(12.0)])
    assert bare.low < 11 < bare.high  # Student's t over the two runs
    assert math.isnan(pooled([Estimate(10.0)]).low)
    assert Estimate(98.0, 90.0, 106.0).holds(100.0)
    assert not Estimate(98.0, 90.0, 99.0).holds(100.0)
