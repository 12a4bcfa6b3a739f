"""Each personality's /metrics follows the load, under its server's names: requests running
(at most --max-running) and waiting behind that limit, the KV cache filling with the running
requests' tokens and emptying after, the prefix cache's hits when prompts repeat; and
loadgen's scraper (metric_names.parse_page) maps those names to the common ones. The mock in
this process (aiohttp's test server on 127.0.0.1), scraped while streams run."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from loadgen.mock.app import build_app
from loadgen.mock.config import MockConfig
from loadgen.server.metric_names import parse_page

MAX_RUNNING = 2
REQUESTS = 6
PROMPT = "the same long prompt, repeated so that its blocks are cached " * 4

# Each personality's own names: running, waiting, KV-cache usage (None: the server exports
# none), prefix-cache hits (None: none), preemptions (None: none).
NAMES: dict[str, tuple[str, str, str | None, str | None, str | None]] = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting",
             "vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total",
             "vllm:num_preemptions_total"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
               "sglang:cached_tokens_total", "sglang:num_retracted_requests_total"),
    "llamacpp": ("llamacpp:requests_processing", "llamacpp:requests_deferred", None, None, None),
    "tgi": ("tgi_batch_current_size", "tgi_queue_size", None, None, None),
}  # fmt: skip
# What the scraper names them (loadgen/server/metric_names.py), in the same order.
COMMON = (
    "requests_running", "requests_waiting", "kv_cache_usage", "prefix_cache_hits", "preemptions",
)  # fmt: skip


def samples(page: str) -> dict[str, float]:
    """The page's samples by name (label sets summed), as prometheus_client parses it."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def common(page: str) -> dict[str, float]:
    """The page's samples as loadgen's scraper keeps them, by common name (labels summed)."""
    out: dict[str, float] = {}
    for (name, _), value in parse_page(page).samples.items():
        out[name] = out.get(name, 0.0) + value
    return out


async def load_and_scrape(personality: str) -> tuple[list[str], str]:
    """REQUESTS streams of the same prompt at once against --max-running 2; the /metrics
    pages scraped while they ran, and the page once they all ended."""
    config = MockConfig(
        personality=personality, max_running=MAX_RUNNING, ttft_ms=20, itl_ms=20, output_len=8,
        prefill_us_per_token=1, kv_cache_tokens=4096,
    )  # fmt: skip
    server = TestServer(build_app(config), host="127.0.0.1")
    await server.start_server()
    base = f"http://127.0.0.1:{server.port}"
    body = {"model": config.model, "prompt": PROMPT, "max_tokens": 8, "stream": True}
    try:
        async with aiohttp.ClientSession() as session:

            async def generate() -> None:
                async with session.post(f"{base}/v1/completions", json=body) as answer:
                    assert answer.status == 200
                    await answer.read()

            async def scrape() -> str:
                async with session.get(f"{base}/metrics") as answer:
                    return await answer.text()

            await generate()  # the prompt's blocks are cached: the next ones hit
            streams = [asyncio.create_task(generate()) for _ in range(REQUESTS)]
            pages = []
            while not all(stream.done() for stream in streams):
                pages.append(await scrape())
                await asyncio.sleep(0.01)
            await asyncio.gather(*streams)
            return pages, await scrape()
    finally:
        await server.close()


@pytest.fixture(scope="module")
def scraped() -> dict[str, tuple[list[str], str]]:
    return {p: asyncio.run(load_and_scrape(p)) for p in NAMES}


@pytest.mark.parametrize("personality", NAMES)
def test_metrics_follow_the_load(scraped: dict[str, Any], personality: str) -> None:
    busy, after = scraped[personality]
    running, waiting, kv, hits, preempted = NAMES[personality]
    during = [samples(page) for page in busy]
    assert len(during) >= 3
    assert max(s[running] for s in during) == MAX_RUNNING  # never more than the limit
    assert max(s[waiting] for s in during) > 0  # the rest queued behind it
    assert all(s[running] + s[waiting] <= REQUESTS for s in during)
    end = samples(after)
    assert (end[running], end[waiting]) == (0, 0)
    if kv is not None:
        assert max(s[kv] for s in during) > 0
        assert all(0 <= s[kv] <= 1 for s in during)
        assert end[kv] == 0
    if hits is not None:  # 6 repeats of a prompt whose full blocks the first one cached
        assert end[hits] >= REQUESTS * 16
    if preempted is not None:
        assert end[preempted] == 0  # present, and the mock never preempts


@pytest.mark.parametrize("personality", NAMES)
def test_the_scraper_maps_each_personality_to_the_common_names(
    scraped: dict[str, Any], personality: str
) -> None:
    busy, after = scraped[personality]
    own = NAMES[personality]
    exported = {name for name, real in zip(COMMON, own, strict=True) if real is not None}
    end = common(after)
    assert exported | {"prompt_tokens", "generation_tokens"} <= set(end)
    assert not {name for name, real in zip(COMMON, own, strict=True) if real is None} & set(end)
    assert end["generation_tokens"] == (REQUESTS + 1) * 8
    peak = max(common(page)["requests_running"] for page in busy)
    assert peak == MAX_RUNNING
    if "kv_cache_usage" in exported:
        assert max(common(page)["kv_cache_usage"] for page in busy) > 0
