"""The mock server's aiohttp application and its serving loop.

:func:`build_app` routes each endpoint to its handler and installs the one middleware every
request goes through: it counts requests by method and path, holds a request while its
connection waits for a handler (--http-threads), answers 503 while the model loads or
--unavailable-for lasts and 401 without an API key where one is required, and turns every
refusal (a handler's :class:`~loadgen.mock.bodies.RequestError`, an unknown route or method) into
the personality's error answer: the one place that does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import signal
import socket
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from loadgen.mock.bodies import RequestError
from loadgen.mock.config import MockConfig
from loadgen.mock.handlers.audio import Audio
from loadgen.mock.handlers.generation import Generation
from loadgen.mock.handlers.info import Info
from loadgen.mock.handlers.pooling import Pooling
from loadgen.mock.handlers.tokenize import Tokenize
from loadgen.mock.personalities.base import Answer
from loadgen.mock.state import MockState

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 4096
MAX_BODY_BYTES = 64 * 1024 * 1024
IDLE_GC_TICK_S = 0.5
STATS_PATH = "/mock/stats"
METRICS_PATH = "/metrics"  # Prometheus: scraped during a run, no request in flight

STATE_KEY = web.AppKey("state", MockState)


def _answer(answer: Answer) -> web.Response:
    status, body, content_type = answer
    return web.Response(status=status, body=body, content_type=content_type)


def _has_key(request: web.Request) -> bool:
    """Whether the request carries an API key (any bearer token)."""
    return request.headers.get("Authorization", "").startswith("Bearer ")


def _middleware(state: MockState) -> Middleware:
    """The middleware that counts, gates and answers every refused request (see the module)."""
    personality, connections = state.personality, state.connections

    @web.middleware
    async def count_gate_and_refuse(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == STATS_PATH:
            return await handler(request)
        if connections.waiting:
            await connections.wait_for_handler(request.protocol)
        key = f"{request.method} {request.path}"
        state.requests_seen[key] = state.requests_seen.get(key, 0) + 1
        if state.gate_until and time.monotonic() < state.gate_until:
            state.served += 1
            if time.monotonic() < state.loading_until:
                return _answer(personality.loading())
            message = "The model is loading (mock server --unavailable-for)."
            return _answer(personality.error(503, message))
        if personality.requires_auth and not _has_key(request):
            state.served += 1
            return _answer(personality.unauthorized())
        if request.path == METRICS_PATH:  # a scrape is no request in flight, as on a server
            state.served += 1
            return await handler(request)
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            return await handler(request)
        except RequestError as exc:
            return _answer(exc.answer or personality.error(exc.status, exc.message))
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            return _answer(personality.no_route(exc.status, request.method, key))
        finally:
            state.in_flight -= 1
            state.served += 1

    return count_gate_and_refuse


def build_app(config: MockConfig) -> web.Application:
    """The mock server's aiohttp application; loads the tokenizer and precomputes the output."""
    state = MockState(config)
    generation = Generation(state)
    pooling = Pooling(state)
    tokenize = Tokenize(state)
    info = Info(state)
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_middleware(state)])
    app[STATE_KEY] = state
    personality = state.personality
    app.router.add_get("/health", info.health)
    app.router.add_get("/v1/models", info.models)
    if personality.metrics:
        app.router.add_get(METRICS_PATH, info.metrics)
    app.router.add_post("/v1/completions", generation.completions)
    app.router.add_post("/v1/chat/completions", generation.chat_completions)
    audio = Audio(generation)
    app.router.add_post("/v1/audio/transcriptions", audio.transcriptions)
    app.router.add_post("/v1/audio/translations", audio.translations)
    app.router.add_post("/v1/embeddings", pooling.embeddings)
    app.router.add_post("/pooling", pooling.pooling)
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        app.router.add_post(path, pooling.rerank)
    form = personality.tokenizer
    if form is not None:
        app.router.add_post("/tokenize", tokenize.tokenize)
    if form not in (None, "tgi"):  # TGI has no /detokenize
        app.router.add_post("/detokenize", tokenize.detokenize)
    if form == "sglang":
        app.router.add_post("/v1/tokenize", tokenize.tokenize)
        app.router.add_post("/v1/detokenize", tokenize.detokenize)
    app.router.add_get(STATS_PATH, info.stats)
    if personality.prefix_cache_reset is not None:
        app.router.add_post(personality.prefix_cache_reset, info.reset_prefix_cache)
    app.router.add_post("/start_profile", info.profile)
    app.router.add_post("/stop_profile", info.profile)
    if state.recorder is not None:
        app.router.add_get("/timings", info.timings)
    if state.extra_headers:
        app.on_response_prepare.append(functools.partial(_add_headers, state.extra_headers))
    return app


async def _add_headers(
    headers: dict[str, str], request: web.Request, response: web.StreamResponse
) -> None:
    """Add the personality's headers to a response about to be sent."""
    response.headers.update(headers)


async def serve(config: MockConfig) -> None:
    """Serve on ``config.host``:``config.port`` until SIGINT or SIGTERM; the port opens only
    once the startup delay has passed.

    The timing records (--record-timings) are saved on the way out.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    app = build_app(config)
    state = app[STATE_KEY]
    loading = config.startup_delay_s > 0 and state.personality.port_closed_while_loading
    reserved = _reserve_port(config) if loading else None
    if reserved is not None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), config.startup_delay_s)
        if stop.is_set():
            reserved.close()
            _save_timings(state)
            return

    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,
        keepalive_timeout=state.keepalive_timeout_s,
    )
    await runner.setup()
    assert runner.server is not None
    state.connections.install(runner.server)
    if state.recorder is not None:
        state.recorder.install(runner.server)
    host = config.host
    try:
        site: web.BaseSite = (
            web.TCPSite(
                runner,
                host,
                config.port,
                backlog=LISTEN_BACKLOG,
                reuse_address=True,
                reuse_port=config.reuse_port or None,
            )
            if reserved is None
            else web.SockSite(runner, reserved, backlog=LISTEN_BACKLOG)
        )
        await site.start()
        state.mark_open()
        collector = asyncio.create_task(_collect_garbage_when_idle(state))
        real_port = runner.addresses[0][1]
        shown_host = f"[{host}]" if ":" in host else host
        log.info(f"loadgen mock-server listening on http://{shown_host}:{real_port}")
        await stop.wait()
        collector.cancel()
    finally:
        await runner.cleanup()
    _save_timings(state)


def _reserve_port(config: MockConfig) -> socket.socket:
    """The port bound but not listening while the server "loads": a client's connect is refused
    as by a server not yet up, and no other process can take the port meanwhile (tests pick a
    free port, then start the mock with a startup delay)."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if config.reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((config.host, config.port))
    return sock


async def _collect_garbage_when_idle(state: MockState) -> None:
    """Keep Python's cyclic garbage collection out of the responses the mock is timed on.

    A collection walks the live objects of its generations: with thousands of open connections
    (loadgen pre-opens one per request of an uncapped run) the old generation's took 50-150 ms
    and the middle one's 7-15 ms here, stalling every response in flight. Serving a request
    leaves no cyclic garbage (those collections freed nothing), so automatic collection is off
    and a full one runs only after a whole tick without any request.
    """
    gc.freeze()  # the tokenizer and the precomputed output live as long as the server
    gc.disable()
    seen = -1
    while True:
        await asyncio.sleep(IDLE_GC_TICK_S)
        total = sum(state.requests_seen.values())
        if state.in_flight == 0 and total == seen:
            gc.collect()
        seen = total


def _save_timings(state: MockState) -> None:
    """Write the timing records to the --record-timings file, if the server records any."""
    path = state.config.record_timings
    if state.recorder is not None and path is not None:
        state.recorder.save(path)
