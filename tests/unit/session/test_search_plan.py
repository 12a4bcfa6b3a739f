"""A search's campaign plan (loadgen/session/search_plan.py) and its flags: the points it yields
one at a time as it is told each run's verdict, a failed run counted as a miss, its account and
JSON, its folder's name, the console table's SLO column, and the flags it refuses; no runs."""

from __future__ import annotations

import math

from helpers import config_given

from loadgen.config import RunConfig
from loadgen.report.campaign_summary import PointRuns, summary_rows, summary_table
from loadgen.report.html_campaign import search_table
from loadgen.report.slo import mark_points, slo_gates, with_slo
from loadgen.session.campaign import GridPlan, Point, folder_name, is_campaign, search_problem
from loadgen.session.search_plan import SearchPlan

SLO = ("p99_ttft_ms<=100",)


def test_a_search_of_failed_runs_halves_to_its_floor_and_says_none_met() -> None:
    config = RunConfig(search="concurrency", slo=SLO, search_start=4, num_prompts=100)
    plan = SearchPlan(config)
    yielded = []
    for point, runs, numbers in plan.points():
        (number,) = numbers
        yielded.append((point.name, number))
        runs.errors.append(f"run={number}: every request failed")
        assert plan.observe(point, None, None)[0].startswith("  search: concurrency ")
    assert yielded == [
        ("max_concurrency=4-request_rate=inf", 0),
        ("max_concurrency=2-request_rate=inf", 0),
        ("max_concurrency=1-request_rate=inf", 0),
    ]
    assert [runs.name for runs in plan.results] == [name for name, _ in reversed(yielded)]
    assert plan.outcome().best is None
    assert plan.lines()[-1].startswith("No concurrency met the SLO")
    document = plan.search_json()
    assert document["best"] is None and len(document["probes"]) == 3  # type: ignore[arg-type]
    assert all(p["failed"] for p in document["probes"])  # type: ignore[attr-defined,union-attr]
    table = search_table(document)
    assert [row[0] for row in table.rows] == ["1", "2", "3"]
    assert table.rows[0][3] == "failed" and table.rows[0][4] == "misses the SLO"


def test_a_rate_search_keeps_its_cap_and_a_concurrency_search_stays_within_the_requests() -> None:
    rate = SearchPlan(RunConfig(search="rate", slo=SLO, max_concurrency=8, search_start=2.5))
    assert rate.point(2.5) == Point(8, 2.5)
    few = SearchPlan(RunConfig(search="concurrency", slo=SLO, num_prompts=40))
    assert few.bounds.maximum == 40


def test_a_grid_plan_yields_each_point_with_its_runs() -> None:
    points = [Point(1, math.inf), Point(2, math.inf)]
    plan = GridPlan(points, 3)
    assert [(p.name, list(n)) for p, _, n in plan.points()] == [
        (points[0].name, [0, 1, 2]),
        (points[1].name, [0, 1, 2]),
    ]
    assert plan.total == 6 and plan.observe(points[0], None, None) == []


def test_the_flags_a_search_refuses_and_its_folder() -> None:
    assert is_campaign(RunConfig(slo=SLO)) and is_campaign(RunConfig(search="rate", slo=SLO))
    assert "add --slo" in (search_problem(RunConfig(search="rate")) or "")
    given = config_given(search="rate", slo=SLO, request_rate=4.0)
    assert "drop --request-rate" in (search_problem(given) or "")
    lists = RunConfig(search="rate", slo=SLO, max_concurrency=(1, 2))
    assert "one value each" in (search_problem(lists) or "")
    backwards = RunConfig(search="rate", slo=SLO, search_start=10, search_max=5)
    assert "above --search-max" in (search_problem(backwards) or "")
    assert search_problem(RunConfig(search="concurrency", slo=SLO)) is None
    name = folder_name(RunConfig(search="rate", slo=SLO), "org/model", "20260101-000000")
    assert name == "campaign-openai-search-rate-model-20260101-000000"


def test_the_console_table_shows_the_slo_keys_and_the_runs_that_met_it() -> None:
    metrics = {"p99_ttft_ms": 50.0, "p99_e2el_ms": 900.0, "request_throughput": 3.0}
    points = [PointRuns("c=1", 1, math.inf, metrics=[metrics])]
    slo = ("p99_e2el_ms<=1000",)
    rows = with_slo(summary_rows(points, 1), mark_points(points, slo_gates(slo)))
    header, row = summary_table(rows, 1, ["p99_e2el_ms"])[1], summary_table(rows, 1)[3]
    assert header.split()[-2:] == ["SLO", "met"] and "p99_e2el_ms" in header
    assert row.rstrip().endswith("1/1")
    plain = summary_table(summary_rows(points, 1), 1)
    assert "SLO" not in plain[1]  # without --slo the table is as it was
