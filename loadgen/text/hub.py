"""Files from the Hugging Face hub: fetched as huggingface_hub fetches them when the hub answers,
and from its cache at once when it cannot be reached.

huggingface_hub retries a request that cannot connect five times, with backoff, printing each
retry: on a machine without the hub (air-gapped, a CI runner, a laptop on a train) a run with a
hub model id sat 24 s over ten lines of retries before it used the cache or fell back to the
server's /tokenize. One TCP connection to the hub (or to the proxy that reaches it), with a
short timeout, says at once whether to ask the hub at all; the answer holds for the process.
"""

from __future__ import annotations

import functools
import os
import socket
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
OFFLINE_VALUES = {"1", "true", "yes", "on"}


class HubError(Exception):
    """A hub file that cannot be had: the message says why, in one line."""


def offline() -> bool:
    """``HF_HUB_OFFLINE`` is set: the cache only, as huggingface_hub does."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in OFFLINE_VALUES


@functools.cache
def unreachable() -> str | None:
    """Why the hub cannot be reached ("huggingface.co:443: Name or service not known"), or None
    when a connection to it (or to the proxy for it) opens within PROBE_TIMEOUT_S."""
    from huggingface_hub import constants

    endpoint = urlsplit(constants.ENDPOINT)
    host = endpoint.hostname or ""
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(endpoint.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = via.hostname or "", via.port or 80
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    return None


def hub_file(repo_id: str, filename: str) -> Path | None:
    """``filename`` of hub repo ``repo_id``: a local path, or None when the repo has no such
    file (as the hub or its cache knows). HubError when it cannot be had."""
    from huggingface_hub import _CACHED_NO_EXIST, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    why = "HF_HUB_OFFLINE is set" if offline() else unreachable()
    if why is not None:
        cached = try_to_load_from_cache(repo_id, filename)
        if cached is _CACHED_NO_EXIST:
            return None
        if isinstance(cached, str):
            return Path(cached)
        raise HubError(f"{filename} of '{repo_id}' is not in the Hugging Face cache ({why})")
    try:
        return Path(hf_hub_download(repo_id, filename))
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: first
        raise HubError(
            f"{filename} of '{repo_id}' is not in the Hugging Face cache and the hub failed"
        ) from None
    except EntryNotFoundError:
        return None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HubError(f"{filename} of '{repo_id}': {first}") from None
