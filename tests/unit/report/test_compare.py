"""loadgen/report/compare.py: the cluster gather, the bootstrap interval and the flag, on samples
built by hand (no run, no socket)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from report_runs import N, full_config, made_up_run, stopped_run

from loadgen.report.campaign_summary import counted_window
from loadgen.report.compare import (
    Row,
    Samples,
    bootstrap_differences,
    compare,
    gather,
    pooled_samples,
    requests_within,
    statistic,
    table_lines,
)
from loadgen.report.settings import settings_of
from loadgen.report.summarize import summarize


def samples(name: str, ttft_ms: np.ndarray, itls_ms: list[list[float]]) -> Samples:
    """A side whose requests have these TTFTs and these ITLs (E2EL and TPOT follow from them)."""
    counts = [len(g) for g in itls_ms]
    itl = np.array([x for g in itls_ms for x in g], dtype=float) / 1000
    e2el = ttft_ms / 1000 + np.array([sum(g) for g in itls_ms]) / 1000
    return Samples(
        name=name,
        ttft_s=ttft_ms / 1000,
        tpot_s=np.array([np.mean(g) for g in itls_ms]) / 1000,
        e2el_s=e2el,
        itl_s=itl,
        itl_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        request_throughput=10.0,
        output_throughput=100.0,
        runs=1,
    )


def test_gather_puts_the_picked_clusters_end_to_end_in_the_order_picked():
    values = np.array([1, 2, 3, 10, 20, 100])
    offsets = np.array([0, 3, 3, 5, 6])  # clusters [1 2 3] [] [10 20] [100]
    assert gather(values, offsets, np.array([2, 0, 2, 1, 3])).tolist() == [
        10, 20, 1, 2, 3, 10, 20, 100
    ]  # fmt: skip


def test_a_clear_difference_is_flagged_and_a_side_against_itself_is_not():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 10, 400)
    (shifted,) = bootstrap_differences(base, base + 20, [statistic("mean")], resamples=400)
    (same,) = bootstrap_differences(base, base.copy(), [statistic("mean")], resamples=400)
    assert 17 < shifted[0] < 20 < shifted[1] < 23
    assert same[0] < 0 < same[1]
    assert Row("m", 100, 120, *shifted).flagged
    assert not Row("m", 100, 100, *same).flagged


def test_the_interval_is_reproducible_and_narrows_with_more_requests():
    rng = np.random.default_rng(2)
    small, large = rng.exponential(1, 100), rng.exponential(1, 10_000)
    stat = [statistic("median")]
    first = bootstrap_differences(small, small + 1, stat, resamples=300)
    assert first == bootstrap_differences(small, small + 1, stat, resamples=300)
    (narrow,) = bootstrap_differences(large, large + 1, stat, resamples=300)
    (wide,) = first
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 3


def test_itl_is_resampled_by_request_so_one_slow_stream_stays_one_slow_stream():
    """One request with 100 slow gaps among 99 fast ones: drawing gaps alone would see 100
    independent slow values and a narrow interval for the mean ITL; drawing requests keeps them
    together, so the interval is as wide as one request in a hundred makes it."""
    itls = [[1.0] * 100 for _ in range(99)] + [[50.0] * 100]
    base = samples("a", np.full(100, 10.0), itls)
    mean = [statistic("mean")]
    (by_request,) = bootstrap_differences(
        base.itl_s, base.itl_s, mean,
        base_offsets=base.itl_offsets, other_offsets=base.itl_offsets, resamples=400,
    )  # fmt: skip
    (by_gap,) = bootstrap_differences(base.itl_s, base.itl_s, mean, resamples=400)
    assert (by_request[1] - by_request[0]) > 5 * (by_gap[1] - by_gap[0])


def test_compare_rows_cover_every_latency_statistic_the_throughputs_and_the_counts():
    base = samples("a", np.full(50, 10.0) + np.arange(50) % 3, [[2.0, 2.0]] * 50)
    other = samples("b", np.full(50, 30.0) + np.arange(50) % 3, [[2.0, 2.0]] * 50)
    other.failed, other.cancelled, other.not_sent = 3, 2, 7
    rows = {row.metric: row for row in compare(base, other, resamples=200)}
    assert len(rows) == 4 * 3 + 2 + 4
    assert [(rows[n].base, rows[n].other) for n in ("failed", "cancelled", "not sent")] == [
        (0, 3),
        (0, 2),
        (0, 7),
    ]
    assert rows["not sent"].count and math.isnan(rows["not sent"].low)
    assert rows["mean ttft (ms)"].delta == pytest.approx(20.0)
    assert rows["mean ttft (ms)"].flagged
    assert not rows["median itl (ms)"].flagged  # the same gaps on both sides
    assert math.isnan(rows["request throughput (req/s)"].low)  # one run a side: no interval
    lines = table_lines(base, [(other, list(rows.values()))])
    assert lines[0].startswith("b against a (1 and 1 run(s)")
    assert any(line.strip().startswith("mean ttft (ms)") and line.endswith(" *") for line in lines)
    (not_sent,) = [line for line in lines if line.strip().startswith("not sent")]
    assert not_sent.split()[2:5] == ["0", "7", "+7"]  # a count is shown whole


def test_no_resamples_or_an_empty_side_gives_no_interval():
    assert bootstrap_differences(np.ones(5), np.ones(5), [statistic("p99")], resamples=0) == [
        (math.nan, math.nan)
    ]
    (interval,) = bootstrap_differences(np.zeros(0), np.ones(5), [statistic("mean")])
    assert all(math.isnan(x) for x in interval)


def test_a_large_itl_sample_is_drawn_from_whole_requests_within_the_limit():
    values = np.arange(1000)
    offsets = np.arange(0, 1001, 10)  # 100 requests of 10 gaps: request r holds 10r..10r+9
    kept, kept_offsets = requests_within(values, offsets, 95)
    assert len(kept) == 90 and kept_offsets.tolist() == list(range(0, 91, 10))
    for r in range(9):  # each kept request whole, in one piece
        chunk = kept[kept_offsets[r] : kept_offsets[r + 1]]
        assert chunk.tolist() == list(range(chunk[0], chunk[0] + 10)) and chunk[0] % 10 == 0
    same, same_offsets = requests_within(values, offsets, 1000)
    assert same is values and same_offsets is offsets


def test_draws_in_batches_agree_with_draws_one_by_one(monkeypatch: pytest.MonkeyPatch):
    rng = np.random.default_rng(7)
    base, other = rng.normal(100, 10, 300), rng.normal(105, 10, 400)
    batched = bootstrap_differences(base, other, [statistic("median")], resamples=600)
    one_by_one = bootstrap_differences(base, other, [lambda x: float(np.median(x))], resamples=600)
    monkeypatch.setattr("loadgen.report.compare.BATCH_VALUES", 1000)  # a batch of 2 draws
    small = bootstrap_differences(base, other, [statistic("median")], resamples=601)
    assert small == bootstrap_differences(base, other, [statistic("median")], resamples=601)
    for low, high in (*batched, *one_by_one, *small):
        assert low < 5 < high  # each holds the true shift
    widths = [high - low for low, high in (*batched, *one_by_one, *small)]
    assert max(widths) < 1.3 * min(widths)  # the same spread, drawn either way


def test_a_stopped_run_counts_its_failed_cancelled_and_unsent_apart():
    cfg = full_config()
    stopped = pooled_samples("stopped", [summarize(settings_of(cfg), stopped_run(cfg))])
    whole = pooled_samples("whole", [summarize(settings_of(cfg), made_up_run(cfg))])
    assert (stopped.completed, stopped.failed, stopped.cancelled, stopped.not_sent) == (
        N - 3,
        1,
        1,
        1,
    )
    assert (whole.completed, whole.failed, whole.cancelled, whole.not_sent) == (N - 1, 1, 0, 0)
    rows = {row.metric: row for row in compare(whole, stopped, resamples=0)}
    assert (rows["cancelled"].delta, rows["not sent"].delta, rows["completed"].delta) == (1, 1, -2)


def test_a_campaigns_steady_state_pools_its_window_only():
    cfg = full_config()
    # Requests 40 ms apart, 80 ms long: those sent after the first ended and ended before the
    # last was sent are the window (--steady-state's rule).
    summary = summarize(settings_of(cfg), made_up_run(cfg, gap_ms=40))
    window = counted_window(summary, steady=True)
    assert window is not None and 0 < window.trimmed < N
    steady = pooled_samples("x", [summary], steady=True)
    whole = pooled_samples("x", [summary])
    kept = int((window.kept & summary.requests.results.success).sum())
    assert len(steady.ttft_s) == kept < len(whole.ttft_s)
    assert steady.request_throughput == pytest.approx(kept / window.duration_s)
