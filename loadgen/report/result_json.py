"""The result JSON, a renderer of ``RunSummary``: upstream's keys, order and types (its metric
keys from the metric table), its file name, and how it is written.

loadgen's own figures go under the one top-level key ``"loadgen"``, last, so consumers of
upstream's JSON are undisturbed.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from loadgen.report.decoding import result_keys as decoding_keys
from loadgen.report.failures import most_frequent
from loadgen.report.metric_table import JSON, LOADGEN_JSON, figures_in
from loadgen.report.metrics import MetricStats
from loadgen.report.report_output import ReportOutput
from loadgen.report.run_summary import RunSummary, Settings
from loadgen.report.stats import SampleStats
from loadgen.report.steady_views import steady_json, time_bound_json
from loadgen.report.summary import percentile_word
from loadgen.terminal import printable

# Fields upstream drops from the JSON unless --save-detailed.
DETAILED_FIELDS = (
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
    "server_queue_times",
    "server_ttfts",
)


def stats_json(stats: MetricStats) -> dict[str, float]:
    """One metric's statistics as JSON keys in upstream's style: mean_ms, median_ms, p99_ms..."""
    out = {"mean_ms": stats.mean_ms, "median_ms": stats.median_ms, "std_ms": stats.std_ms}
    for p, value in stats.percentiles_ms:
        out[f"p{percentile_word(p)}_ms"] = value
    return out


def result_json(summary: RunSummary, date: str) -> dict[str, Any]:
    """The result JSON object of a run, keys in upstream's order (the per-request lists only
    with --save-detailed); loadgen's own figures under ``"loadgen"``, last. ``date`` stamps it
    (upstream's ``%Y%m%d-%H%M%S``)."""
    settings, identity = summary.settings, summary.identity
    result: dict[str, Any] = {
        "date": date,
        "endpoint_type": settings.backend,
        "backend": settings.backend,
        "label": settings.label,
        "model_id": identity.model_id,
        "tokenizer_id": identity.tokenizer_id,
        "num_prompts": settings.num_prompts,
        **(settings.metadata or {}),
        "request_rate": settings.request_rate if not math.isinf(settings.request_rate) else "inf",
        "burstiness": settings.burstiness,
        "max_concurrency": settings.max_concurrency,
        **_ramp_up_keys(settings),
    }
    figures = figures_in(JSON, settings.pooling)
    result |= {f.key: getattr(summary.totals, f.key) for f in figures if not f.after_detail}
    result |= _per_request(summary, detailed=settings.save_detailed)
    result |= {f.key: getattr(summary.totals, f.key) for f in figures if f.after_detail}
    requests = summary.requests
    result |= server_metric_keys(requests.server_queue_s, requests.server_ttft_s)
    if summary.probes is not None:
        result |= summary.probes
    if summary.rps_change_events:
        result["rps_change_events"] = summary.rps_change_events
    result |= decoding_keys(summary.decoding.spec_decode, summary.decoding.diffusion)
    for name, stats in summary.latencies.items():
        result[f"mean_{name}_ms"] = stats.mean_ms
        result[f"median_{name}_ms"] = stats.median_ms
        result[f"std_{name}_ms"] = stats.std_ms
        for p, value in stats.percentiles_ms:
            result[f"p{percentile_word(p)}_{name}_ms"] = value
    result["loadgen"] = loadgen_keys(summary)
    if not settings.save_detailed:
        for key in DETAILED_FIELDS:
            result.pop(key, None)
    return result


def _per_request(summary: RunSummary, detailed: bool) -> dict[str, Any]:
    """Upstream's per-request lists, in its order (a pooling run's are fewer); ``itls``, one
    value per token event, only when ``detailed`` keeps it (else the events are not read)."""
    results, timings = summary.requests.results, summary.requests.timings
    errors = summary.errors.per_request
    if summary.settings.pooling:
        return {
            "input_lens": results.prompt_lens.tolist(),
            "latencies": timings.latency_s.tolist(),
            "queue_times": timings.queue_s.tolist(),
            "errors": errors,
        }
    return {
        "input_lens": results.prompt_lens.tolist(),
        "output_lens": results.output_lens.tolist(),
        "ttfts": timings.ttft_s.tolist(),
        "itls": [gaps.tolist() for gaps in timings.itl_lists()] if detailed else [],
        "latencies": timings.latency_s.tolist(),
        "start_times": (results.sent_s + summary.identity.t0_s).tolist(),
        "queue_times": timings.queue_s.tolist(),
        "generated_texts": summary.requests.generated_texts,
        "errors": errors,
    }


def loadgen_keys(summary: RunSummary) -> dict[str, Any]:
    """loadgen's own figures, the result's last key: the run's identity, its connections, the
    client's health and context, and the verdict last."""
    connections = summary.connections
    stats = connections.stats
    identity = summary.identity
    return {
        "version": identity.loadgen_version,
        "workers": identity.num_workers,
        "connections_preopened": stats.preopened_at_t0,
        "connections_closed_before_use": stats.closed_before_use,
        "resent_on_stale_connection": stats.resent,
        "truncated_streams": connections.truncated_streams,
        "text_capped": connections.text_capped,
        "connection_reuse_stopped": stats.reuse_stopped,
        "schedule_sha256": identity.schedule_sha256,
        "seed": summary.settings.seed,  # a campaign's run: derived from --seed (--same-prompts)
        "send_lag_ms": p50_p99_max(summary.client.send_lag_ms),
        "from_intended": (  # None unless the run was paced
            None
            if summary.intended is None
            else {k: stats_json(v) for k, v in summary.intended.items()}
        ),
        "new_connections_during_run": {
            "count": connections.new_during_run.count,
            "connect_ms": p50_p99_max(connections.new_during_run),
        },
        "worker_problems": summary.ending.worker_problems,
        "hosts": summary.ending.hosts,
        "multi_turn": summary.multi_turn,  # None unless --multi-turn
        "time_bound": time_bound_json(summary.time_bound),  # None unless --duration
        "steady_window": steady_json(summary.steady),  # None unless --warmup-s, --cooldown-s
        "prefix_cache": None if summary.prefix_cache is None else summary.prefix_cache.to_json(),
        # the server's figures from its /metrics during the run (None where not exported)
        "server": {
            f.key: getattr(summary.totals, f.key)
            for f in figures_in(LOADGEN_JSON, summary.settings.pooling)
        },
        "interrupted": summary.ending.interrupted,
        "errors": errors_json(summary),
        "client": summary.client.health.to_json(),
        **identity.context,
        "verdict": summary.client.verdict,  # last, so the result JSON ends with it
    }


def errors_json(summary: RunSummary) -> dict[str, Any]:
    """The requests that did not complete (loadgen/report/failures.py): upstream's ``failed``
    again, the cancelled and the not sent apart, and the failed by kind, most frequent first."""
    totals = summary.totals
    return {
        "failed": totals.failed,
        "cancelled": totals.cancelled,
        "not_sent": totals.not_sent,
        "by_kind": dict(most_frequent(summary.errors.by_kind)),
    }


def p50_p99_max(stats: SampleStats) -> dict[str, float]:
    """p50, p99 and max of a sample's statistics as JSON keys (zeros when it is empty)."""
    return {"p50": stats.at(50), "p99": stats.at(99), "max": stats.max}


def server_metric_keys(queue_s: np.ndarray, ttft_s: np.ndarray) -> dict[str, Any]:
    """Upstream's ``server_queue_times`` and ``server_ttfts`` (seconds, None where a request
    had no value), when any request had either; nothing otherwise."""
    if np.isnan(queue_s).all() and np.isnan(ttft_s).all():
        return {}
    return {
        "server_queue_times": [None if math.isnan(v) else v for v in queue_s.tolist()],
        "server_ttfts": [None if math.isnan(v) else v for v in ttft_s.tolist()],
    }


def _ramp_up_keys(settings: Settings) -> dict[str, Any]:
    if settings.ramp_up_strategy is None:
        return {}
    return {
        "ramp_up_strategy": settings.ramp_up_strategy,
        "ramp_up_start_rps": settings.ramp_up_start_rps,
        "ramp_up_end_rps": settings.ramp_up_end_rps,
    }


def result_path(settings: Settings, output: ReportOutput, model_id: str, date: str) -> str:
    """Upstream's file name: {label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json,
    or {label}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{N}]-... with ramp-up;
    --result-filename instead, in --result-dir."""
    cap = settings.max_concurrency
    concurrency = f"-concurrency{cap}" if cap is not None else ""
    model = printable(model_id.split("/")[-1])  # a server's model id: no control characters
    if settings.ramp_up_strategy is not None:
        rates = (
            f"ramp-up-{settings.ramp_up_strategy}-"
            f"{settings.ramp_up_start_rps}qps-{settings.ramp_up_end_rps}qps"
        )
    else:
        rates = f"{settings.request_rate}qps"
    name = f"{settings.label or settings.backend}-{rates}{concurrency}-{model}-{date}.json"
    if output.result_filename:
        name = output.result_filename
    if output.result_dir:
        name = os.path.join(output.result_dir, name)
    return name


def write_result(path: str, result: dict[str, Any], append: bool = False) -> None:
    """Write the JSON as upstream does (plain json.dump: inf becomes Infinity, no indent); with
    ``append`` (--append-result), add it as one more whole line, newline-terminated, so the
    file is JSON Lines (a file whose last line lacks its newline, as upstream leaves it, gets
    one first). The file's directory (--result-dir) is created if need be."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if not append:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(result, out)
        return
    with open(path, "a+b") as out:
        if out.tell() > 0:
            out.seek(-1, os.SEEK_END)
            if out.read(1) != b"\n":
                out.write(b"\n")
        out.write(json.dumps(result).encode() + b"\n")
