"""The ready check and the warm-ups: the run's first request, sent before the timed run."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import orjson

from loadgen.audio_payloads import content_type
from loadgen.backends import BACKENDS
from loadgen.server.client import ServerClient, server_message
from loadgen.server.errors import ServerError, describe_error
from loadgen.server.retry import wait_for_server
from loadgen.terminal import printable

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from loadgen.config import RunConfig


async def generate(
    client: ServerClient, url: str, body: bytes, config: RunConfig | None = None
) -> None:
    """Send one generation request and read its answer to the end; raise if it failed. With
    ``config``, the run's --request-timeout and --idle-timeout bound it as they bound the run's.

    As upstream's request functions judge it: a 200 stream needs at least one event with
    a non-empty ``choices`` list, and one that carries an error event fails like an error
    status would.
    """
    audio = config is not None and BACKENDS[config.backend].multipart  # an upload
    payload = await client.request(
        "POST",
        url,
        body,
        headers={"Content-Type": content_type()} if audio else None,
        timeout_s=config.request_timeout if config is not None else None,
        idle_timeout_s=config.idle_timeout if config is not None else None,
    )
    if not payload.lstrip().startswith(b"data:"):
        return  # a whole JSON answer (not streamed): its 200 is the verdict
    has_choices = False
    for line in payload.splitlines():
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        try:
            event = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("error"):
            raise ServerError(f"POST {url} streamed an error: {server_message(200, line[5:])}")
        has_choices = has_choices or bool(event.get("choices"))
    if not has_choices:
        raise ServerError(f"POST {url} streamed no event with choices")


async def check_ready(config: RunConfig, client: ServerClient, first_body: bytes) -> None:
    """Upstream's ready check: send the first request, exactly as the run will, until it works."""
    if config.ready_check_timeout_sec == 0:
        log.info(  # upstream's line, with why
            "Skipping endpoint ready check: no test request before the run "
            "(--ready-check-timeout-sec is 0, the default)."
        )
        return
    log.info("Starting initial single prompt test run...")
    try:
        await wait_for_server(
            lambda: generate(client, config.api_url, first_body, config),
            "a first request like the run's",
            config.ready_check_timeout_sec,
            config.ready_check_interval_sec,
        )
    except ServerError as exc:
        raise ServerError(f"initial test run failed: {exc}") from None
    log.info("Initial test run completed.")


async def warm_up(config: RunConfig, client: ServerClient, first_body: bytes) -> None:
    """``--num-warmups`` copies of the first request, at most --max-concurrency at once; their
    results are discarded, but failures are counted and shown."""
    if config.num_warmups == 0:
        return
    log.info(f"Warming up with {config.num_warmups} requests...")
    slots = asyncio.Semaphore(config.concurrency or config.num_warmups)

    async def one() -> None:
        async with slots:
            await generate(client, config.api_url, first_body, config)

    outcomes = await asyncio.gather(
        *(one() for _ in range(config.num_warmups)), return_exceptions=True
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:
        log.warning(
            f"Warmup: {len(failures)} of {config.num_warmups} requests failed; "
            f"the first: {printable(describe_error(failures[0]))}"
        )
    log.info("Warmup run completed.")
