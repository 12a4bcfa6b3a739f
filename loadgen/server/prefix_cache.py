"""``--reset-prefix-cache``: empty the server's prefix cache before a run.

Servers that have a reset (docs/servers.md has the table): vLLM's ``POST /reset_prefix_cache``
(a development endpoint: served with ``VLLM_SERVER_DEV_MODE=1``) and SGLang's
``POST /flush_cache``. Which one a server has is found by trying them in that order, once; the
first it answers is used for every later run. llama.cpp erases a slot's cache only with
``--slot-save-path`` and TGI has no reset: both are refused, in one line that says so.
"""

from __future__ import annotations

import logging

from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError

log = logging.getLogger(__name__)

RESETS = (("/reset_prefix_cache", "vLLM"), ("/flush_cache", "SGLang"))
# Statuses that mean "no such endpoint here": the next server's is tried.
ABSENT = (404, 405)


class NoReset(ServerError):
    """The server has no prefix-cache reset loadgen knows, or refused it."""


async def reset_prefix_cache(client: ServerClient, path: str | None = None) -> str:
    """Empty the server's prefix cache with ``path`` (found by trying ``RESETS`` when None);
    the path that did it. NoReset, in one line, when none is served or the server refused."""
    paths = [path] if path is not None else [p for p, _ in RESETS]
    for candidate in paths:
        url = f"{client.server_url}{candidate}"
        try:
            body = await client.request("POST", url, b"", timeout_s=60.0)
        except ServerError as exc:
            if exc.status in ABSENT and path is None:
                continue
            raise NoReset(f"--reset-prefix-cache: {exc}") from None
        if b'"success":false' in body.replace(b" ", b""):  # vLLM's answer when it could not
            raise NoReset(f"--reset-prefix-cache: POST {url} answered {body[:200]!r}")
        log.debug(f"prefix cache reset: POST {url}")
        return candidate
    tried = ", ".join(f"{name}'s POST {p}" for p, name in RESETS)
    raise NoReset(
        f"--reset-prefix-cache: {client.server_url} serves no prefix-cache reset ({tried} "
        "answered 404); vLLM serves its reset with VLLM_SERVER_DEV_MODE=1, llama.cpp and TGI "
        "have none loadgen can call (docs/servers.md)"
    )
