"""``--profile``: the server's profiler, started before the timed run and stopped after it."""

from __future__ import annotations

import logging

from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError
from loadgen.terminal import printable

log = logging.getLogger(__name__)

PROFILER_LINES = {
    "start": ("Starting profiler...", "Profiler started"),
    "stop": ("Stopping profiler...", "Profiler stopped"),
}


async def profile(client: ServerClient, action: str) -> None:
    """POST /start_profile (``action`` "start") or /stop_profile ("stop"). A start the server
    refuses ends the run before it begins; a refused stop is a warning."""
    before, after = PROFILER_LINES[action]
    log.info(before)
    try:
        await client.request("POST", f"{client.server_url}/{action}_profile", b"{}")
    except ServerError as exc:
        if action == "start":
            raise ServerError(f"--profile: {exc} (the server needs profiling enabled)") from None
        log.warning(f"warning: --profile: {printable(exc)}")
        return
    log.info(after)
