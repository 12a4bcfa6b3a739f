"""report.html's tables and the campaign's planes (loadgen/report/html_report.py and
html_campaign.py), from the summaries of made-up runs and made-up summary.csv rows: no files,
no sockets."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

from report_runs import full_config, made_up_run

from loadgen.config import RunConfig
from loadgen.report.campaign_summary import (
    PointRuns,
    run_problem,
    run_replicates,
    summary_metrics,
    summary_rows,
)
from loadgen.report.html_campaign import (
    CampaignPoint,
    campaign_columns,
    campaign_table,
    campaign_workers,
    gate_lines,
    interval_keys,
    point_figures,
    run_verdicts,
    trade_off_planes,
    verdict_summary,
)
from loadgen.report.html_report import (
    VERDICT_OK,
    html_path_for,
    run_notes,
    settings_rows,
    summary_table,
)
from loadgen.report.rows import RULE, row, section_title
from loadgen.report.run_report import Report, build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines


def test_the_summary_blocks_become_sections_and_rows() -> None:
    cfg = full_config(metric_percentiles="99", percentile_metrics="ttft")
    run = made_up_run(cfg)
    run.records["connect_ns"][:3] = 2_000_000  # three new connections: a note
    summary = summarize(settings_of(cfg), run)
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
    summary = summarize(settings_of(cfg), run)
    (note,) = run_notes(summary)  # the kinds have report.html's failures table instead
    assert note.startswith("note: 3 requests opened a new connection during the run")
    lines = console_lines(summary)
    kinds = "failed requests by kind: 1 × HTTP 500"  # the completed requests' texts not counted
    assert lines[lines.index(note) - 1] == kinds and lines[lines.index(kinds) - 1] == RULE
    assert lines[-1] == summary.client.verdict


def point(name: str, label: str, **values: str) -> tuple[CampaignPoint, dict[str, object]]:
    """A point of three runs and its summary.csv row, every metric empty but ``values``."""
    row = {"point": name, "max_concurrency": "", "request_rate": "inf", "runs": "3",
           "runs_ok": "3", "steady_state_trimmed": "0", "error": "", **values}  # fmt: skip
    return CampaignPoint(row, label, []), dict(row)


def with_ci(prefix: str, mean: float, low: float, high: float) -> dict[str, str]:
    low_key, high_key = interval_keys(prefix)  # summary.csv's names, read in one place
    return {f"{prefix}_mean_of_runs": str(mean), low_key: str(low), high_key: str(high)}


POINTS = [
    point("a", "c=1", **with_ci("output_throughput", 40, 39, 41),
          **with_ci("p99_ttft_ms", 100, 99, 101), **with_ci("p99_itl_ms", 20, 19, 21)),
    point("b", "c=4", **with_ci("output_throughput", 150, 140, 160),
          **with_ci("p99_ttft_ms", 130, 120, 140), **with_ci("p99_itl_ms", 25, 24, 26)),
    point("c", "c=16", **with_ci("output_throughput", 120, 110, 130),
          **with_ci("p99_ttft_ms", 300, 200, 400), **with_ci("p99_itl_ms", 30, 28, 32)),
    point("d", "c=64"),  # every run failed: no figures
]  # fmt: skip


def split(points: list[tuple[CampaignPoint, dict[str, object]]]) -> tuple[list, list]:
    return [p for p, _ in points], [row for _, row in points]


def test_the_planes_hold_the_points_with_figures_their_intervals_and_front() -> None:
    planes = trade_off_planes(*split(POINTS), num_runs=3)
    assert planes is not None
    ttft, itl = planes
    assert ttft.labels == ["c=1", "c=4", "c=16"]
    assert ttft.x == [40, 150, 120] and ttft.x_low == [39, 140, 110]
    assert ttft.y == [100, 130, 300] and ttft.y_high == [101, 140, 400]
    assert ttft.front == [0, 1]  # c=16 has less throughput and more latency than c=4
    assert itl.y == [20, 25, 30] and itl.front == [0, 1]


def test_an_interval_reaching_below_0_is_drawn_from_0() -> None:
    two = point(
        "a",
        "c=1",
        **with_ci("output_throughput", 40, 39, 41),
        **with_ci("p99_ttft_ms", 30, -31, 91),
        **with_ci("p99_itl_ms", 20, 19, 21),
    )
    (ttft, _) = trade_off_planes(*split([two]), num_runs=3)  # type: ignore[misc]
    assert ttft.y_low == [0.0] and ttft.y_high == [91.0] and ttft.x_low == [39.0]


def test_without_a_finished_point_there_is_no_plane() -> None:
    assert trade_off_planes(*split([POINTS[3]]), num_runs=3) is None


def test_one_run_per_point_has_no_interval() -> None:
    single, row = point("a", "c=1", output_throughput="40", p99_ttft_ms="100", p99_itl_ms="20")
    (ttft, _) = trade_off_planes([single], [row], num_runs=1)  # type: ignore[misc]
    assert ttft.x == [40] and math.isnan(ttft.x_low[0]) and math.isnan(ttft.y_high[0])


def test_the_campaign_table_shows_each_mean_over_its_interval() -> None:
    table = campaign_table(*split(POINTS[:1] + POINTS[3:]), num_runs=3, pooling=False)
    assert table.header[:6] == ["point", "runs ok", "trimmed", "client OK", "req/s",
                                "output tok/s"]  # fmt: skip
    assert "p99 TTFT (ms)" in table.header
    first, failed = table.rows
    assert first[0] == "c=1\na" and first[1] == "3/3"
    assert first[table.header.index("output tok/s")] == "40\n[39, 41]"
    assert first[table.header.index("p99 TTFT (ms)")] == "100\n[99, 101]"
    assert failed[table.header.index("p99 TTFT (ms)")] == "-"


def test_goodput_has_a_column_only_where_a_point_measured_it() -> None:
    assert "goodput req/s" not in campaign_table(*split(POINTS), 3, pooling=False).header
    measured = point("e", "c=2", **with_ci("request_goodput", 5, 4, 6))
    table = campaign_table(*split([*POINTS, measured]), num_runs=3, pooling=False)
    assert table.header[4:7] == ["req/s", "goodput req/s", "output tok/s"]
    assert table.rows[-1][table.header.index("goodput req/s")] == "5\n[4, 6]"


def reports(cfg: RunConfig, runs: int = 2) -> list[Report]:
    """The reports of ``runs`` made-up runs (as html_campaign rebuilds them from records)."""
    return [
        build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d")
        for _ in range(runs)
    ]


def made_up_point(cfg: RunConfig, runs: int = 2) -> CampaignPoint:
    """A point whose runs are made up, its summary.csv row as the campaign wrote it."""
    row = {"point": "max_concurrency=4-request_rate=100.0", "max_concurrency": "4",
           "request_rate": "100.0", "runs": str(runs), "error": ""}  # fmt: skip
    files = [Path(f"{row['point']}-run={i}.records.arrow") for i in range(runs)]
    return CampaignPoint(row, "c=4", files, reports(cfg, runs))


def test_the_campaign_table_is_summary_csv_computed_again_from_the_summaries() -> None:
    cfg = full_config(metric_percentiles="50,99.9", fail_on=("completed<100",))
    one = made_up_point(cfg, runs=3)
    rows = point_figures([one], 3, steady=False, percentiles=cfg.percentiles())
    summaries = [r.summary for r in one.reports]
    written = summary_rows(  # what the campaign wrote to summary.csv at its end
        [PointRuns(one.name, 4, 100.0, [summary_metrics(s)[0] for s in summaries], [0, 0, 0],
                   error_kinds=[s.errors.by_kind for s in summaries],
                   replicates=[run_replicates(s) for s in summaries])],
        3, cfg.percentiles())  # fmt: skip
    assert rows == written  # the same records: the same intervals
    assert rows[0]["p99_itl_ms_ci95_low"] != ""
    table = campaign_table([one], rows, num_runs=3, pooling=False)
    header, cells = table.header, table.rows[0]
    assert header[3:5] == ["client OK", "gates breached"]
    ok = sum(r.verdict.startswith(VERDICT_OK) for r in one.reports)
    assert cells[1:5] == ["3/3", "0", f"{ok}/3", "3/3"]  # 7 completed, each run breached
    ttft = header.index("p50 TTFT (ms)")
    assert header[ttft + 1 : ttft + 3] == ["p99 TTFT (ms)", "p99.9 TTFT (ms)"]
    mean = one.reports[0].summary.latencies["ttft"].median_ms
    assert cells[header.index("median TTFT (ms)")] == f"{mean:g}\n[{mean:g}, {mean:g}]"  # 3 alike
    assert cells[header.index("completed")].startswith("7\n")
    assert gate_lines([one]) == [
        "c=4 run=0: breached: completed<100 (measured 7)",
        "c=4 run=1: breached: completed<100 (measured 7)",
        "c=4 run=2: breached: completed<100 (measured 7)",
    ]
    verdicts = run_verdicts([one])
    assert [text.split(": ", 1)[0] for text, _ in verdicts] == [f"c=4 run={i}" for i in range(3)]


def test_a_run_that_does_not_count_is_left_out_of_its_point_s_figures() -> None:
    cfg = full_config()
    one = made_up_point(cfg)
    lost = dataclasses.replace(
        one.reports[1].summary,
        ending=dataclasses.replace(one.reports[1].summary.ending, worker_problems=["w1 died"]),
    )
    one.reports[1] = dataclasses.replace(one.reports[1], summary=lost)
    assert run_problem(lost) == "the run lost workers: w1 died"
    (row,) = point_figures([one], 2, steady=False, percentiles=cfg.percentiles())
    assert row["runs_ok"] == 1 and row["completed_mean_of_runs"] == 7.0
    assert "completed_ci95_low" not in row  # two runs planned: no interval


def test_column_titles_are_the_metric_table_s_and_the_verdict_count() -> None:
    columns = dict(campaign_columns([], pooling=False))
    assert columns["median_itl_ms"] == "median ITL (ms)"
    assert columns["request_throughput"] == "req/s" and columns["completed"] == "completed"
    assert "output_throughput" not in dict(campaign_columns([], pooling=True))
    assert verdict_summary(["c=1 run=0: client: OK: x", "c=1 run=1: client-bound: y"], 2) == (
        "1 of 2 runs: client OK; 1 not: below"
    )
    assert verdict_summary([], 3) == "no verdict: none of the 3 run(s) left its records"


def test_a_run_s_page_sits_beside_its_records() -> None:
    assert html_path_for("out/NAME.records.arrow") == Path("out/NAME.report.html")


def test_the_campaign_says_its_worker_counts_not_its_first_run_s() -> None:
    def at(*counts: int) -> CampaignPoint:
        summaries = [SimpleNamespace(summary=SimpleNamespace(identity=SimpleNamespace(
            num_workers=n))) for n in counts]  # fmt: skip
        return CampaignPoint({}, "", [], summaries)  # type: ignore[arg-type]

    assert campaign_workers([at(1, 1), at(2, 2)]) == "1 to 2 workers, by point"
    assert campaign_workers([at(2), at(2)]) == "2 worker(s)"


def test_the_settings_rows_come_from_the_summary() -> None:
    cfg = full_config(fail_on=("p99_ttft_ms>500",))
    run = made_up_run(cfg)
    run.start.command_line[:] = ["loadgen", "run", "--header", "Authorization=Bearer sk-secret"]
    summary = summarize(settings_of(cfg), run)
    rows = dict(settings_rows(summary, [("campaign", "2 point(s)")]))
    assert rows["model"] == "org/model" and rows["started"] == "2026-12-03T10:00:00"
    assert rows["backend / endpoint"] == f"{cfg.backend} {cfg.endpoint}"
    assert rows["loadgen"] == "0.1.0, 2 worker(s)" and rows["campaign"] == "2 point(s)"
    assert rows["goodput SLOs"] == "TTFT ≤ 50 ms, E2EL ≤ 200 ms"
    assert rows["--fail-on"] == "p99_ttft_ms>500"
    assert "sk-secret" not in rows["command line"]
    assert "goodput SLOs" not in dict(
        settings_rows(summarize(settings_of(full_config(goodput=None)), run), [])
    )


def test_an_interrupted_run_s_page_says_so_first() -> None:
    cfg = full_config()
    run = made_up_run(cfg)
    run.end = None  # its records stop short: reported as interrupted
    (first, *_) = run_notes(summarize(settings_of(cfg), run))
    assert first == "note: the run did not end: its records file stops before the end"


def test_a_point_without_an_interval_gets_no_error_bar() -> None:
    """Fewer than 3 runs: summary.csv may have no interval columns; the planes draw no bar."""
    bare = [
        point(p.name, p.label, **{k: str(v) for k, v in row.items() if "_ci95" not in k})
        for p, row in POINTS[:2]
    ]
    planes = trade_off_planes(*split(bare), 2)
    assert planes is not None
    for plane in planes:
        assert plane.x == [40.0, 150.0]
        assert all(math.isnan(v) for v in (*plane.x_low, *plane.x_high, *plane.y_low))
