"""The server's Prometheus ``/metrics`` page, read before and after the timed run.

``loadgen.report.decoding`` turns the pages into the spec-decode and diffusion figures.
"""

from __future__ import annotations

from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError


async def metrics_page(client: ServerClient) -> str | None:
    """The server's Prometheus /metrics page, for its spec-decode and diffusion counters; None
    when it serves none (not every server does)."""
    try:
        body = await client.request("GET", f"{client.server_url}/metrics", timeout_s=10.0)
    except ServerError:
        return None
    return body.decode("utf-8", "replace")
