"""--prometheus-port's metrics: batches of records folded with numpy into counters and
histograms, exposed as prometheus_client writes them and read back with its parser."""

from __future__ import annotations

import time
import urllib.request

import numpy as np
import pytest
from helpers import free_port
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.fleet.collector import RecordBatch
from loadgen.session.live_prometheus import BOUNDS, LiveEndpoint, LiveMetrics
from workers.protocol import RECORD_DTYPE

MS = 1_000_000


def batch(sent_ms: list[float], gaps_ms: list[list[float]], ok: list[bool]) -> RecordBatch:
    """Rows sent at ``sent_ms``, each with token events ``gaps_ms`` apart after its send (the
    first gap is its TTFT), ending at its last event."""
    rows = np.zeros(len(sent_ms), dtype=RECORD_DTYPE)
    rows["index"] = np.arange(len(sent_ms))
    rows["sent_ns"] = np.array(sent_ms) * MS
    rows["n_events"] = [len(g) for g in gaps_ms]
    rows["success"] = ok
    rows["completion_tokens"] = -1  # counted from the events
    events = []
    for row, gaps in zip(rows, gaps_ms, strict=True):
        instants = row["sent_ns"] + np.cumsum(np.array(gaps) * MS).astype(np.int64)
        events.append(instants)
        row["end_ns"] = instants[-1] if len(instants) else row["sent_ns"]
    return RecordBatch(0, rows, np.concatenate(events).astype(np.int64), {}, {})


def scrape(metrics: LiveMetrics) -> dict[str, dict[tuple, float]]:
    """The page prometheus_client serves, parsed with its parser: name -> labels -> value."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    page = generate_latest(registry).decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            out.setdefault(sample.name, {})[key] = sample.value
    return out


RUN = (("model", "m"), ("point", ""), ("run", "demo"))  # a single run: no point


def test_batches_fold_into_counters_and_histograms() -> None:
    metrics = LiveMetrics("demo", "m", np.zeros(10, dtype=np.int64), 4, worker_pids=[])
    metrics.start(time.perf_counter_ns(), "", 0)
    metrics.batch(batch([0, 1], [[3, 1, 1], [20, 5]], [True, True]))
    metrics.batch(batch([2], [[1, 1]], [False]))  # a failure: counted, not timed
    page = scrape(metrics)
    assert page["loadgen_requests_total"] == {
        (("model", "m"), ("outcome", "completed"), ("point", ""), ("run", "demo")): 2.0,
        (("model", "m"), ("outcome", "failed"), ("point", ""), ("run", "demo")): 1.0,
        (("model", "m"), ("outcome", "cancelled"), ("point", ""), ("run", "demo")): 0.0,
        (("model", "m"), ("outcome", "not_sent"), ("point", ""), ("run", "demo")): 0.0,
    }
    assert page["loadgen_output_tokens_total"] == {RUN: 5.0}
    assert page["loadgen_streamed_tokens_total"] == {RUN: 7.0}  # the failed one's 2 too
    # 10 due by now, 3 finished, at most 4 at once.
    assert page["loadgen_requests_in_flight"] == {RUN: 4.0}
    assert page["loadgen_ttft_seconds_count"][RUN] == 2
    assert page["loadgen_ttft_seconds_sum"][RUN] == pytest.approx(0.023)
    assert page["loadgen_itl_seconds_count"][RUN] == 3  # 1, 1 and 5 ms
    assert page["loadgen_e2el_seconds_sum"][RUN] == pytest.approx(0.030)
    # Cumulative buckets, `le` inclusive: TTFT 3 ms and 20 ms.
    ttft = page["loadgen_ttft_seconds_bucket"]
    by_bound = {dict(k)["le"]: v for k, v in ttft.items()}
    assert by_bound["0.002"] == 0 and by_bound["0.004"] == 1
    assert by_bound["0.016"] == 1 and by_bound["0.032"] == 2 and by_bound["+Inf"] == 2
    assert len(by_bound) == len(BOUNDS) + 1
    itl = {dict(k)["le"]: v for k, v in page["loadgen_itl_seconds_bucket"].items()}
    assert itl["0.001"] == 2  # exactly on a bound counts under it
    assert page["loadgen_client_cpu_seconds_total"][RUN] > 0


def test_before_t0_nothing_is_in_flight() -> None:
    metrics = LiveMetrics("r", "m", np.zeros(3, dtype=np.int64), None, worker_pids=[])
    page = scrape(metrics)
    none = (("model", "m"), ("point", ""), ("run", "r"))
    assert page["loadgen_requests_in_flight"] == {none: 0.0}
    assert page["loadgen_ttft_seconds_count"] == {none: 0.0}


def test_streamed_tokens_count_answers_still_streaming_and_never_go_back() -> None:
    metrics = LiveMetrics("demo", "m", np.zeros(4, dtype=np.int64), None, worker_pids=[])
    metrics.start(time.perf_counter_ns(), "", 0)
    metrics.progress(0, 30)  # two workers' answers in flight, none finished
    metrics.progress(1, 12)
    page = scrape(metrics)
    assert page["loadgen_output_tokens_total"] == {RUN: 0.0}
    assert page["loadgen_streamed_tokens_total"] == {RUN: 42.0}
    # Worker 0's 3-event answer ends; its batch comes before the PROGRESS that drops it.
    metrics.batch(batch([0], [[1, 1, 1]], [True]))
    assert scrape(metrics)["loadgen_streamed_tokens_total"] == {RUN: 45.0}
    metrics.progress(0, 28)  # the next PROGRESS: 27 of the 30 went on, 1 more came
    assert scrape(metrics)["loadgen_streamed_tokens_total"] == {RUN: 45.0}
    metrics.progress(0, 40)
    assert scrape(metrics)["loadgen_streamed_tokens_total"] == {RUN: 55.0}


def test_requests_by_outcome_tell_cancelled_and_not_sent_apart() -> None:
    metrics = LiveMetrics("demo", "m", np.zeros(4, dtype=np.int64), None, worker_pids=[])
    metrics.start(time.perf_counter_ns(), "", 0)
    cut = batch([0, 1], [[1], [1]], [False, False])
    cut.errors.update({0: "cancelled: the run was stopped", 1: "HTTP 500: boom"})
    metrics.batch(cut)
    by_outcome = {
        dict(k)["outcome"]: v for k, v in scrape(metrics)["loadgen_requests_total"].items()
    }
    assert by_outcome == {"completed": 0, "failed": 1, "cancelled": 1, "not_sent": 0}


def test_one_endpoint_serves_a_campaigns_runs_in_turn() -> None:
    endpoint = LiveEndpoint("127.0.0.1", free_port())
    endpoint.open()
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"

        def points() -> set[str]:
            with urllib.request.urlopen(url, timeout=5) as response:
                page = response.read().decode()
            return {
                sample.labels["point"]
                for family in text_string_to_metric_families(page)
                for sample in family.samples
            }

        assert points() == set()  # open before the first run: nothing to show yet
        for point in ("rate=1 run=1", "rate=2 run=1"):
            metrics = LiveMetrics("c", "m", np.zeros(2, dtype=np.int64), None, [], point=point)
            endpoint.show(metrics)
            metrics.batch(batch([0], [[1, 1]], [True]))
            assert points() == {point}
    finally:
        endpoint.close()
