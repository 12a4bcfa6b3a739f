"""The server's prefix-cache hits over a run, as the server reports them.

Two sources, the first that has figures wins:

- **responses**: each answer's ``usage.prompt_tokens_details.cached_tokens`` (vLLM with
  ``--enable-prompt-tokens-details``, SGLang with ``--enable-cache-report``, llama.cpp) or
  llama.cpp's ``timings.cache_n``, read by the workers into the records' ``cached_tokens``;
  hit rate = sum of cached tokens / sum of prompt tokens, over the answers that reported one;
- **/metrics**: vLLM's ``vllm:prefix_cache_hits_total`` and ``vllm:prefix_cache_queries_total``
  counters (tokens), read before and after the timed run; hit rate = hits / queries over the
  run (the counters count every client of the server, not only this run's requests).

A server that reports neither (TGI; vLLM without either) has no figure: None, never 0.
Pure functions of the records and the two /metrics pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

QUERIES = "vllm:prefix_cache_queries"
HITS = "vllm:prefix_cache_hits"


@dataclass(frozen=True)
class PrefixCacheHits:
    """Prompt tokens the server found in its prefix cache over the run, of those looked up."""

    hit_tokens: int
    queried_tokens: int
    source: str  # "responses" or "/metrics"

    @property
    def hit_rate(self) -> float:
        """Hit tokens as a percentage of the tokens looked up (0 when none were)."""
        return 100.0 * self.hit_tokens / self.queried_tokens if self.queried_tokens else 0.0

    def to_json(self) -> dict[str, Any]:
        """The result JSON's ``loadgen.prefix_cache``."""
        return {
            "hit_rate": self.hit_rate,
            "hit_tokens": self.hit_tokens,
            "queried_tokens": self.queried_tokens,
            "source": self.source,
        }


def prefix_cache_hits(
    cached_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    before: str | None,
    after: str | None,
) -> PrefixCacheHits | None:
    """The run's hits from its answers (``cached_tokens`` -1 where an answer reported none;
    ``prompt_tokens`` each request's prompt length), else from the /metrics pages; None when
    neither has them."""
    reported = cached_tokens >= 0
    if reported.any():
        return PrefixCacheHits(
            int(cached_tokens[reported].sum()), int(prompt_tokens[reported].sum()), "responses"
        )
    if before is None or after is None:
        return None
    start, end = counters(before), counters(after)
    if start is None or end is None:
        return None
    return PrefixCacheHits(end[1] - start[1], end[0] - start[0], "/metrics")


def counters(page: str) -> tuple[int, int] | None:
    """vLLM's prefix-cache queries and hits (tokens, summed over label sets) in a /metrics
    page; None when it has none (or is not Prometheus text)."""
    totals = {QUERIES: 0.0, HITS: 0.0}
    found = False
    try:
        for family in text_string_to_metric_families(page):
            for sample in family.samples:
                name = sample.name.removesuffix("_total")
                if name in totals and sample.name.endswith("_total"):
                    totals[name] += sample.value
                    found = True
    except ValueError:
        return None
    return (int(totals[QUERIES]), int(totals[HITS])) if found else None
