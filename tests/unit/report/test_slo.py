"""--slo's marks on a campaign (loadgen/report/slo.py): which runs and points meet it, the best
point, the columns it adds to summary.csv, the keys it accepts, and the intervals the search
weighs (a run's from a bootstrap over its requests, pooled over a load's runs); no sockets."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from report_runs import full_config, made_up_run

from loadgen.config.gates import parse_slo
from loadgen.report.campaign_summary import PointRuns, summary_metrics, summary_rows
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.slo import (
    Estimate,
    best_line,
    mark_points,
    misses,
    pooled,
    run_estimates,
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


def test_a_run_s_estimate_is_the_bootstrap_of_its_requests() -> None:
    cfg = full_config()
    summary = build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d").summary
    metrics, _ = summary_metrics(summary)
    keys = ["p99_ttft_ms", "mean_e2el_ms", "request_throughput"]
    estimates = run_estimates(summary, metrics, keys)
    ttft = estimates["p99_ttft_ms"]
    assert ttft.value == metrics["p99_ttft_ms"] and ttft.replicates is not None
    assert 0 <= ttft.low <= ttft.value <= ttft.high
    e2el = estimates["mean_e2el_ms"]
    assert e2el.low <= metrics["mean_e2el_ms"] <= e2el.high
    assert math.isnan(estimates["request_throughput"].low)  # measured once a run
    again = run_estimates(summary, metrics, keys)["p99_ttft_ms"]
    assert (again.low, again.high) == (ttft.low, ttft.high)  # seeded


def test_pooled_runs_narrow_the_interval_or_fall_back_to_t() -> None:
    rng = random.Random(1)
    runs = [Estimate(v, v - 4, v + 4) for v in (rng.gauss(100, 2) for _ in range(4))]
    one = pooled(runs)
    assert one.value == pytest.approx(sum(r.value for r in runs) / 4)
    assert one.high - one.low == pytest.approx(8 / 2)  # sqrt(4) narrower
    assert math.isnan(pooled([Estimate(10.0), Estimate(12.0)]).low)  # 2 runs: no t interval
    bare = pooled([Estimate(0.1), Estimate(0.2), Estimate(9.0)])
    assert bare.low == 0.0 and bare.high > 3.1  # Student's t over 3 runs, clipped at 0
    assert math.isnan(pooled([Estimate(10.0)]).low)
    assert Estimate(98.0, 90.0, 106.0).holds(100.0)
    assert not Estimate(98.0, 90.0, 99.0).holds(100.0)


def test_pooled_replicates_weigh_the_requests_and_from_three_runs_the_runs() -> None:
    rng = np.random.default_rng(4)

    def drawn(value: float) -> Estimate:
        reps = value + rng.normal(0.0, 1.0, 1000)
        return Estimate(value, float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5)),
                        reps)  # fmt: skip

    two = pooled([drawn(100.0), drawn(120.0)])  # the runs as they are: the requests' noise
    assert two.value == 110.0 and 108 < two.low < 110 < two.high < 112
    three = pooled([drawn(100.0), drawn(120.0), drawn(110.0)])  # runs drawn too: wider
    assert three.low < 105 and three.high > 115 and three.low <= 110 <= three.high
