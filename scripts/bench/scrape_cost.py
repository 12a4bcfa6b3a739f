"""Scrape cost: the coordinator's CPU per scrape of a vLLM-sized /metrics page.

A page shaped as a vLLM V1 server's (its gauges and counters, and its histograms with their
buckets, for ``--engines`` engines) is served by ``python -m http.server`` in its own process,
and this process scrapes it ``--scrapes`` times the way a run does
(``loadgen.server.scraper.Scraper.scrape_once``: GET, parse in a thread, keep the samples).
Printed: the page's size and samples, the series kept, and CPU per scrape of this process
(every thread), split into the parse alone (``parse_page``) and the whole scrape.

    python scripts/bench/scrape_cost.py
    python scripts/bench/scrape_cost.py --engines 8 --scrapes 200

What scraping costs the client's requests/s is measured beside the workers, in the same run:
``python scripts/bench/client_ceiling.py --scrape-cost`` (loadgen with and without
``--telemetry-url`` on this page, scraped every 0.1 s, ten times the default rate).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import stop_process

from loadgen.server.client import ServerClient
from loadgen.server.metric_names import parse_page
from loadgen.server.scraper import Scraper

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# vLLM V1's histograms (vllm/v1/metrics/loggers.py) and about how many buckets each has.
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": 19,
    "vllm:inter_token_latency_seconds": 19,
    "vllm:e2e_request_latency_seconds": 17,
    "vllm:request_queue_time_seconds": 17,
    "vllm:request_inference_time_seconds": 17,
    "vllm:request_prefill_time_seconds": 17,
    "vllm:request_decode_time_seconds": 17,
    "vllm:request_prompt_tokens": 13,
    "vllm:request_generation_tokens": 13,
    "vllm:request_params_max_tokens": 13,
    "vllm:request_params_n": 6,
    "vllm:iteration_tokens_total": 18,
    "vllm:request_max_num_generation_tokens": 13,
    "vllm:time_per_output_token_seconds": 19,
}
GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
COUNTERS = (
    "prompt_tokens",
    "generation_tokens",
    "num_preemptions",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "request_success",
)


def vllm_page(engines: int = 1) -> str:
    """A Prometheus page with a vLLM V1 server's metric names, types and labels."""
    lines = []
    for engine in range(engines):
        labels = f'engine="{engine}",model_name="{MODEL}"'
        for name in GAUGES:
            lines += [f"# HELP vllm:{name} A gauge.", f"# TYPE vllm:{name} gauge"]
            lines.append(f"vllm:{name}{{{labels}}} {engine + 3.0}")
        for name in COUNTERS:
            lines += [f"# HELP vllm:{name}_total A counter.", f"# TYPE vllm:{name}_total counter"]
            lines.append(f"vllm:{name}_total{{{labels}}} {123456.0 * (engine + 1)}")
            lines.append(f"vllm:{name}_created{{{labels}}} 1.7649e+09")
        for name, buckets in HISTOGRAMS.items():
            lines += [f"# HELP {name} A histogram.", f"# TYPE {name} histogram"]
            for i in range(buckets):
                lines.append(f'{name}_bucket{{{labels},le="{0.001 * 2**i:g}"}} {10.0 * i}')
            lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {10.0 * buckets}')
            lines.append(f"{name}_count{{{labels}}} {10.0 * buckets}")
            lines.append(f"{name}_sum{{{labels}}} 1234.5")
            lines.append(f"{name}_created{{{labels}}} 1.7649e+09")
    return "\n".join(lines) + "\n"


async def scrape_cpu_s(url: str, scrapes: int) -> list[float]:
    """CPU seconds of this process (all threads) for each of ``scrapes`` scrapes of ``url``."""
    client = ServerClient(url, {})
    scraper = Scraper(client, url, interval_s=5.0, sink=None)
    costs = []
    try:
        for _ in range(scrapes):
            before = time.process_time()
            problem = await scraper.scrape_once(time.perf_counter_ns())
            costs.append(time.process_time() - before)
            if problem:
                raise SystemExit(f"scrape failed: {problem}")
    finally:
        await client.close()
    return costs


def main() -> None:
    """Serve the page, scrape it, print the costs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=1, help="vLLM engines on the page")
    parser.add_argument("--scrapes", type=int, default=100)
    args = parser.parse_args()
    page = vllm_page(args.engines)
    with tempfile.TemporaryDirectory(prefix="scrape-cost-") as tmp:
        (Path(tmp) / "metrics").write_text(page)
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "-d", tmp],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # its line per request
            text=True,
        )
        try:
            assert server.stdout is not None
            banner = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
            port = int(banner.split(" port ")[1].split()[0])
            url = f"http://127.0.0.1:{port}/metrics"
            parse = []
            for _ in range(args.scrapes):
                before = time.process_time()
                kept = parse_page(page)
                parse.append(time.process_time() - before)
            whole = asyncio.run(scrape_cpu_s(url, args.scrapes))
        finally:
            stop_process(server)
    samples = sum(1 for line in page.splitlines() if line and not line.startswith("#"))
    print(
        f"page: {len(page) / 1024:.0f} KiB, {samples} samples, {args.engines} engine(s); "
        f"kept {len(kept.samples)} series (buckets and _created left out), {kept.dropped} over "
        "the cap"
    )
    for name, costs in (("parse_page", parse), ("whole scrape", whole)):
        print(
            f"{name}: CPU per scrape median {1000 * statistics.median(costs):.2f} ms, "
            f"p90 {1000 * statistics.quantiles(costs, n=10)[-1]:.2f} ms ({args.scrapes} scrapes)"
        )
    print(
        f"at the default 1 s interval: {100 * statistics.median(whole):.2f} % of one core of the "
        "coordinator"
    )


if __name__ == "__main__":
    main()
