"""The server's prefix-cache hits over a run (loadgen/report/prefix_cache.py): from the answers'
cached tokens, else from vLLM's /metrics counters, else none; without sockets."""

from __future__ import annotations

import numpy as np

from loadgen.mock.personalities.base import Personality
from loadgen.report.prefix_cache import PrefixCacheHits, counters, prefix_cache_hits


def page(queried: int, hits: int) -> str:
    """A /metrics page with vLLM's counters, as the mock (and vLLM) writes them."""
    lines = Personality().prefix_cache_lines("m", queried, hits)
    return "\n".join(["# TYPE vllm:num_requests_running gauge", "vllm:num_requests_running 0",
                      *lines]) + "\n"  # fmt: skip


def test_the_counters_are_read_from_vllms_page() -> None:
    assert counters(page(1200, 300)) == (1200, 300)
    assert counters("not prometheus {{{") is None


def test_no_counters_is_none_not_zero() -> None:
    llamacpp = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 5\n"
    assert counters(llamacpp) is None


def test_the_run_counts_the_difference_of_the_pages() -> None:
    none = np.full(3, -1)
    hits = prefix_cache_hits(none, np.array([10, 10, 10]), page(1000, 100), page(1600, 400))
    assert hits == PrefixCacheHits(300, 600, "/metrics")
    assert hits.hit_rate == 50.0
    assert hits.to_json() == {
        "hit_rate": 50.0, "hit_tokens": 300, "queried_tokens": 600, "source": "/metrics"
    }  # fmt: skip


def test_the_answers_count_first() -> None:
    cached = np.array([64, -1, 0, 32])  # the second answered without the figure
    prompts = np.array([64, 50, 64, 64])
    hits = prefix_cache_hits(cached, prompts, page(0, 0), page(999, 999))
    assert hits == PrefixCacheHits(96, 192, "responses")


def test_neither_source_is_none() -> None:
    none = np.full(2, -1)
    assert prefix_cache_hits(none, np.array([5, 5]), None, None) is None
    plain = "# TYPE x counter\nx_total 1\n"
    assert prefix_cache_hits(none, np.array([5, 5]), plain, plain) is None
    assert PrefixCacheHits(0, 0, "responses").hit_rate == 0.0
