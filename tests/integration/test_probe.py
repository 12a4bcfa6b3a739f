"""--probe-request-rate: the probe loop against an in-process aiohttp server (the statistics and
summary block: tests/unit/report/test_probe_stats.py)."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from loadgen.report.probes import ProbeResults
from loadgen.server.client import ServerClient
from loadgen.server.probes import run_probes


def test_probes_go_one_at_a_time_until_stopped_and_failures_are_counted() -> None:
    in_flight, most, answers = 0, 0, iter([200, 500, 200, 200, 200, 200])
    stop = asyncio.Event()

    async def completions(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        status = next(answers, None)
        if status is None:  # the seventh request: stop (this probe still counts)
            stop.set()
            status = 200
        if status != 200:
            return web.Response(status=status)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[{"text":"x"}]}\n\ndata: [DONE]\n\n')
        return response

    async def scenario() -> ProbeResults:
        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = ServerClient(f"http://127.0.0.1:{port}", {})
        try:
            started = time.perf_counter()
            results = await run_probes(
                client, f"{client.server_url}/v1/completions", b"{}", 0.005, stop, "sse"
            )
            took_s = time.perf_counter() - started
        finally:
            await client.close()
        await runner.cleanup()
        return results, took_s

    results, took_s = asyncio.run(scenario())
    assert most == 1  # never two probes at once
    # Seven asked (10 ms answers, 5 ms apart) until the stop: one failed, six measured.
    assert (results.failures, len(results.latencies_s)) == (1, 6)
    # Never shorter than the server's 10 ms; one at a time, so together within the whole.
    assert all(lat > 0.009 for lat in results.latencies_s), results
    assert sum(results.latencies_s) < took_s, (results, took_s)
