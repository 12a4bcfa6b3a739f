"""``--probe-request-rate``: single-token probes sent one after another alongside the run.

As upstream's ``probe_loop``: a probe is the run's first request with the prompt ``"Hi"`` and
one output token, outside ``--max-concurrency``; after each answer the loop sleeps
``1 / rate`` seconds. The E2EL of the probes shows how much the main load delays an unrelated
small request. The coordinator sends them through its one client (``ServerClient.send``) from
its own event loop, and they are stamped as the workers stamp theirs: an answer's token events
on arrival, before any JSON parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from loadgen.backends import BACKENDS
from loadgen.payloads import serialize_bodies
from loadgen.report.probes import ProbeResults
from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError
from workers.pooling import PooledAnswer
from workers.sse import EventTooLarge, SSEStream

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from loadgen.config import RunConfig

PROBE_PROMPT = "Hi"
# A hung probe fails after this long rather than hold the end of the run: stopping waits for it.
PROBE_TIMEOUT_S = 300.0


class ProbeLoop:
    """``run_probes`` as a task started at t0 and stopped when the run's requests are done."""

    def __init__(self, **probe_args: Any) -> None:
        self.probe_args = probe_args
        self.stop_event = asyncio.Event()
        self.results = ProbeResults()
        self.task: asyncio.Task[ProbeResults] | None = None

    def start(self) -> None:
        """Start probing (call in the running loop)."""
        self.task = asyncio.create_task(
            run_probes(stop=self.stop_event, results=self.results, **self.probe_args)
        )

    async def stop(self, interrupted: bool = False) -> ProbeResults:
        """Stop once the probe in flight is answered, or at once when the run was interrupted
        (a hung server never answers); what the probes measured."""
        self.stop_event.set()
        if self.task is None:
            return self.results
        if interrupted:
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        return self.results


def probe_loop(
    config: RunConfig, client: ServerClient, model_name: str, response_form: str
) -> ProbeLoop | None:
    """--probe-request-rate's probe loop on the coordinator's client, if asked for."""
    if config.probe_request_rate <= 0:
        return None
    log.info(f"Probe request rate: {config.probe_request_rate} req/s")
    backend = BACKENDS[config.backend]
    prompt = [PROBE_PROMPT, PROBE_PROMPT] if backend.query_documents else PROBE_PROMPT
    body = serialize_bodies(
        config.backend,
        [model_name],
        [prompt],
        [1],
        logprobs=config.logprobs,
        ignore_eos=config.sends_ignore_eos,
        extra_body=config.body_extras(),
    )[0]
    return ProbeLoop(
        client=client,
        url=config.api_url,
        body=body,
        interval_s=1 / config.probe_request_rate,
        response_form=response_form,
        chat=backend.answer == "chat",
        # --request-timeout and --idle-timeout, as for the run's requests
        timeouts=(
            min(config.request_timeout or PROBE_TIMEOUT_S, PROBE_TIMEOUT_S),
            config.idle_timeout,
        ),
    )


async def run_probes(
    client: ServerClient,
    url: str,
    body: bytes,
    interval_s: float,
    stop: asyncio.Event,
    response_form: str,
    chat: bool = False,
    results: ProbeResults | None = None,
    timeouts: tuple[float | None, float | None] = (PROBE_TIMEOUT_S, None),
) -> ProbeResults:
    """Send probes one at a time until ``stop`` is set, ``interval_s`` apart, adding what they
    measure to ``results`` as they go."""
    results = results if results is not None else ProbeResults()
    while not stop.is_set():
        latency_s = await _probe(client, url, body, response_form, chat, timeouts)
        if latency_s is None:
            results.failures += 1
        else:
            results.latencies_s.append(latency_s)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
    return results


async def _probe(
    client: ServerClient,
    url: str,
    body: bytes,
    response_form: str,
    chat: bool,
    timeouts: tuple[float | None, float | None] = (PROBE_TIMEOUT_S, None),
) -> float | None:
    """One probe's E2EL in seconds (send to its last token event), or None if it failed."""
    try:
        total_s, idle_s = timeouts
        answer = await client.send("POST", url, body, timeout_s=total_s, idle_timeout_s=idle_s)
    except ServerError:
        return None
    if answer.status != 200:  # as a worker judges it: a 200 with a token event succeeded
        return None
    reader = SSEStream(chat) if response_form == "sse" else PooledAnswer()
    if isinstance(reader, SSEStream):
        try:
            for arrived_ns, data in answer.chunks:
                reader.feed(data, arrived_ns)
        except EventTooLarge:  # an event over MAX_EVENT_BYTES fails a probe as a request
            return None
        reader.finish(answer.ended_ns)
        if reader.failure is not None:  # an error event, or a body that is not SSE of JSON
            return None
    else:
        reader.read(response_form, answer.body, answer.headers, answer.ended_ns)
    if not reader.event_ns:
        return None
    return (reader.event_ns[-1] - answer.sent_ns) / 1e9
