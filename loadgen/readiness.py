"""Requests to the server made before the timed run: model discovery."""

from __future__ import annotations

import os
import urllib.parse
import urllib.request

import aiohttp


class ServerError(RuntimeError):
    """The server could not be used; the message names the URL and what went wrong."""


def proxy_for(url: str) -> str | None:
    """The proxy the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) names for ``url``, if any."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def auth_headers(extra: dict[str, str]) -> dict[str, str]:
    """``Authorization: Bearer $OPENAI_API_KEY`` when it is set, overridden by ``--header``."""
    headers: dict[str, str] = {}
    if api_key := os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {api_key}"
    return {**headers, **extra}


async def fetch_first_model(server_url: str, headers: dict[str, str]) -> tuple[str, str]:
    """``(data[0].id, data[0].root or id)`` from ``GET {server_url}/v1/models``."""
    url = f"{server_url}/v1/models"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            session.get(url, headers=headers) as response,
        ):
            response.raise_for_status()
            data = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise ServerError(
            f"cannot fetch models from {url}: {exc or type(exc).__name__}; is the server up?"
        ) from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models:
        raise ServerError(f"no models found on the server at {url}; pass --model")
    first = models[0]
    return first["id"], first.get("root") or first["id"]
