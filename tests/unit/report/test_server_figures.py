"""The server's figures over a run, from the series scraped off its /metrics: KV-cache usage
mean and peak, the waiting requests' peak and the share of the run they queued, preemptions
and the prefix cache's hit rate counted over the run; absent series give absent figures (not
0); they reach the totals, the result JSON's loadgen.server, a steady window's figures and the
verdict. Made-up series, no socket."""

from __future__ import annotations

import math

import numpy as np
import pytest
from report_runs import URL, full_config, made_up_run, server_series

from loadgen.records.server_series import MetricSeries
from loadgen.report.campaign_summary import summary_metrics
from loadgen.report.result_json import result_json
from loadgen.report.server_figures import ServerFigures, server_figures
from loadgen.report.settings import settings_of
from loadgen.report.summarize import summarize
from loadgen.report.verdict import server_note

T = np.arange(4, dtype=np.int64) * 1_000_000_000  # four scrapes, a second apart


def series(name: str, values: list[float], source: str = URL, **labels: str) -> MetricSeries:
    return MetricSeries(source, name, labels, T[: len(values)], np.array(values, float))


def test_the_figures_of_a_vllm_run() -> None:
    figures = server_figures(server_series())
    assert figures is not None
    assert figures.kv_cache_usage_mean == pytest.approx(100 * (0.1 + 0.5 + 0.95 + 0.6) / 5)
    assert figures.kv_cache_usage_peak == pytest.approx(95.0)
    assert (figures.requests_waiting_peak, figures.queued_share) == (3.0, 40.0)
    assert figures.preemptions == 2.0  # 4 -> 6 over the run, not the 6 since the start
    assert figures.prefix_cache_hit_rate == pytest.approx(100 * 100 / 400)


def test_absent_series_give_absent_figures_not_zeros() -> None:
    assert server_figures(None) is None and server_figures([]) is None
    # llama.cpp: running and waiting only
    only = server_figures([series("requests_waiting", [0, 0, 0]), series("requests_running", [1])])
    assert only == ServerFigures(requests_waiting_peak=0.0, queued_share=0.0)
    # a DCGM exporter's series, or names unknown: no server figure at all
    gpu = series("gpu_power_w", [300, 310], "http://gpu:9400/metrics", gpu="0")
    assert server_figures([gpu, series("vllm:cache_config_info", [1])]) is None
    # hits without lookups or prompt tokens: no rate
    assert server_figures([series("prefix_cache_hits", [0, 5])]) is None


def test_label_sets_are_summed_per_scrape_and_the_kv_cache_averaged() -> None:
    engines = [
        series("requests_waiting", [0, 2, 0, 0], engine="0"),
        series("requests_waiting", [0, 3, 1, 0], engine="1"),
        series("kv_cache_usage", [0.2, 1.0, 0.4, 0.0], engine="0"),
        series("kv_cache_usage", [0.0, 0.6, 0.4, 0.0], engine="1"),
    ]
    figures = server_figures(engines)
    assert figures is not None
    assert (figures.requests_waiting_peak, figures.queued_share) == (5.0, 50.0)
    assert figures.kv_cache_usage_peak == pytest.approx(80.0)
    assert figures.kv_cache_usage_mean == pytest.approx(100 * (0.1 + 0.8 + 0.4 + 0.0) / 4)


def test_a_counter_reset_counts_on_from_zero() -> None:
    restarted = server_figures([series("preemptions", [5, 7, 1, 2])])
    assert restarted is not None and restarted.preemptions == 2 + 1 + 1


def test_sglang_hits_are_counted_against_its_prompt_tokens() -> None:
    figures = server_figures(
        [series("prefix_cache_hits", [0, 30, 60]), series("prompt_tokens", [10, 110, 210])]
    )
    assert figures is not None and figures.prefix_cache_hit_rate == pytest.approx(30.0)


def test_a_window_keeps_its_scrapes_only() -> None:
    figures = server_figures([series("requests_waiting", [9, 0, 1, 9])], window_s=(0.5, 2.5))
    assert figures == ServerFigures(requests_waiting_peak=1.0, queued_share=50.0)


def test_the_summary_carries_them_to_the_json_and_the_verdict() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), made_up_run(cfg, server=True))
    totals = summary.totals
    assert (totals.server_kv_cache_peak_pct, totals.server_waiting_peak) == (95.0, 3.0)
    # the gauges count the scrapes during the run (40, 80 and 120 ms: not the one at t0 nor the
    # one after its end at 160 ms), the counters every scrape
    assert totals.server_queued_pct == pytest.approx(200 / 3) and totals.server_preemptions == 2.0
    assert totals.server_kv_cache_mean_pct == pytest.approx((50 + 95 + 60) / 3)
    server = result_json(summary, "d")["loadgen"]["server"]
    assert server["server_prefix_cache_hit_rate"] == pytest.approx(25.0)
    assert "server_kv_cache_peak_pct" not in result_json(summary, "d")  # not upstream's keys
    verdict = summary.client.verdict
    assert verdict.endswith(
        " | server: it queued requests for 67 % of the run (up to 3 waiting), and TTFT counts "
        "that wait; its KV cache peaked at 95 % and it preempted 2 requests, which redo "
        "their prefill"
    )
    assert summary.server_series is not None


def test_a_run_without_series_has_none_and_the_verdict_says_nothing() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), made_up_run(cfg))
    server = result_json(summary, "d")["loadgen"]["server"]
    assert server and all(value is None for value in server.values())
    assert "server:" not in summary.client.verdict
    metrics, _ = summary_metrics(summary)
    assert math.isnan(metrics["server_kv_cache_peak_pct"])


def test_a_steady_window_counts_the_scrapes_in_it() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), made_up_run(cfg, gap_ms=50, server=True))
    whole, _ = summary_metrics(summary)
    assert whole["server_waiting_peak"] == 3.0
    # The window runs from the first end (80.07 ms) to the last send (350 ms): the scrapes at
    # 120 and 160 ms, which found none waiting and the KV cache at 60 %, then empty.
    steady, _ = summary_metrics(summary, steady=True)
    assert (steady["server_waiting_peak"], steady["server_queued_pct"]) == (0.0, 0.0)
    assert steady["server_kv_cache_peak_pct"] == pytest.approx(60.0)
    assert steady["server_kv_cache_mean_pct"] == pytest.approx(30.0)
    assert steady["server_preemptions"] == 0.0
    assert math.isnan(steady["server_prefix_cache_hit_rate"])  # no lookups in the window


def test_the_note_speaks_only_of_what_matters() -> None:
    assert server_note(None, None, None, None) is None
    assert server_note(5.0, 2.0, 60.0, 0.0) is None  # a little queueing, a cache half full
    assert server_note(50.0, 12.0, None, None) == (
        "server: it queued requests for 50 % of the run (up to 12 waiting), and TTFT counts "
        "that wait"
    )
    assert server_note(0.0, 0.0, 70.0, 3.0) == (
        "server: it preempted 3 requests, which redo their prefill"
    )
