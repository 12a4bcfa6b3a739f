"""Model discovery: the model a run names, given with ``--model`` or the server's first."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from loadgen.server.client import ServerClient
from loadgen.server.errors import NotRetryable, ServerError
from loadgen.server.retry import wait_for_server
from loadgen.terminal import printable

log = logging.getLogger(__name__)

SHOWN_MODELS = 10  # a gateway may serve hundreds

if TYPE_CHECKING:
    from loadgen.config.sections import Server


async def _model_list(client: ServerClient) -> tuple[str, list[object]]:
    """``GET /v1/models``'s URL and its ``data`` list."""
    url = f"{client.server_url}/v1/models"
    payload = await client.request("GET", url)
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise ServerError(f"GET {url} answered something that is not JSON") from None
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ServerError(f"GET {url} answered JSON without a 'data' list")
    return url, models


async def served_models(client: ServerClient) -> list[str] | None:
    """The ids ``GET /v1/models`` lists, asked once; None when it gives no such list."""
    try:
        _, models = await _model_list(client)
    except (ServerError, OSError):
        return None
    return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


def unknown_model(model: str, served: list[str]) -> str:
    """The line for a --model the server does not serve, naming those it does."""
    shown = ", ".join(printable(name) for name in served[:SHOWN_MODELS])
    more = f" and {len(served) - SHOWN_MODELS} more" if len(served) > SHOWN_MODELS else ""
    return (
        f"the server does not serve --model {printable(model)}: it serves {shown}{more} "
        "(GET /v1/models)"
    )


async def fetch_first_model(client: ServerClient) -> tuple[str, str]:
    """``(data[0].id, data[0].root or id)`` from ``GET /v1/models``."""
    url, models = await _model_list(client)
    if not models:
        raise NotRetryable(f"no models found on the server at {url}; pass --model")
    first = models[0]
    if not isinstance(first, dict) or not isinstance(first.get("id"), str):
        raise ServerError(f"GET {url}: data[0] has no model id")
    return first["id"], first.get("root") or first["id"]


async def resolve_model(config: Server, client: ServerClient) -> tuple[str, str]:
    """(the model field sent, the model id): --model, or the server's first model."""
    if config.model is not None:
        return config.served_model_name or config.model, config.model
    log.info("Model not specified, fetching first model from server...")
    model_name, model_id = await wait_for_server(
        lambda: fetch_first_model(client),
        "the model list",
        config.ready_check_timeout_sec,
        config.ready_check_interval_sec,
    )
    log.info(f"First model name: {printable(model_name)}, first model id: {printable(model_id)}")
    return model_name, model_id
