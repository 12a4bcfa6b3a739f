"""report.html's tables and the campaign's planes (loadgen/report/html_report.py), from the
summary of a made-up run and made-up summary.csv rows: no files, no sockets."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

from report_runs import full_config, made_up_run

from loadgen.report.html_report import (
    CampaignPoint,
    campaign_table,
    campaign_workers,
    column_title,
    html_path_for,
    run_notes,
    summary_table,
    trade_off_planes,
    verdict_summary,
)
from loadgen.report.rows import RULE, row, section_title
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines


def test_the_summary_blocks_become_sections_and_rows() -> None:
    cfg = full_config(metric_percentiles="99", percentile_metrics="ttft")
    run = made_up_run(cfg)
    run.records["connect_ns"][:3] = 2_000_000  # three new connections: a note
    summary = summarize(cfg, run)
    table = summary_table(summary)
    assert table.rows[:3] == [
        ["Serving Benchmark Result"],
        ["Successful requests", "7"],
        ["Failed requests", "1"],
    ]
    titles = [cells[0] for cells in table.rows if len(cells) == 1]
    assert titles == [
        "Serving Benchmark Result",
        "Time to First Token",
        "From intended send time (wrk2-style)",
    ]
    assert ["Mean TTFT (ms)", "30.00"] in table.rows
    duration = f"{summary.totals.duration:.2f}"
    assert ["Benchmark duration (s)", duration] in table.rows
    lines = console_lines(summary)  # the console shows the same rows
    assert row("Benchmark duration (s):", summary.totals.duration, ".2f") in lines
    assert section_title(" From intended send time (wrk2-style) ") in lines


def test_the_notes_are_the_consoles_after_the_blocks() -> None:
    cfg = full_config()
    run = made_up_run(cfg)
    run.records["connect_ns"][:3] = 2_000_000
    run.errors[2] = "timeout: no answer"
    run.errors[3] = "timeout: again"
    summary = summarize(cfg, run)
    note, kinds = run_notes(summary)
    assert note.startswith("note: 3 requests opened a new connection during the run")
    assert kinds == "failed requests by kind: 2 × timeout, 1 × HTTP 500"
    lines = console_lines(summary)
    assert lines[lines.index(note) - 1] == RULE and lines[-1] == summary.client.verdict


def point(name: str, label: str, **values: str) -> CampaignPoint:
    """A summary.csv row with two runs, every metric empty but ``values``."""
    row = {"point": name, "max_concurrency": "", "request_rate": "inf", "runs": "2",
           "runs_ok": "2", "steady_state_trimmed": "0", "error": "", **values}  # fmt: skip
    return CampaignPoint(row, label, [], [])


def with_ci(prefix: str, mean: float, low: float, high: float) -> dict[str, str]:
    return {
        f"{prefix}_mean_of_runs": str(mean),
        f"{prefix}_ci95_t_low": str(low),
        f"{prefix}_ci95_t_high": str(high),
    }


POINTS = [
    point("a", "c=1", **with_ci("output_throughput", 40, 39, 41),
          **with_ci("p99_ttft_ms", 100, 99, 101), **with_ci("p99_itl_ms", 20, 19, 21)),
    point("b", "c=4", **with_ci("output_throughput", 150, 140, 160),
          **with_ci("p99_ttft_ms", 130, 120, 140), **with_ci("p99_itl_ms", 25, 24, 26)),
    point("c", "c=16", **with_ci("output_throughput", 120, 110, 130),
          **with_ci("p99_ttft_ms", 300, 200, 400), **with_ci("p99_itl_ms", 30, 28, 32)),
    point("d", "c=64"),  # every run failed: no figures
]  # fmt: skip


def test_the_planes_hold_the_points_with_figures_their_intervals_and_front() -> None:
    planes = trade_off_planes(POINTS, num_runs=2)
    assert planes is not None
    ttft, itl = planes
    assert ttft.labels == ["c=1", "c=4", "c=16"]
    assert ttft.x == [40, 150, 120] and ttft.x_low == [39, 140, 110]
    assert ttft.y == [100, 130, 300] and ttft.y_high == [101, 140, 400]
    assert ttft.front == [0, 1]  # c=16 has less throughput and more latency than c=4
    assert itl.y == [20, 25, 30] and itl.front == [0, 1]


def test_without_a_finished_point_there_is_no_plane() -> None:
    assert trade_off_planes([POINTS[3]], num_runs=2) is None


def test_one_run_per_point_has_no_interval() -> None:
    single = point("a", "c=1", output_throughput="40", p99_ttft_ms="100", p99_itl_ms="20")
    single.row["runs"] = "1"
    (ttft, _) = trade_off_planes([single], num_runs=1)  # type: ignore[misc]
    assert ttft.x == [40] and math.isnan(ttft.x_low[0]) and math.isnan(ttft.y_high[0])


def test_the_campaign_table_shows_each_mean_over_its_interval() -> None:
    table = campaign_table(POINTS[:1] + POINTS[3:], num_runs=2)
    assert table.header[:5] == ["point", "runs ok", "trimmed", "req/s", "output tok/s"]
    assert "p99 TTFT (ms)" in table.header
    first, failed = table.rows
    assert first[0] == "c=1\na" and first[1] == "2/2"
    assert first[table.header.index("output tok/s")] == "40\n[39, 41]"
    assert first[table.header.index("p99 TTFT (ms)")] == "100\n[99, 101]"
    assert failed[table.header.index("p99 TTFT (ms)")] == "-"


def test_goodput_has_a_column_only_where_a_point_measured_it() -> None:
    assert "goodput req/s" not in campaign_table(POINTS, num_runs=2).header
    measured = point("e", "c=2", **with_ci("request_goodput", 5, 4, 6))
    table = campaign_table([*POINTS, measured], num_runs=2)
    assert table.header[3:6] == ["req/s", "goodput req/s", "output tok/s"]
    assert table.rows[-1][table.header.index("goodput req/s")] == "5\n[4, 6]"


def test_the_runs_other_percentiles_have_columns_beside_p99() -> None:
    asked = point(
        "e", "c=2", **with_ci("p50_ttft_ms", 90, 89, 91), **with_ci("p99.9_itl_ms", 9, 8, 10)
    )
    header = campaign_table([*POINTS, asked], num_runs=2).header
    ttft = header.index("p50 TTFT (ms)")
    assert header[ttft + 1] == "p99 TTFT (ms)"
    assert header[header.index("p99 ITL (ms)") + 1] == "p99.9 ITL (ms)"
    assert "p50 TTFT (ms)" not in campaign_table(POINTS, num_runs=2).header


def test_column_titles_and_the_verdict_count() -> None:
    assert column_title("median_itl_ms") == "median ITL (ms)"
    assert column_title("request_throughput") == "req/s"
    assert verdict_summary(["c=1 run=0: client: OK: x", "c=1 run=1: client-bound: y"], 2) == (
        "1 of 2 runs: client OK; 1 not: below"
    )
    assert verdict_summary([], 3) == "no verdict: none of the 3 run(s) wrote a result"


def test_a_run_s_page_sits_beside_its_records() -> None:
    assert html_path_for("out/NAME.records.arrow") == Path("out/NAME.report.html")


def test_the_campaign_says_its_worker_counts_not_its_first_run_s() -> None:
    def runs(*counts: int) -> list:
        return [SimpleNamespace(start=SimpleNamespace(num_workers=n)) for n in counts]

    assert campaign_workers({"c=1": runs(1, 1), "c=32": runs(2, 2)}) == "1 to 2 workers, by point"
    assert campaign_workers({"c=8": runs(2), "c=32": runs(2)}) == "2 worker(s)"
