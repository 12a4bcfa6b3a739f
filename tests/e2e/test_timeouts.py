"""Every run ends by itself: a server that stalls after its headers or mid-stream, or streams
without end, fails its requests with the reason at --idle-timeout, --request-timeout or the
output guard, and warm-ups obey them too (the real CLI and workers against a misbehaving server
on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import asyncio_server, hang_guard, only_json, run_in_process

EVENT = b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
RUN = ["--model", "loadgen-mock", "--num-prompts", "6", "--workers", "2",
       "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
       "--no-fail-fast", "--save-result", "--save-detailed"]  # fmt: skip


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@contextmanager
def misbehaving(mode: str) -> Iterator[str]:
    """A server whose completions misbehave as ``mode`` says: "headers" (200 headers, then
    nothing), "stall" (headers and three events, then nothing) or "endless" (an event every
    10 ms, never [DONE]); anything else is answered 404."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                await reader.readexactly(length)
                if b"/completions" not in line:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                writer.write(HEADERS)
                if mode == "stall":
                    writer.write(chunk(EVENT * 3))
                await writer.drain()
                while mode == "endless":
                    writer.write(chunk(EVENT))
                    await writer.drain()
                    await asyncio.sleep(0.01)
                await asyncio.sleep(3600)
        except (ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass

    with asyncio_server(serve) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("mode", "flags", "reason"),
    [
        ("headers", ["--idle-timeout", "1"], "idle timeout: no byte from the server for 1 s"),
        ("stall", ["--idle-timeout", "1"], "idle timeout: no byte from the server for 1 s"),
        (
            "endless",
            ["--request-timeout", "1.5", "--random-output-len", "4000"],
            "request timeout: not finished 1.5 s after",
        ),
        # Without a request timeout, the output guard cuts it: 2 x max_tokens (8) + 64 events.
        ("endless", [], "output guard: more than 80 SSE messages"),
    ],
)
def test_a_misbehaving_stream_fails_with_its_reason_and_the_run_ends(
    tmp_path: Path, mode: str, flags: list[str], reason: str
) -> None:
    with misbehaving(mode) as url:
        started = time.monotonic()
        proc = run_in_process("--base-url", url, *RUN, *flags, "--result-dir", str(tmp_path))
        took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr  # every request failed
    assert took < hang_guard(20)  # the run ends: it hung before the timeouts
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (0, 6)
    assert all(error.startswith(reason) for error in result["errors"]), result["errors"]


def test_warm_ups_obey_the_timeouts(tmp_path: Path) -> None:
    with misbehaving("headers") as url:
        started = time.monotonic()
        proc = run_in_process(
            "--base-url", url, *RUN, "--idle-timeout", "1", "--num-warmups", "2",
            "--result-dir", str(tmp_path),
        )  # fmt: skip
        took = time.monotonic() - started
    assert took < hang_guard(20)  # the run ends: it hung before the timeouts
    assert "Warmup: 2 of 2 requests failed" in proc.stdout
    assert json.dumps(only_json(tmp_path)["errors"]).count("idle timeout") == 6
