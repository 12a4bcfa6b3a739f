"""The figures a report reads from its token events, computed from the records file a bounded
chunk of requests at a time (loadgen/records/events.py, loadgen/report/metrics.py), give a
result JSON byte-identical to the one the in-memory report writes from the same file: several
made-up runs, their batches written out of order as workers send them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from report_runs import full_config, start_and_end

from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.events import RequestOrderEvents
from loadgen.records.read import read_records
from loadgen.report.metrics import (
    event_bounds_s,
    itl_stats_chunked,
    latency_stats,
    peak_output_tokens_per_s_chunked,
    summarize,
    timings_from_bounds,
    tpot_of,
)
from loadgen.report.result_json import result_json
from loadgen.report.settings import settings_of
from loadgen.report.summarize import request_results, run_end
from loadgen.report.summarize import summarize as summarize_run
from workers.protocol import RECORD_DTYPE

CONFIG = full_config(metric_percentiles="25,50,90,99,99.9")


def write_made_up_run(path: Path, seed: int) -> int:
    """A run of a few hundred requests, 0 to 80 token events each (gaps of 0 to 30 ms, ties
    included), one in ten failed after some events, in batches of 1 to 40 requests sent by
    two workers in random order; its number of requests."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    records = np.zeros(n, dtype=RECORD_DTYPE)
    records["index"] = np.arange(n)
    records["released_ns"] = np.sort(rng.integers(0, 2_000_000_000, n))
    records["sent_ns"] = records["released_ns"] + rng.integers(0, 5_000_000, n)
    records["n_events"] = rng.integers(0, 80, n)
    records["status"] = 200
    records["success"] = rng.random(n) > 0.1
    records["prompt_tokens"] = 30
    records["completion_tokens"] = records["n_events"]
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    events = []
    for i in range(n):
        gaps = rng.choice([0, 1_000, 999_999, 30_000_000], records["n_events"][i]) + rng.integers(
            0, 20_000_000, records["n_events"][i]
        )
        events.append(records["sent_ns"][i] + 5_000_000 + np.cumsum(gaps))
    records["end_ns"] = [
        e[-1] + 1000 if len(e) else s for e, s in zip(events, records["sent_ns"], strict=True)
    ]
    start, end = start_and_end(CONFIG, records)
    start = dataclasses.replace(start, num_requests=n)
    end = dataclasses.replace(end, output_lens=np.where(records["success"], records["n_events"], 0))
    writer = RecordsWriter(
        str(path), start, np.arange(n, dtype=np.int64), np.full(n, 29), np.ones(n), None
    )
    writer.start(start.t0_ns, start.t0_wall, start.connections)
    order = rng.permutation(n)
    cuts = np.cumsum(rng.integers(1, 40, n))
    for w, batch in enumerate(np.split(order, cuts[cuts < n])):
        rows = records[batch]
        flat = np.concatenate([events[i] for i in batch]).astype(np.int64)
        writer.write(w % 2, rows, flat, {}, {})
    collected = Collected(
        records=records,
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.zeros(0, np.int64),
        errors={},
        texts={},
        t0_ns=start.t0_ns,
        connections=start.connections,
        worker=np.zeros(n, np.int16),
    )
    writer.finish(collected, end)
    assert writer.failure is None
    return n


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_result_json_from_chunks_is_byte_identical(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, seed)
    settings = settings_of(CONFIG)
    run = read_records(str(path))
    summary = summarize_run(settings, run)
    in_memory = json.dumps(result_json(summary, "20261206-000000"))

    # From the file, a few requests' events at a time (chunks far smaller than the run).
    events = RequestOrderEvents(str(path), n, cache_batches=2)
    first_s, last_s = event_bounds_s(events)
    results = request_results(run, run_end(run, pooling=False))
    timings = timings_from_bounds(results, first_s, last_s)
    ok, percentiles = results.success, list(settings.percentiles)
    ttft, latency = timings.ttft_s[ok], timings.latency_s[ok]
    stats = {
        "ttft": summarize(ttft, percentiles),
        "tpot": summarize(tpot_of(ttft, latency, results.output_lens[ok]), percentiles),
        "itl": itl_stats_chunked(events, ok, percentiles),
        **latency_stats(latency, timings.queue_s[ok], percentiles),
    }
    send_ok = results.sent_s[ok]
    chunked = dataclasses.replace(
        summary,
        latencies={name: stats[name] for name in summary.latencies},
        totals=dataclasses.replace(
            summary.totals,
            max_output_tokens_per_s=peak_output_tokens_per_s_chunked(events, ok, send_ok, latency),
        ),
    )
    assert json.dumps(result_json(chunked, "20261206-000000")) == in_memory
    assert summary.latencies["itl"].percentiles_ms[0][1] > 0  # real ITLs, not empty samples


def test_chunks_hold_each_requests_events_in_request_order(tmp_path: Path) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 9)
    run = read_records(str(path))
    events = RequestOrderEvents(str(path), n, cache_batches=1)
    assert events.offsets.tolist() == run.event_offsets.tolist()
    pieces = list(events.chunks(max_events=100))
    assert len(pieces) > 10 and pieces[-1][1] == n
    assert np.concatenate([p[2] for p in pieces]).tolist() == run.event_ns.tolist()
