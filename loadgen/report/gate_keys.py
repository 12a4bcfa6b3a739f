"""Whether each ``--fail-on`` key is one the run's result JSON will hold, asked before the run.

The keys of a result depend on the flags (``--metric-percentiles``, ``--percentile-metrics``,
``--max-concurrency``, a paced rate, pooling, probes...). Rather than keep a second list of
them, the real report is built over a two-request sample run with the same settings; the keys
that only a server's answer brings (speculative decoding, diffusion, the host's CPU use) are
added from their own builders.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from loadgen.records.environment import environment
from loadgen.records.model import HostUsage, RunEnd, RunRecords, RunStart
from loadgen.report.decoding import result_keys as decoding_keys
from loadgen.report.gates import MISSING, gate_key, lookup, numeric_keys
from loadgen.report.report_output import ReportOutput
from loadgen.report.run_report import build_report
from loadgen.report.run_summary import Settings
from workers.protocol import RECORD_DTYPE, ConnectionStats

_STAT_KEY = re.compile(r"^(mean|median|std|p[0-9.]+)_[a-z0-9_]+_ms$")
SAMPLE_EVENTS = 3


def gate_problem(settings: Settings, stored: Mapping[str, Any]) -> str | None:
    """Why the first ``--fail-on`` condition whose key the run's result will not hold as a
    number cannot be judged, in one line; None when every one can. ``stored``: the run's
    configuration as its records file stores it (the result's ``loadgen.dataset`` comes from
    it)."""
    if not settings.fail_on:
        return None
    result = sample_result(settings, stored)
    known = set(numeric_keys(result))
    for text in settings.fail_on:
        key = gate_key(text)
        if key in known:
            continue
        value = lookup(result, key)
        if value is None:
            return f"--fail-on {text!r}: {key} has no value (null) in this run's result"
        if value is not MISSING:
            return f"--fail-on {text!r}: {key} is not a number in the result JSON"
        return f"--fail-on {text!r}: no key {key} in this run's result JSON{_hint(key, known)}"
    return None


def _hint(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=3)
    hint = f" (close: {', '.join(close)})" if close else ""
    if _STAT_KEY.match(key):
        hint += "; --percentile-metrics and --metric-percentiles choose the pNN_METRIC_ms keys"
    return hint


def sample_result(settings: Settings, stored: Mapping[str, Any]) -> dict[str, Any]:
    """The result JSON a run with these settings would write, over two made-up successful
    requests, with every key a server's answer may add."""
    settings = dataclasses.replace(settings, fail_on=())
    if settings.warmup_s or settings.cooldown_s:  # a window the sample's 60 ms can fill (its 2nd)
        settings = dataclasses.replace(settings, warmup_s=1e-9, cooldown_s=0.0)
    run = sample_run(settings, stored)
    report = build_report(settings, ReportOutput(save_result=True), run, date="19700101-000000")
    assert report.result is not None  # save_result is on
    zeros: defaultdict[str, Any] = defaultdict(float, per_position_acceptance_rates=[])
    return {**report.result, **decoding_keys(zeros, zeros)}


def sample_run(settings: Settings, stored: Mapping[str, Any]) -> RunRecords:
    """Two requests 10 ms apart, each answered with SAMPLE_EVENTS token events."""
    n = 2
    records = np.zeros(n, dtype=RECORD_DTYPE)
    records["index"] = np.arange(n)
    records["released_ns"] = np.arange(n) * 10_000_000
    records["sent_ns"] = records["released_ns"]
    records["end_ns"] = records["sent_ns"] + 50_000_000
    records["n_events"] = SAMPLE_EVENTS
    records["status"] = 200
    records["prompt_tokens"] = 8
    records["completion_tokens"] = SAMPLE_EVENTS
    records["success"] = True
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    event_ns = (records["sent_ns"][:, None] + 10_000_000 * (1 + np.arange(SAMPLE_EVENTS))).ravel()
    start = RunStart(
        loadgen_version="",
        command_line=[],
        config=dict(stored),
        model_id="model",
        tokenizer_id="model",
        num_requests=n,
        num_workers=1,
        connections=n,
        schedule_sha256="",
        t0_ns=0,
        t0_wall="1970-01-01T00:00:00",
        counters_before=None,
        environment=environment(""),
    )
    end = RunEnd(
        interrupted=False,
        worker_problems=[],
        worker_cpu_ns=[1_000_000],
        worker_wall_ns=[100_000_000],
        connection_stats=ConnectionStats(),
        loop_lag_ns=np.full(2, 100_000, dtype=np.int64),
        output_lens=np.full(n, SAMPLE_EVENTS, dtype=np.int64),
        counters_after=None,
        probe_latencies_s=[0.01] if settings.probes else None,
        host=_sample_host(),
    )
    return RunRecords(
        start=start,
        end=end,
        records=records,
        worker=np.zeros(n, dtype=np.int16),
        scheduled_ns=records["released_ns"].astype(np.int64),
        input_tokens=np.full(n, 8, dtype=np.int64),
        input_sequences=np.ones(n, dtype=np.int64),
        event_ns=event_ns.astype(np.int64),
        event_offsets=np.arange(n + 1, dtype=np.int64) * SAMPLE_EVENTS,
        errors={},
        texts={},
    )


def _sample_host() -> HostUsage:
    """A HostUsage of zeros (one worker's, no busiest process): a field added to HostUsage
    must be given here, which the type checker says."""
    return HostUsage(
        cpus=0,
        wall_s=0.0,
        loadgen_pct=0.0,
        started_pct=0.0,
        other_pct=0.0,
        steal_pct=0.0,
        idle_pct=0.0,
        busiest_name="",
        busiest_pid=0,
        busiest_pct=0.0,
        busiest_started=False,
        worker_demand_pct=[0.0],
        worker_wait_pct=[0.0],
        worker_peak_demand_pct=[0.0],
        worker_peak_cpu_pct=[0.0],
    )
