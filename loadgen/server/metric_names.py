"""A Prometheus text page -> the samples loadgen keeps, known names mapped to common ones.

Pure functions of a page's text (``scraper`` fetches the pages). The page is parsed with
prometheus_client's parser (``text_string_to_metric_families``); a page it refuses is
``PageError``. Each sample kept is ``(name, labels, value)``:

- a known gauge or counter of vLLM, SGLang, llama.cpp (``--metrics``), TGI or an NVIDIA DCGM
  exporter is named by its common name (``COMMON_NAMES``; docs/servers.md has the table), its
  labels kept (a DCGM series keeps only ``gpu``);
- every other sample keeps its own name and labels, except histogram buckets and the
  ``_created`` timestamps prometheus_client's servers add (the ``_sum`` and ``_count`` stay;
  any sample named ``*_bucket`` or ``*_created`` is left out before the page is parsed, and so
  are the ``# HELP`` lines);
- at most ``max_series`` samples per page (the common ones first); ``dropped`` says how many
  were left out.

Counters are kept as they are (totals since the server started): a rate is the difference of
two samples over their interval, a job for whoever draws them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# The exporter's sample name -> loadgen's common name. Units: requests, tokens, a fraction
# (0-1) for the KV cache and the hit rate, GPU % / W / MiB / degrees C.
COMMON_NAMES: dict[str, str] = {
    # vLLM (vllm/v1/metrics/loggers.py; gpu_* are V0's names)
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:gpu_prefix_cache_hit_rate": "prefix_cache_hit_rate",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:num_preemptions_total": "preemptions",
    # SGLang (python/sglang/srt/metrics/collector.py)
    "sglang:num_running_reqs": "requests_running",
    "sglang:num_queue_reqs": "requests_waiting",
    "sglang:token_usage": "kv_cache_usage",
    "sglang:cache_hit_rate": "prefix_cache_hit_rate",
    "sglang:cached_tokens_total": "prefix_cache_hits",  # of its prompt tokens: no queries
    "sglang:num_retracted_requests_total": "preemptions",  # SGLang retracts, vLLM preempts
    "sglang:prompt_tokens_total": "prompt_tokens",
    "sglang:generation_tokens_total": "generation_tokens",
    # llama.cpp's llama-server --metrics (tools/server/server-task.cpp, to_metrics; measured on
    # 0.5.0-dev 0c1e570: kv_cache_usage_ratio is older builds' only)
    "llamacpp:requests_processing": "requests_running",
    "llamacpp:requests_deferred": "requests_waiting",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:prompt_tokens_cached_total": "prefix_cache_hits",
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:tokens_predicted_total": "generation_tokens",
    # TGI (router/src/...): its token totals are histograms' sums, counted as requests end
    "tgi_batch_current_size": "requests_running",
    "tgi_queue_size": "requests_waiting",
    "tgi_request_input_length_sum": "prompt_tokens",
    "tgi_request_generated_tokens_sum": "generation_tokens",
    # NVIDIA DCGM exporter (default counters), one series per GPU
    "DCGM_FI_DEV_GPU_UTIL": "gpu_utilization_pct",
    "DCGM_FI_DEV_POWER_USAGE": "gpu_power_w",
    "DCGM_FI_DEV_FB_USED": "gpu_memory_used_mib",
    "DCGM_FI_DEV_GPU_TEMP": "gpu_temperature_c",
}
DCGM_PREFIX = "DCGM_FI_"
DCGM_LABELS = ("gpu",)  # the rest (UUID, Hostname, modelName...) does not change in a run
MAX_SERIES = 500  # per page: a page with more keeps the first (common names first)

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs


class PageError(ValueError):
    """A page prometheus_client's parser refuses (not Prometheus text)."""


@dataclass(frozen=True)
class Page:
    """The samples kept from one page, and how many more it had beyond ``max_series``."""

    samples: dict[tuple[str, Labels], float]  # (name, labels) -> value
    dropped: int


def parse_page(text: str, max_series: int = MAX_SERIES) -> Page:
    """The samples of a Prometheus text page, known names mapped (module docstring);
    PageError when the parser refuses it or it holds no sample."""
    common: dict[tuple[str, Labels], float] = {}
    other: dict[tuple[str, Labels], float] = {}
    try:
        for family in text_string_to_metric_families(_unparsed_left_out(text)):
            for sample in family.samples:
                name = sample.name
                value = float(sample.value)
                if math.isnan(value):
                    continue
                if (mapped := COMMON_NAMES.get(name)) is not None:
                    common[(mapped, _labels(name, sample.labels))] = value
                else:
                    other[(name, _labels(name, sample.labels))] = value
    except Exception as exc:  # the parser raises ValueError, IndexError, TypeError...
        raise PageError(f"not Prometheus text ({type(exc).__name__}: {exc})"[:200]) from None
    if not common and not other:
        raise PageError("no metric in the page")
    samples = dict(list(common.items())[:max_series])
    room = max_series - len(samples)
    samples.update(list(other.items())[: max(room, 0)])
    return Page(samples, len(common) + len(other) - len(samples))


def _unparsed_left_out(text: str) -> str:
    """The page less what is not kept: its ``_bucket`` and ``_created`` sample lines (two
    thirds of a vLLM page; the parser costs about 10 us a line) and its ``# HELP`` lines (the
    parser reads their text a character at a time: a quarter of the rest's cost)."""
    kept = []
    for line in text.split("\n"):
        if line.startswith("#"):
            if line.startswith("# HELP"):
                continue
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name.endswith(("_bucket", "_created")):
                continue
        kept.append(line)
    return "\n".join(kept)


def _labels(name: str, labels: dict[str, str]) -> Labels:
    """A sample's labels as sorted pairs (a DCGM series keeps only its GPU's)."""
    if name.startswith(DCGM_PREFIX):
        return tuple((k, labels[k]) for k in DCGM_LABELS if k in labels)
    return tuple(sorted(labels.items()))
