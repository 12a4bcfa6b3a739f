"""A campaign's pure parts: the flag lists, the grid and its names, the steady-state rule and
the summary's statistics (loadgen/session/campaign.py, loadgen/report/campaign_summary.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.config import RunConfig
from loadgen.config.sweep_lists import parse_concurrency, parse_rate
from loadgen.report.campaign_summary import (
    PointRuns,
    interval_notes,
    steady_window,
    summary_rows,
    summary_table,
)
from loadgen.session.campaign import (
    Point,
    campaign_problem,
    folder_name,
    grid,
    is_campaign,
    preparation_config,
    run_config,
)


def test_one_value_stays_a_value_and_a_list_becomes_a_tuple() -> None:
    assert parse_concurrency("8") == 8
    assert parse_concurrency("1, 4,16") == (1, 4, 16)
    assert parse_rate("inf") == math.inf
    assert parse_rate("1,2.5,inf") == (1.0, 2.5, math.inf)
    with pytest.raises(ValueError, match="'x' is not an integer"):
        parse_concurrency("1,x")
    with pytest.raises(ValueError, match="4 is listed twice"):
        parse_concurrency("4,8,4")


def test_the_grid_is_every_pair_concurrency_first() -> None:
    config = RunConfig(max_concurrency=(1, 4), request_rate=(2.0, math.inf))
    assert grid(config) == [Point(1, 2.0), Point(1, math.inf), Point(4, 2.0), Point(4, math.inf)]
    assert [p.name for p in grid(config)][:2] == [
        "max_concurrency=1-request_rate=2.0",
        "max_concurrency=1-request_rate=inf",
    ]
    assert grid(RunConfig()) == [Point(None, math.inf)]
    assert Point(None, math.inf).name == "max_concurrency=none-request_rate=inf"


def test_what_makes_a_campaign() -> None:
    assert not is_campaign(RunConfig(max_concurrency=4))
    assert is_campaign(RunConfig(max_concurrency=(1, 4)))
    assert is_campaign(RunConfig(request_rate=(1.0, 2.0)))
    assert is_campaign(RunConfig(num_runs=3))
    assert is_campaign(RunConfig(steady_state=True))


def test_each_run_is_named_after_its_point_and_number() -> None:
    config = RunConfig(max_concurrency=(1, 4), request_rate=(2.0, math.inf), append_result=True)
    one = run_config(config, Point(4, 2.0), "out/campaign-x", 1)
    assert (one.max_concurrency, one.request_rate) == (4, 2.0)
    assert one.save_result and not one.append_result
    assert one.result_dir == "out/campaign-x/max_concurrency=4-request_rate=2.0"
    assert one.result_filename == "max_concurrency=4-request_rate=2.0-run=1.json"


def test_the_folder_is_named_like_upstreams_result_file() -> None:
    config = RunConfig(max_concurrency=(1, 4), request_rate=(2.0, math.inf), result_dir="res")
    name = folder_name(config, "org/Model-7B", "20260101-000000")
    assert name == "res/campaign-openai-2.0,infqps-concurrency1,4-Model-7B-20260101-000000"
    named = RunConfig(num_runs=2, result_filename="mine.json")
    assert folder_name(named, "m", "d") == "campaign-mine"


def test_preparation_leaves_the_rates_draws_to_each_point() -> None:
    config = RunConfig(max_concurrency=(2, 4), request_rate=(2.0, 4.0))
    prep = preparation_config(config, grid(config))
    assert (prep.max_concurrency, prep.request_rate) == (2, math.inf)


def test_steady_state_keeps_what_ran_between_the_first_end_and_the_last_send() -> None:
    send = np.array([0.0, 0.0, 1.0, 2.0, 3.0, 3.5, -1.0])
    end = np.array([1.0, 1.5, 2.5, 3.0, 4.0, 4.5, -1.0])
    window = steady_window(send, end, send >= 0)
    # first end 1.0, last send 3.5: kept are those sent >= 1.0 and ended <= 3.5
    assert window.kept.tolist() == [False, False, True, True, False, False, False]
    assert window.trimmed == 5
    assert window.duration_s == 2.5
    nothing = steady_window(send[:0], end[:0], send[:0] >= 0)
    assert nothing.trimmed == 0 and not nothing.kept.any()


def test_summary_rows_name_the_interval_only_with_three_runs_or_more() -> None:
    metrics = {"mean_ttft_ms": 10.0, "completed": 5.0}
    runs = [metrics, {**metrics, "mean_ttft_ms": 12.0}, {**metrics, "mean_ttft_ms": 14.0}]
    drawn = [{"mean_ttft_ms": np.full(1000, m["mean_ttft_ms"])} for m in runs]
    (two,) = summary_rows([PointRuns("p", 4, math.inf, metrics=runs[:2])], num_runs=2)
    assert two["mean_ttft_ms_mean_of_runs"] == 11.0
    assert not [key for key in two if "ci95" in key]  # 2 runs: no interval column at all
    point = PointRuns("p", 4, math.inf, metrics=runs, replicates=drawn)
    short = PointRuns("q", 4, 2.0, metrics=runs[:2], replicates=drawn[:2],
                      errors=["run=2: every request failed"])  # fmt: skip
    row, few = summary_rows([point, short], num_runs=3)
    assert row["mean_ttft_ms_mean_of_runs"] == 12.0
    assert 10.0 <= row["mean_ttft_ms_ci95_low"] < 12.0 < row["mean_ttft_ms_ci95_high"] <= 14.0
    assert (row["completed_ci95_low"], row["completed_ci95_high"]) == (5.0, 5.0)
    assert row["p99_itl_ms_mean_of_runs"] == row["p99_itl_ms_ci95_low"] == ""  # not measured
    assert few["mean_ttft_ms_mean_of_runs"] == 11.0 and few["mean_ttft_ms_ci95_low"] == ""
    without = PointRuns("p", 4, math.inf, metrics=runs)  # runs without their replicates
    (bare,) = summary_rows([without], num_runs=3)
    assert bare["mean_ttft_ms_ci95_low"] == "" and bare["completed_ci95_low"] == 5.0
    failed = PointRuns("q", None, 2.0, errors=["run=0: every request failed"])
    (single,) = summary_rows([failed], num_runs=1)
    assert single["mean_ttft_ms"] == "" and single["runs_ok"] == 0
    assert single["max_concurrency"] == "" and single["error"] == "run=0: every request failed"


def test_the_table_shows_intervals_as_numbers_and_says_why_a_point_has_none() -> None:
    runs = [{"p99_ttft_ms": v, "request_throughput": 5.0 + v / 100} for v in (80.0, 90.0, 130.0)]
    drawn = [{"p99_ttft_ms": np.full(1000, m["p99_ttft_ms"])} for m in runs]
    one, two = "max_concurrency=1-request_rate=inf", "max_concurrency=2-request_rate=inf"
    points = [
        PointRuns(one, 1, math.inf, metrics=runs, replicates=drawn),
        PointRuns(two, 2, math.inf, metrics=runs[:2], replicates=drawn[:2], errors=["run=2: x"]),
    ]
    lines = summary_table(summary_rows(points, 3), 3)
    three = next(line for line in lines if line.startswith(one))
    assert "100 [80, 130]" in three and "±" not in three
    short = next(line for line in lines if line.startswith(two))
    assert "85.00" in short and "[" not in short
    assert lines[-1] == (
        "no interval at max_concurrency=2-request_rate=inf: as few as 2 run(s) at this point; "
        "intervals need >= 3 (--num-runs)"
    )
    assert interval_notes(summary_rows(points[1:], 2), 2) == [
        "means across runs; no interval: 2 run(s) at this point; intervals need >= 3 (--num-runs)"
    ]
    assert interval_notes(summary_rows(points[:1], 1), 1) == []


def test_flags_a_campaign_cannot_honour_are_refused_in_one_line() -> None:
    assert campaign_problem(RunConfig(num_runs=2, save_result=True)) is None
    problem = campaign_problem(RunConfig(num_runs=2, append_result=True))
    assert problem is not None and problem.startswith("--append-result")
    assert "loadgen report" in (campaign_problem(RunConfig(plot_timeline=True)) or "")
