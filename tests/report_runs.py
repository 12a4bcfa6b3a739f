"""Made-up runs for the report's tests: a small RunRecords and a configuration under which
the report shows every figure it can (no socket, no file)."""

from __future__ import annotations

import dataclasses

import numpy as np

from loadgen.config import RunConfig
from loadgen.records.model import RunEnd, RunRecords, RunStart
from loadgen.records.server_series import MetricSeries
from loadgen.report.metric_table import LATENCIES
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats

N = 8
EVENTS = 5
POOLING_BACKEND = "openai-embeddings"
EVERY_LATENCY = ",".join(latency.key for latency in LATENCIES)


def full_config(**changes: object) -> RunConfig:
    """A configuration under which the console shows every row it can: paced, a concurrency
    cap, goodput SLOs, every latency selected."""
    return dataclasses.replace(
        RunConfig(
            save_result=True,
            request_rate=100.0,
            max_concurrency=4,
            goodput={"ttft": 50.0, "e2el": 200.0},
            percentile_metrics=EVERY_LATENCY,
            metric_percentiles="50,99",
        ),
        **changes,
    )


URL = "http://127.0.0.1:8000/metrics"
SCRAPES_NS = np.arange(5, dtype=np.int64) * 40_000_000  # made_up_run's /metrics, every 40 ms
# vLLM's series as the scraper names them: the KV cache filling to 95 %, requests waiting in 2
# scrapes of 5 (up to 3), 2 preemptions, 100 of 400 prompt tokens found in the prefix cache.
SERVER_SERIES = {
    "kv_cache_usage": [0.1, 0.5, 0.95, 0.6, 0.0],
    "requests_waiting": [0, 3, 1, 0, 0],
    "preemptions": [4, 4, 6, 6, 6],
    "prefix_cache_hits": [1000, 1000, 1050, 1100, 1100],
    "prefix_cache_queries": [5000, 5100, 5300, 5400, 5400],
}


def server_series() -> list[MetricSeries]:
    """The server's series of a made-up run (SERVER_SERIES), one label set each."""
    labels = {"engine": "0", "model_name": "m"}
    return [
        MetricSeries(URL, name, labels, SCRAPES_NS, np.array(values, dtype=np.float64))
        for name, values in SERVER_SERIES.items()
    ]


def made_up_run(
    cfg: RunConfig, *, audio: bool = True, gap_ms: int = 10, server: bool = False
) -> RunRecords:
    """N requests paced ``gap_ms`` apart, EVENTS token events 10 ms apart each from 30 ms after
    the send, each ending 80 ms after it, the last one failed (HTTP 500); with ``audio`` each
    request carries 1.5 s of input audio (RTFx); with ``server`` the server's /metrics was
    scraped during it (``server_series``)."""
    records = np.zeros(N, dtype=RECORD_DTYPE)
    records["index"] = np.arange(N)
    records["cached_tokens"] = 16  # tokens of each prompt the server found in its cache
    records["released_ns"] = np.arange(N) * gap_ms * 1_000_000 + 50_000
    records["sent_ns"] = records["released_ns"] + 20_000
    records["n_events"] = EVENTS
    records["n_events"][-1] = 0
    records["status"] = 200
    records["status"][-1] = 500
    records["prompt_tokens"] = 30
    records["completion_tokens"] = EVENTS
    records["success"] = True
    records["success"][-1] = False
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    records["end_ns"] = records["sent_ns"] + 80_000_000
    starts = records["sent_ns"][:-1]
    event_ns = (starts[:, None] + 30_000_000 + 10_000_000 * np.arange(EVENTS)).ravel()
    start, end = start_and_end(cfg, records)
    return RunRecords(
        start=start,
        end=end,
        records=records,
        worker=np.array([0, 1] * (N // 2), dtype=np.int16),
        scheduled_ns=np.arange(N, dtype=np.int64) * gap_ms * 1_000_000,
        input_tokens=np.full(N, 29, dtype=np.int64),
        input_sequences=np.full(N, 2, dtype=np.int64),
        event_ns=event_ns.astype(np.int64),
        event_offsets=np.concatenate(([0], np.cumsum(records["n_events"]))).astype(np.int64),
        errors={N - 1: "HTTP 500: boom"},
        texts={},
        input_audio_s=np.full(N, 1.5) if audio else None,
        server_metrics=server_series() if server else None,
    )


CANCELLED_AT = 5  # stopped_run: the request in flight when the run stopped
NOT_SENT_AT = 6  # and the one it never sent


def stopped_run(cfg: RunConfig) -> RunRecords:
    """``made_up_run`` stopped as Ctrl-C stops a run: request CANCELLED_AT was cut after 2 of
    its token events, request NOT_SENT_AT never left its worker, the last one failed (HTTP
    500), the rest completed; the errors are the workers' own texts."""
    from workers.protocol import NOT_SENT_AT_STOP as NOT_SENT
    from workers.worker import CANCELLED

    run = made_up_run(cfg)
    records = run.records
    records["n_events"][CANCELLED_AT] = 2
    records["success"][CANCELLED_AT] = False
    records["end_ns"][CANCELLED_AT] = records["sent_ns"][CANCELLED_AT] + 45_000_000
    unsent = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    unsent["index"] = NOT_SENT_AT
    records[NOT_SENT_AT] = unsent
    counts = records["n_events"].astype(np.int64)
    event_ns = np.concatenate(
        [
            records["sent_ns"][i] + 30_000_000 + 10_000_000 * np.arange(n)
            for i, n in enumerate(counts)
        ]
    ).astype(np.int64)
    assert run.end is not None
    end = dataclasses.replace(
        run.end,
        interrupted=True,
        output_lens=np.where(records["success"], EVENTS, 0).astype(np.int64),
    )
    return dataclasses.replace(
        run,
        end=end,
        event_ns=event_ns,
        event_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        errors={CANCELLED_AT: CANCELLED, NOT_SENT_AT: NOT_SENT, N - 1: "HTTP 500: boom"},
    )


def start_and_end(cfg: RunConfig, records: np.ndarray) -> tuple[RunStart, RunEnd]:
    """The start and end of a made-up run of N requests on 2 workers, EVENTS tokens each."""
    start = RunStart(
        loadgen_version="0.1.0",
        command_line=["loadgen", "run"],
        config=dataclasses.asdict(cfg),
        model_id="org/model",
        tokenizer_id="org/model",
        num_requests=N,
        num_workers=2,
        connections=4,
        schedule_sha256="00" * 8,
        t0_ns=1_000,
        t0_wall="2026-12-03T10:00:00",
        counters_before=None,
    )
    end = RunEnd(
        interrupted=False,
        worker_problems=[],
        worker_cpu_ns=[1_000_000, 2_000_000],
        worker_wall_ns=[100_000_000, 100_000_000],
        connection_stats=ConnectionStats(preopened_at_t0=4),
        loop_lag_ns=np.array([100_000, 200_000], dtype=np.int64),
        output_lens=np.where(records["success"], EVENTS, 0).astype(np.int64),
        counters_after=None,
        probe_latencies_s=None,
    )
    return start, end
