"""``--probe-request-rate``: single-token probes sent one after another alongside the run.

As upstream's ``probe_loop``: a probe is the run's first request with the prompt ``"Hi"`` and
one output token, outside ``--max-concurrency``; after each answer the loop sleeps
``1 / rate`` seconds. The E2EL of the probes shows how much the main load delays an unrelated
small request. The coordinator sends them from its own event loop and stamps them as the
workers stamp theirs: an answer's token events on arrival, before any JSON parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

import aiohttp
import numpy as np

from workers.pooling import PooledAnswer
from workers.sse import SSEStream

PROBE_PROMPT = "Hi"


@dataclass
class ProbeResults:
    """What the probes measured: the E2EL of each successful one, and how many failed."""

    latencies_s: list[float] = field(default_factory=list)
    failures: int = 0


class ProbeLoop:
    """``run_probes`` as a task started at t0 and stopped when the run's requests are done."""

    def __init__(self, **probe_args: Any) -> None:
        self.probe_args = probe_args
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[ProbeResults] | None = None

    def start(self) -> None:
        """Start probing (call in the running loop)."""
        self.task = asyncio.create_task(run_probes(stop=self.stop_event, **self.probe_args))

    async def stop(self) -> ProbeResults:
        """Stop once the probe in flight is answered; what the probes measured."""
        self.stop_event.set()
        return await self.task if self.task is not None else ProbeResults()


async def run_probes(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    interval_s: float,
    stop: asyncio.Event,
    response_form: str,
    proxy: str | None = None,
    chat: bool = False,
) -> ProbeResults:
    """Send probes one at a time until ``stop`` is set, ``interval_s`` apart."""
    results = ProbeResults()
    while not stop.is_set():
        latency_s = await _probe(session, url, body, headers, response_form, proxy, chat)
        if latency_s is None:
            results.failures += 1
        else:
            results.latencies_s.append(latency_s)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
    return results


async def _probe(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    response_form: str,
    proxy: str | None,
    chat: bool,
) -> float | None:
    """One probe's E2EL in seconds (send to its last token event), or None if it failed."""
    answer = SSEStream(chat) if response_form == "sse" else PooledAnswer()
    sent_ns = perf_counter_ns()
    try:
        async with session.post(url, data=body, headers=headers, proxy=proxy) as response:
            if response.status != 200:
                await response.read()
                return None
            if isinstance(answer, SSEStream):
                while data := await response.content.readany():
                    answer.feed(data, perf_counter_ns())
                answer.finish(perf_counter_ns())
            else:
                payload = await response.read()
                answer.read(response_form, payload, response.headers, perf_counter_ns())
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None
    if not answer.event_ns:  # as a worker judges it: a 200 with a token event succeeded
        return None
    return (answer.event_ns[-1] - sent_ns) / 1e9


def probe_stats(results: ProbeResults) -> dict[str, Any] | None:
    """Upstream's probe keys over the successful probes; None when none succeeded."""
    if not results.latencies_s:
        return None
    latencies = np.asarray(results.latencies_s)
    return {
        "probe_completed": len(latencies),
        "probe_failed": results.failures,
        "probe_median_e2el_ms": float(np.median(latencies)) * 1000,
        "probe_p99_e2el_ms": float(np.percentile(latencies, 99)) * 1000,
        "probe_max_e2el_ms": float(latencies.max()) * 1000,
    }


def probe_lines(stats: dict[str, Any]) -> list[str]:
    """Upstream's "Probe Requests" block of the summary."""
    return [
        "{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"),
        "{:<40} {:<10}".format("Probe requests completed:", stats["probe_completed"]),
        "{:<40} {:<10}".format("Probe requests failed:", stats["probe_failed"]),
        "{:<40} {:<10.2f}".format("Median probe E2EL (ms):", stats["probe_median_e2el_ms"]),
        "{:<40} {:<10.2f}".format("P99 probe E2EL (ms):", stats["probe_p99_e2el_ms"]),
        "{:<40} {:<10.2f}".format("Max probe E2EL (ms):", stats["probe_max_e2el_ms"]),
    ]
