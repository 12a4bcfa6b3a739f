"""The result JSON: upstream's keys, order and types, its file name, and how it is written.

loadgen's own figures go under the one top-level key ``"loadgen"``, last, so consumers of
upstream's JSON are undisturbed.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from loadgen.config import RunConfig
from loadgen.report.decoding import result_keys as decoding_keys
from loadgen.report.metrics import (
    BenchmarkMetrics,
    MetricStats,
    PoolingMetrics,
    RequestResults,
    Timings,
)
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


def build_result(
    *,
    config: RunConfig,
    date: str,
    model_id: str,
    tokenizer_id: str | None,
    duration_s: float,
    metrics: BenchmarkMetrics | PoolingMetrics,
    results: RequestResults,
    timings: Timings,
    start_origin_s: float,
    errors: list[str],
    generated_texts: list[str],
    metric_names: list[str],
    loadgen_extra: dict[str, Any],
    rps_change_events: list[dict[str, Any]] | None = None,
    probe: dict[str, Any] | None = None,
    decoding: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None),
    server_metrics: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The result JSON object, keys in upstream's order (detailed fields included)."""
    result: dict[str, Any] = {
        "date": date,
        "endpoint_type": config.backend,
        "backend": config.backend,
        "label": config.label,
        "model_id": model_id,
        "tokenizer_id": tokenizer_id,
        "num_prompts": config.num_prompts,
        **(config.metadata or {}),
        "request_rate": config.request_rate if not math.isinf(config.request_rate) else "inf",
        "burstiness": config.burstiness,
        "max_concurrency": config.max_concurrency,
        **_ramp_up_keys(config),
        "duration": duration_s,
    }
    if isinstance(metrics, PoolingMetrics):
        result |= {  # upstream's pooling JSON has no "failed" key
            "completed": metrics.completed,
            "total_input_tokens": metrics.total_input,
            "total_input_sequences": metrics.total_input_sequences,
            "request_throughput": metrics.request_throughput,
            "input_sequence_throughput": metrics.input_sequence_throughput,
            "total_token_throughput": metrics.total_token_throughput,
            "input_lens": results.prompt_lens.tolist(),
            "latencies": timings.latency_s.tolist(),
            "queue_times": timings.queue_s.tolist(),
            "errors": errors,
        }
    else:
        result |= {
            "completed": metrics.completed,
            "failed": metrics.failed,
            "total_input_tokens": metrics.total_input,
            "total_output_tokens": metrics.total_output,
            "request_throughput": metrics.request_throughput,
            "request_goodput": metrics.request_goodput if config.goodput else None,
            "output_throughput": metrics.output_throughput,
            "total_token_throughput": metrics.total_token_throughput,
            "input_lens": results.prompt_lens.tolist(),
            "output_lens": results.output_lens.tolist(),
            "ttfts": timings.ttft_s.tolist(),
            "itls": [timings.itls_of(i).tolist() for i in range(results.num_requests)],
            "latencies": timings.latency_s.tolist(),
            "start_times": (results.send_s + start_origin_s).tolist(),
            "queue_times": timings.queue_s.tolist(),
            "generated_texts": generated_texts,
            "errors": errors,
            "max_output_tokens_per_s": metrics.max_output_tokens_per_s,
            "max_concurrent_requests": metrics.max_concurrent_requests,
            "rtfx": metrics.rtfx,
        }
    if server_metrics is not None:
        result |= server_metric_keys(*server_metrics)
    if probe is not None:
        result |= probe
    if rps_change_events:
        result["rps_change_events"] = rps_change_events
    result |= decoding_keys(*decoding)
    for name in metric_names:
        stats = metrics.stats[name]
        result[f"mean_{name}_ms"] = stats.mean_ms
        result[f"median_{name}_ms"] = stats.median_ms
        result[f"std_{name}_ms"] = stats.std_ms
        for p, value in stats.percentiles_ms:
            result[f"p{percentile_word(p)}_{name}_ms"] = value
    result["loadgen"] = loadgen_extra
    if not config.save_detailed:
        for key in DETAILED_FIELDS:
            result.pop(key, None)
    return result


def server_metric_keys(queue_s: np.ndarray, ttft_s: np.ndarray) -> dict[str, Any]:
    """Upstream's ``server_queue_times`` and ``server_ttfts`` (seconds, None where a request
    had no value), when any request had either; nothing otherwise."""
    if np.isnan(queue_s).all() and np.isnan(ttft_s).all():
        return {}
    return {
        "server_queue_times": [None if math.isnan(v) else v for v in queue_s.tolist()],
        "server_ttfts": [None if math.isnan(v) else v for v in ttft_s.tolist()],
    }


def _ramp_up_keys(config: RunConfig) -> dict[str, Any]:
    if config.ramp_up_strategy is None:
        return {}
    return {
        "ramp_up_strategy": config.ramp_up_strategy,
        "ramp_up_start_rps": config.ramp_up_start_rps,
        "ramp_up_end_rps": config.ramp_up_end_rps,
    }


def result_path(config: RunConfig, model_id: str, date: str) -> str:
    """Upstream's file name: {label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json,
    or {label}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{N}]-... with ramp-up."""
    concurrency = (
        f"-concurrency{config.max_concurrency}" if config.max_concurrency is not None else ""
    )
    model = printable(model_id.split("/")[-1])  # a server's model id: no control characters
    if config.ramp_up_strategy is not None:
        rates = (
            f"ramp-up-{config.ramp_up_strategy}-"
            f"{config.ramp_up_start_rps}qps-{config.ramp_up_end_rps}qps"
        )
    else:
        rates = f"{float(config.request_rate)}qps"
    name = f"{config.label or config.backend}-{rates}{concurrency}-{model}-{date}.json"
    if config.result_filename:
        name = config.result_filename
    if config.result_dir:
        name = os.path.join(config.result_dir, name)
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
