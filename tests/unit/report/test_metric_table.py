"""The metric table declares each figure once, and every view it names shows it: for every row,
a summary of a small made-up run is rendered in each of the row's views and the figure is
looked for there (no socket, no subprocess)."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
from report_runs import POOLING_BACKEND, full_config, made_up_run

from loadgen.report.campaign_summary import (
    PointRuns,
    metric_keys,
    summary_metrics,
    summary_rows,
    summary_table,
)
from loadgen.report.html_campaign import CampaignPoint, campaign_table, point_figures
from loadgen.report.html_report import summary_table as html_summary_table
from loadgen.report.metric_table import (
    CAMPAIGN,
    CAMPAIGN_TABLE,
    CONSOLE,
    FIGURES,
    JSON,
    LATENCIES,
    LOADGEN_JSON,
    TABLE_STATISTIC,
    VIEWS,
    Figure,
    Latency,
)
from loadgen.report.result_json import result_json
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines


def table_titles(lines: list[str]) -> list[str]:
    """The column titles of the campaign's console table (its second line), after the point
    and its runs: right-aligned in 22 characters each, a space apart."""
    header = lines[1]
    start = len(f"{'point':<40} {'ok':>5} ")
    return [header[i : i + 22].strip() for i in range(start, len(header), 23)]


@functools.cache
def views_of_a_run(pooling: bool) -> dict[str, Any]:
    """Each view of the made-up run as what a row is looked for in: the console's and the
    html summary table's text, the result JSON's keys, summary.csv's columns, the columns
    of report.html's campaign table and the titles of the campaign's console table."""
    cfg = full_config(backend=POOLING_BACKEND) if pooling else full_config()
    run = made_up_run(cfg, server=True)
    report = build_report(settings_of(cfg), output_of(cfg), run, date="d")
    summary = report.summary
    lines = console_lines(summary)
    html = html_summary_table(summary)
    name = "max_concurrency=4-request_rate=100.0"
    points = [
        PointRuns(
            name, 4, 100.0, metrics=[summary_metrics(summary)[0]],
            error_kinds=[summary.errors.by_kind],
        )
    ]  # fmt: skip
    rows = summary_rows(points, num_runs=1, percentiles=summary.settings.percentiles)
    row = {"point": name, "max_concurrency": "4", "request_rate": "100.0", "runs": "1"}
    point = CampaignPoint(row, "c=4", [], [report])
    figures = point_figures([point], 1, steady=False, percentiles=summary.settings.percentiles)
    assert figures == rows  # report.html's table is summary.csv's rows, computed again
    table = campaign_table([point], figures, num_runs=1, pooling=pooling)
    return {
        CONSOLE: "\n".join(lines),
        "html": "\n".join(" ".join(cells) for cells in html.rows),
        JSON: set(result_json(summary, "d")),
        LOADGEN_JSON: {
            key
            for key, value in result_json(summary, "d")["loadgen"]["server"].items()
            if value is not None
        },
        CAMPAIGN: {key for key, cell in rows[0].items() if cell != ""},  # measured
        "html campaign": {
            title: cell for title, cell in zip(table.header, table.rows[0], strict=True)
        },
        CAMPAIGN_TABLE: table_titles(summary_table(rows, num_runs=1, pooling=pooling)),
    }


def figure_found(figure: Figure, view: str, views: dict[str, Any]) -> bool:
    """Whether a figure is shown in a view: its label on the console (and the html summary
    table made from it), its key in the JSON and summary.csv (and its title, with a figure, in
    report.html's campaign table; a setting, in its point's name there)."""
    if view == CONSOLE:
        return figure.label in views[CONSOLE] and figure.label.rstrip(":") in views["html"]
    if view == CAMPAIGN_TABLE:
        return figure.title in views[CAMPAIGN_TABLE]
    if view == CAMPAIGN:
        html = views["html campaign"]
        campaign_html = (
            f"{figure.key}=" in html["point"]
            if figure.of == "settings"
            else html.get(figure.title, "-") != "-"
        )
        assert campaign_html == (figure.key in views[CAMPAIGN]), figure.key
    return figure.key in views[view]


@pytest.mark.parametrize("pooling", [False, True], ids=["generation", "pooling"])
@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.key)
def test_every_figure_is_in_every_view_it_names(figure: Figure, pooling: bool) -> None:
    views = views_of_a_run(pooling)
    named = figure.views_for(pooling)
    for view in VIEWS:
        assert figure_found(figure, view, views) == (view in named), view


@pytest.mark.parametrize("latency", LATENCIES, ids=lambda row: row.key)
def test_every_latency_is_in_every_view_it_names(latency: Latency) -> None:
    views = views_of_a_run(False)  # a generation run reports every latency
    found = {
        CONSOLE: f"Mean {latency.short} (ms):" in views[CONSOLE]
        and latency.title in views[CONSOLE]
        and f"Mean {latency.short} (ms)" in views["html"],
        JSON: {f"mean_{latency.key}_ms", f"p99_{latency.key}_ms"} <= views[JSON],
        CAMPAIGN: {f"{stat}_{latency.key}_ms" for stat in ("mean", "median", "p50", "p99")}
        <= views[CAMPAIGN]
        and all(
            views["html campaign"].get(latency.column(stat), "-") != "-"
            for stat in ("mean", "median", "p50", "p99")
        ),
        CAMPAIGN_TABLE: latency.column(TABLE_STATISTIC) in views[CAMPAIGN_TABLE],
        LOADGEN_JSON: False,  # the server's figures only
    }
    assert {view for view, shown in found.items() if shown} == set(latency.views)


@pytest.mark.parametrize("row", [*FIGURES, *LATENCIES], ids=lambda row: row.key)
def test_the_campaign_console_table_shows_only_summary_csv_columns(row: Figure | Latency) -> None:
    """The console table renders summary.csv's rows: a row it names must be among them."""
    for pooling in (False, True):
        views = row.views_for(pooling) if isinstance(row, Figure) else row.views
        assert CAMPAIGN_TABLE not in views or CAMPAIGN in views


def test_each_key_is_declared_once() -> None:
    keys = [f.key for f in FIGURES] + [latency.key for latency in LATENCIES]
    assert len(keys) == len(set(keys))
    places = [f.console for f in FIGURES if f.console is not None]
    assert len(places) == len(set(places))


def test_the_campaign_keys_come_from_the_table_and_the_percentiles() -> None:
    keys = metric_keys()
    assert keys[:3] == ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms")
    assert keys[-14:] == (
        "completed",
        "failed",
        "cancelled",
        "not_sent",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "prefix_cache_hit_rate",
        "server_kv_cache_mean_pct",
        "server_kv_cache_peak_pct",
        "server_waiting_peak",
        "server_queued_pct",
        "server_preemptions",
        "server_prefix_cache_hit_rate",
    )
    assert metric_keys([99.9, 50])[:5] == (
        "mean_ttft_ms",
        "median_ttft_ms",
        "p50_ttft_ms",
        "p99_ttft_ms",
        "p99.9_ttft_ms",
    )


def test_a_steady_state_counts_goodput_over_its_window() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), made_up_run(cfg, gap_ms=50))
    whole, trimmed = summary_metrics(summary)
    assert trimmed == 0 and whole["request_goodput"] == summary.totals.request_goodput
    # Sends at 0, 50, ... 350 ms, each ending 80 ms later: the window runs from the first end
    # (80 ms) to the last send (350 ms) and keeps the 4 requests sent at 100 to 250 ms, each
    # within the SLOs (TTFT 30 ms, E2EL 70 ms).
    steady, trimmed = summary_metrics(summary, steady=True)
    assert (trimmed, steady["completed"], steady["failed"]) == (4, 4.0, 0.0)
    assert steady["request_goodput"] == pytest.approx(4 / 0.270)
    assert steady["request_throughput"] == pytest.approx(4 / 0.270)


def test_an_empty_goodput_is_not_shown_and_is_null_in_the_json() -> None:
    cfg = full_config(goodput=None)
    summary = summarize(settings_of(cfg), made_up_run(cfg, audio=False))
    assert summary.totals.request_goodput is None
    assert not any("goodput" in line or "RTFx" in line for line in console_lines(summary))
    result = result_json(summary, "d")
    assert result["request_goodput"] is None and result["rtfx"] == 0.0


def test_the_report_renders_its_summary() -> None:
    cfg = full_config(fail_on=("completed<100",))
    report = build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d")
    assert report.lines == console_lines(report.summary)
    assert report.result == result_json(report.summary, "d")
    assert report.breaches == ["breached: completed<100 (measured 7)"]
    assert report.summary.errors.by_kind == {"HTTP 500": 1}
    assert math.isclose(report.summary.totals.rtfx or 0.0, 7 * 1.5 / report.summary.totals.duration)


@pytest.mark.parametrize("goodput", [{"ttft": 50.0}, None], ids=["goodput", "none"])
def test_the_campaign_table_shows_goodput_where_it_was_measured(goodput: object) -> None:
    cfg = full_config(goodput=goodput)
    metrics, _ = summary_metrics(summarize(settings_of(cfg), made_up_run(cfg)))
    for runs in (1, 2):
        rows = summary_rows([PointRuns("c=4", 4, 100.0, metrics=[metrics] * runs)], runs)
        titles = table_titles(summary_table(rows, runs))
        rates = ["req/s", "goodput req/s", "output tok/s"]
        assert titles[:-3] == (rates if goodput else [rates[0], rates[2]])
        # the made-up server reports its prefix-cache hits
        assert titles[-3:] == ["prefix cache hit %", "p99 TTFT (ms)", "p99 ITL (ms)"]
