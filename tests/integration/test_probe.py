"""--probe-request-rate: the probe loop against an in-process aiohttp server (the statistics and
summary block: tests/unit/test_probe_stats.py)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from loadgen.report.probes import ProbeResults
from loadgen.server.client import ServerClient
from loadgen.server.probes import run_probes


def test_probes_go_one_at_a_time_until_stopped_and_failures_are_counted() -> None:
    in_flight, most, answers = 0, 0, iter([200, 500, 200, 200, 200, 200, 200, 200, 200, 200])

    async def completions(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        status = next(answers, 200)
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
        stop = asyncio.Event()
        client = ServerClient(f"http://127.0.0.1:{port}", {})
        try:
            task = asyncio.create_task(
                run_probes(client, f"{client.server_url}/v1/completions", b"{}", 0.005, stop, "sse")
            )
            await asyncio.sleep(0.1)
            stop.set()
            results = await task
        finally:
            await client.close()
        await runner.cleanup()
        return results

    results = asyncio.run(scenario())
    assert most == 1  # never two probes at once
    assert results.failures == 1
    assert 3 <= len(results.latencies_s) <= 8  # 10 ms answers 5 ms apart, for 100 ms
    assert all(0.009 < lat < 0.1 for lat in results.latencies_s)
