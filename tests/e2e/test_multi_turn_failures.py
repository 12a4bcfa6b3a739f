"""A ``--multi-turn`` run whose turns fail ends by itself (issue 27, point 1): a server that
answers HTTP 500, resets the connection mid-stream, or stalls mid-stream (``--idle-timeout``) on
every 3rd POST. Each run must exit on its own, every turn must be exactly one record, a failed
turn's later turns are recorded at once as ``not sent: an earlier turn of this conversation
failed (turn k: ...)``, and the counts add up.

The time bound of each run is measured in the same test: the same run against the same server
with no failures (``healthy_s``). Before the fix the failing run did not end at all (the worker
waited for a credit nobody would grant), so the bound only needs to be generous."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from helpers import free_port, only_json, run_in_process

CHAT = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
IDLE_TIMEOUT_S = 0.5  # the stalled turn's --idle-timeout


class EveryThird:
    """A chat server that streams a good answer, except on every 3rd POST (from 0: POSTs 2, 5,
    8, ...), where it does ``fault``: ``500``, ``rst`` (a reset after two events) or ``stall``
    (two events, then nothing). ``fault`` None: every POST is good."""

    def __init__(self) -> None:
        self.fault: str | None = None
        self.posts = 0
        self.faulted = 0

    async def chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        k = self.posts
        self.posts += 1
        fault = self.fault if k % 3 == 2 else None
        if fault is not None:
            self.faulted += 1
        if fault == "500":
            return web.json_response({"error": {"message": "every third"}}, status=500)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in ("an ", "answer"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if fault == "rst":
            await asyncio.sleep(0.01)  # the events reach the client first
            transport = request.transport
            assert transport is not None
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            return response
        if fault == "stall":
            await asyncio.sleep(3600)  # cancelled when the client goes or the server stops
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        await response.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m", "root": "m"}]})


@pytest.fixture
def server() -> Iterator[tuple[EveryThird, str]]:
    state = EveryThird()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", state.chat)
    app.router.add_get("/v1/models", state.models)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
    loop.run_until_complete(runner.setup())
    port = free_port()
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def run(url: str, out: Path) -> tuple[float, object]:
    """The issue's repro (12 conversations of 2 to 4 turns, 2 workers sharing a cap of 4); the
    seconds it took and the finished process."""
    started = time.perf_counter()
    proc = run_in_process(
        "--base-url", url, "--model", "m", "--tokenizer", "loadgen-mock", *CHAT,
        "--multi-turn", "--num-prompts", "12", "--multi-turn-min-turns", "2",
        "--multi-turn-max-turns", "4", "--random-input-len", "16", "--per-turn-input-len", "8",
        "--random-output-len", "5", "--max-concurrency", "4", "--workers", "2",
        "--idle-timeout", str(IDLE_TIMEOUT_S), "--no-fail-fast", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(out),
    )  # fmt: skip
    return time.perf_counter() - started, proc


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("500", "HTTP 500"), ("rst", "ClientPayloadError"), ("stall", "idle timeout")],
)
def test_a_run_with_failing_turns_ends_by_itself(
    server: tuple[EveryThird, str], tmp_path: Path, fault: str, reason: str
) -> None:
    state, url = server
    healthy_s, healthy = run(url, tmp_path / "healthy")
    assert healthy.returncode == 0, healthy.stderr[-2000:]
    turns = only_json(tmp_path / "healthy")["loadgen"]["multi_turn"]
    total_turns = sum(t["completed"] + t["failed"] + t["not_sent"] for t in turns["per_turn"])
    assert state.posts == total_turns and turns["failed"] == 0

    state.fault, state.posts = fault, 0
    # The failing run sends fewer turns than the healthy one; a stalled turn adds its idle
    # timeout (each worker's stalls overlap, at most 4 in flight). Generous: a hang is forever.
    bound_s = 3 * healthy_s + 2 * IDLE_TIMEOUT_S * total_turns / 4
    took_s, failing = run(url, tmp_path / "failing")
    assert failing.returncode == 0, failing.stderr[-2000:]
    assert took_s < bound_s, (took_s, bound_s, healthy_s)

    result = only_json(tmp_path / "failing")
    errors = result["errors"]
    assert len(errors) == total_turns  # every turn is exactly one record
    assert result["completed"] == state.posts - state.faulted == sum(1 for e in errors if not e)
    failed = [e for e in errors if e.startswith(reason)]
    assert len(failed) == state.faulted > 0
    not_sent = [e for e in errors if e.startswith("not sent: ")]
    assert len(failed) + len(not_sent) + result["completed"] == total_turns
    assert not_sent and all(
        e.startswith("not sent: an earlier turn of this conversation failed (turn ")
        and f": {reason}" in e
        for e in not_sent
    ), not_sent[:3]
    figures = result["loadgen"]["multi_turn"]
    assert figures["failed"] == state.faulted  # each failed turn ended one conversation
    assert figures["conversations"] == 12
    assert (
        sum(t["completed"] + t["failed"] + t["not_sent"] for t in figures["per_turn"])
        == total_turns
    )
