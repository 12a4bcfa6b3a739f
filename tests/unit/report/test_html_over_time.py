"""report.html over time (issue 29 point 5, issue 30 point 3): TTFT/ITL/E2EL percentiles per
time bin and the server's own series under the client's panels, from made-up runs and
made-up scraped series; and the SVG the page draws them with (pygal, no script, no address).
No files, no sockets."""

from __future__ import annotations

import dataclasses
import html
import math
import re
from collections.abc import Iterator

import numpy as np
import pytest
from report_runs import EVENTS, N, full_config, made_up_run
from svg_charts import charts

from loadgen.records.event_source import ArrayEvents
from loadgen.records.server_series import MetricSeries
from loadgen.report.html_campaign import slo_limit
from loadgen.report.html_charts import (
    BAND_TITLES,
    CDF_TITLES,
    FAILURES_TITLE,
    Latencies,
    TradeOff,
    cdf_figure,
    over_time_figure,
    trade_off_figure,
)
from loadgen.report.html_figures import itl_bands, percentile_bands, time_bins
from loadgen.report.html_report import ServerRecord, run_over_time, run_page
from loadgen.report.html_server import counter_rate, server_panels, why_no_panels
from loadgen.report.html_svg import Line, Panel, log_ticks, nice_ticks, number, svg
from loadgen.report.metrics import gaps_of_chunk
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summarize import summarize

SOURCE = "http://127.0.0.1:8000/metrics"


def series(name: str, t_s: list[float], values: list[float], **labels: str) -> MetricSeries:
    """A scraped series as the records file gives it back."""
    return MetricSeries(SOURCE, name, labels, (np.array(t_s) * 1e9).astype(np.int64),
                        np.array(values, dtype=float))  # fmt: skip


def test_percentile_bands_are_each_bin_s_own_percentiles() -> None:
    bins = time_bins(3.0, 3)  # [0, 1), [1, 2), [2, 3]
    at = np.array([0.1, 0.2, 0.9, 2.5, 3.0, 3.5, -1.0, np.nan])
    values = np.array([1.0, 2.0, 10.0, 7.0, 9.0, 100.0, 100.0, 5.0])
    bands = percentile_bands(at, values, bins, (50.0, 99.0))
    assert bands.shape == (3, 2)
    np.testing.assert_allclose(bands[0], np.percentile([1.0, 2.0, 10.0], [50, 99]))
    assert np.isnan(bands[1]).all()  # no value in the middle bin
    # the run's last instant belongs to the last bin; what lies outside is left out
    np.testing.assert_allclose(bands[2], np.percentile([7.0, 9.0], [50, 99]))


def test_each_gap_is_placed_at_its_later_token() -> None:
    event_s = np.array([0.0, 1.0, 3.0, 5.0, 6.0])
    counts = np.array([3, 0, 2])  # 3 events, none (failed), 2 events
    np.testing.assert_array_equal(gaps_of_chunk(event_s, counts, later=True), [1, 3, 6])
    np.testing.assert_array_equal(gaps_of_chunk(event_s, counts), [1, 2, 1])
    assert len(gaps_of_chunk(np.zeros(1), np.array([1]), later=True)) == 0


def test_itl_bands_read_in_chunks_are_each_bin_s_percentiles() -> None:
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 30, 200)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    values = np.concatenate([np.sort(rng.random(c) * 10) for c in counts])
    ok = rng.random(200) > 0.2
    bins = time_bins(10.0, 7)
    # The reference: every gap laid out, np.percentile of each bin's (percentile_bands).
    owner_ok = np.repeat(ok, np.maximum(counts - 1, 0))
    gaps = gaps_of_chunk(values, counts)[owner_ok]
    at = gaps_of_chunk(values, counts, later=True)[owner_ok]
    want = percentile_bands(at, 1e3 * gaps, bins)

    class Small(ArrayEvents):  # chunks of a few events: many chunk boundaries
        def chunks(self, max_events: int = 0) -> Iterator[tuple[int, int, np.ndarray]]:
            return super().chunks(max_events=17)

    got = itl_bands(Small(values, offsets), ok, bins)
    np.testing.assert_array_equal(got, want)


def test_a_run_s_latency_bands_hold_its_latencies_in_the_bins_they_were_measured() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), made_up_run(cfg))
    over = run_over_time("run", summary)
    assert list(over.bands_ms) == ["ttft", "itl", "e2el"]
    # made_up_run: first token 30 ms after each send, tokens 10 ms apart, the last request failed
    expected = {"ttft": 30.0, "itl": 10.0, "e2el": 30.0 + 10.0 * (EVENTS - 1)}
    edges = np.concatenate(
        (over.centers_s - over.width_s / 2, [over.centers_s[-1] + over.width_s / 2])
    )
    sent_s = summary.requests.results.sent_s[: N - 1]
    first_token_bins = set(np.searchsorted(edges, sent_s + 0.030, side="right") - 1)
    for key, bands in over.bands_ms.items():
        filled = ~np.isnan(bands[:, 0])
        np.testing.assert_allclose(bands[filled], expected[key], atol=1e-3)
        if key == "ttft":
            assert set(np.flatnonzero(filled)) == {min(b, len(bands) - 1) for b in first_token_bins}
    page = over_time_figure([over])
    titles = [chart.title for chart in charts(page)]
    assert [BAND_TITLES[k] for k in ("ttft", "itl", "e2el")] == [
        t for t in titles if "over time" in t
    ]
    assert {"p50", "p90", "p99"} <= set(charts(page)[titles.index(BAND_TITLES["itl"])].legend)


def test_a_pooling_run_has_only_its_e2el_band() -> None:
    cfg = dataclasses.replace(full_config(), backend="openai-embeddings", endpoint="/v1/embeddings")
    summary = summarize(settings_of(cfg), made_up_run(cfg))
    assert list(run_over_time("run", summary).bands_ms) == ["e2el"]


def test_server_series_become_panels_in_their_units() -> None:
    recorded = [
        series("requests_running", [0, 1, 2], [0, 4, 6], engine="0"),
        series("requests_waiting", [0, 1, 2], [0, 0, 3], engine="0"),
        series("kv_cache_usage", [0, 1, 2], [0.0, 0.25, 0.5], engine="0"),
        series("prompt_tokens", [0, 1, 2, 3], [0, 100, 300, 50], engine="0"),  # then a restart
        series("generation_tokens", [0, 2], [0, 40], engine="0"),
        series("prefix_cache_hits", [0, 1, 2], [0, 10, 10], engine="0"),
        series("prefix_cache_queries", [0, 1, 2], [0, 40, 40], engine="0"),
        series("some_other_gauge", [0, 1], [1, 2]),
    ]
    panels = {panel.title: panel for panel in server_panels(recorded)}
    assert list(panels) == [
        "Server: requests running and waiting",
        "Server: KV-cache usage",
        "Server: prefix-cache hit rate",
        "Server: prompt and generation tokens per second",
    ]
    running, waiting = panels["Server: requests running and waiting"].lines
    assert (running.label, waiting.label) == ("running", "waiting")
    np.testing.assert_array_equal(waiting.values, [0, 0, 3])
    np.testing.assert_array_equal(panels["Server: KV-cache usage"].lines[0].values, [0, 25, 50])
    (hits,) = panels["Server: prefix-cache hit rate"].lines
    np.testing.assert_array_equal(hits.t_s, [1, 2])
    assert hits.values[0] == 25.0 and math.isnan(hits.values[1])  # no query in the second
    prompt, generation = panels["Server: prompt and generation tokens per second"].lines
    np.testing.assert_array_equal(prompt.t_s, [1, 2, 3])
    np.testing.assert_array_equal(prompt.values[:2], [100, 200])
    assert math.isnan(prompt.values[2])  # the counter went down: a gap, not a negative rate
    np.testing.assert_array_equal(generation.values, [20])


def test_two_engines_get_a_line_each_named_by_what_differs() -> None:
    recorded = [
        series("requests_running", [0, 1], [1, 2], engine="0", model_name="m"),
        series("requests_running", [0, 1], [3, 4], engine="1", model_name="m"),
        series("preemptions", [0, 1], [0, 2]),
    ]
    panels = server_panels(recorded)
    assert [line.label for line in panels[0].lines] == ["running (engine=0)", "running (engine=1)"]
    assert panels[1].title == "Server: preemptions per second"
    assert panels[1].lines[0].values.tolist() == [2.0]


def test_counter_rate_of_one_sample_is_empty() -> None:
    t, rate = counter_rate(np.array([1.0]), np.array([5.0]))
    assert len(t) == len(rate) == 0


def test_without_server_series_the_page_says_why() -> None:
    assert "did not answer" in why_no_panels(None, True)
    assert "--no-server-metrics" in why_no_panels(None, False)
    assert "predate" in why_no_panels(None, None)
    other = why_no_panels([series("some_other_gauge", [0], [1])], True)
    assert "none of the series the page draws" in other and "some_other_gauge" in other


def test_a_run_page_draws_the_server_panels_under_the_client_s() -> None:
    cfg = full_config()
    report = build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d")
    recorded = [series("requests_running", [0.0, 0.02, 0.04, 0.06], [0, 3, 4, 1]),
                series("kv_cache_usage", [0.0, 0.02, 0.04, 0.06], [0, 0.1, 0.3, 0.2])]  # fmt: skip
    page = run_page(report, "run", ServerRecord(recorded, True))
    titles = [chart.title for chart in charts(page)]
    client = titles.index("Completed requests per second")
    server = titles.index("Server: requests running and waiting")
    assert client < titles.index(BAND_TITLES["e2el"]) < server
    assert titles.index("Server: KV-cache usage") == server + 1
    assert "server metrics were not recorded" not in page
    absent = run_page(report, "run", ServerRecord(None, True))
    assert not any(t.startswith("Server:") for t in (c.title for c in charts(absent)))
    shown = html.unescape(absent)
    assert "server metrics were not recorded: the server's /metrics did not answer" in shown


def test_the_page_has_no_script_and_loads_nothing() -> None:
    cfg = full_config()
    report = build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d")
    page = run_page(report, "run")
    assert "<script" not in page.lower() and "<link" not in page.lower()
    addresses = set(re.findall(r"(?:https?:)?//[a-z0-9.-]+[^\s\"'<>)]*", page))
    namespaces = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    assert addresses - namespaces == {"http://127.0.0.1:8000"}, addresses  # the server's own
    assert FAILURES_TITLE in [chart.title for chart in charts(page)]


def test_axis_numbers_read_as_numbers() -> None:
    assert [number(v) for v in (0, 0.00005, 0.125, 12.5, 1000, 123456.7)] == [
        "0", "0.00005", "0.125", "12.5", "1,000", "123,457",
    ]  # fmt: skip
    assert nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert log_ticks(3, 700) == [2, 5, 10, 20, 50, 100, 200, 500, 1000]
    drawn = svg(Panel("t", "x", "y", [Line("a", [(1.0, 0.00002), (2.0, 1e6)], "#000000")]))
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", drawn)
    assert not any(re.search(r"\de[+-]?\d", label) for label in labels), labels
    assert "1,000,000" in "".join(labels)


@pytest.mark.parametrize("meets", [None, [True, False]])
def test_the_trade_off_marks_the_slo(meets: list[bool] | None) -> None:
    plane = TradeOff(["c=1", "c=4"], [10.0, 30.0], [math.nan] * 2, [math.nan] * 2,
                     [100.0, 900.0], [math.nan] * 2, [math.nan] * 2, [0, 1], meets,
                     limit=500.0 if meets else None)  # fmt: skip
    legend = charts(trade_off_figure([plane, plane]))[0].legend
    if meets is None:
        assert legend == ["Pareto front", "point"]
    else:
        assert legend == ["Pareto front", "SLO: p99 TTFT ≤ 500 ms", "meets the SLO",
                          "misses the SLO"]  # fmt: skip


def test_slo_limit_reads_an_upper_bound() -> None:
    assert slo_limit(["p99_ttft_ms<=500,p99_itl_ms<50"], "p99_itl_ms") == 50.0
    assert slo_limit(["p99_ttft_ms<=500"], "p99_ttft_ms") == 500.0
    assert slo_limit(["p99_ttft_ms>=500", "p90_ttft_ms<=5"], "p99_ttft_ms") is None


def test_a_run_without_one_completed_request_draws_its_cdfs_as_no_data() -> None:
    empty = np.zeros(0)
    page = cdf_figure([Latencies("run", empty, empty, empty)])
    drawn = charts(page)
    assert [chart.title for chart in drawn] == list(CDF_TITLES.values())
    assert all("no data" in chart.svg for chart in drawn)
    lone = svg(Panel("Nothing", "s", "req/s", [Line("a", [], "#000")]))
    assert "no data" in lone and "Nothing" in lone
