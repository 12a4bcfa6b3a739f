"""End to end: nothing a server sends reaches the terminal raw. A server whose only model's id
and whose error texts (a plain-text HTTP 500 body, a stream's error event, a 404 that fails the
run fast) carry an ANSI colour, an OSC window title, BELs, a line break that forges a line of
loadgen's own and a clear-screen: loadgen's output holds none of them (loadgen/terminal.py
printable), in the summary's error lines, the live view, the first-error and fail-fast lines
and the model's name, and the result file's name carries none either."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

from helpers import asyncio_server, hang_guard

from loadgen.session.live_figures import LiveFigures
from loadgen.session.live_view import plain_line

ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;owned title\x07bell\x07 two\nerror: forged line\r\x1b[2J"
SHOWN = "red bell two error: forged line "  # what is left, on one line (the CR: a space)
MODEL = "m\x1b]0;model title\x07\x1b[1;31m\x07"
MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
# Any C0 control but the line feed, DEL, or a C1 control (8-bit CSI, OSC...).
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def token(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


def answer(kind: str, k: int) -> tuple[bytes, bytes, bytes]:
    """The k-th POST's status, content type and body: every third a plain-text 500 with the
    escapes as raw bytes, every third a stream whose error event carries them, the rest good;
    with ``kind`` "404", every one a 404 that names the model (fail-fast stops the run)."""
    if kind == "404":
        body = f"The model `{MODEL}` does not exist. {ESCAPES}".encode()
        return b"404 Not Found", b"text/plain", body
    if k % 3 == 0:
        return b"500 Internal Server Error", b"text/plain", ESCAPES.encode()
    if k % 3 == 1:
        event = {"error": {"message": ESCAPES, "type": "InternalServerError", "code": 500}}
        error = b"data: " + json.dumps(event).encode() + b"\n\n"
        return b"200 OK", b"text/event-stream", token(" a") + error + b"data: [DONE]\n\n"
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 2}}
    stream = token(" a") + token(" b") + b"data: " + json.dumps(usage).encode() + b"\n\n"
    return b"200 OK", b"text/event-stream", stream + b"data: [DONE]\n\n"


def escaping_server(kind: str):  # -> the asyncio_server context of a server of this kind
    posts = [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length:\s*(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
                if head.startswith(b"GET /v1/models"):
                    status, kind_of, body = b"200 OK", b"application/json", MODELS
                elif head.startswith(b"POST /v1/completions "):
                    status, kind_of, body = answer(kind, posts[0])
                    posts[0] += 1
                else:
                    status, kind_of, body = b"404 Not Found", b"text/plain", b"not found"
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind_of
                    + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body
                )  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return asyncio_server(serve)


def run(port: int, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI against the server, with no --model: the server's (escaped) one is used."""
    return subprocess.run(
        [sys.executable, "-m", "loadgen", "run", "--base-url", f"http://127.0.0.1:{port}",
         "--tokenizer", "loadgen-mock", "--random-input-len", "8", "--random-output-len", "2",
         "--workers", "2", "--save-result", "--result-dir", str(tmp_path), *args],
        capture_output=True, text=True, timeout=hang_guard(120),
    )  # fmt: skip


def controls(text: str) -> list[str]:
    """The lines of ``text`` that hold a control character."""
    return [line for line in text.splitlines() if CONTROL.search(line)]


def test_error_texts_and_the_model_name_are_printed_without_escapes(tmp_path: Path) -> None:
    with escaping_server("mixed") as port:
        proc = run(
            port, tmp_path, "--num-prompts", "12", "--max-concurrency", "2", "--save-detailed"
        )
    assert proc.returncode == 0, proc.stderr
    assert controls(proc.stdout) == [] and controls(proc.stderr) == []
    lines = proc.stdout.splitlines()
    assert "First model name: m, first model id: m" in lines
    errors = {line.split(": ", 1)[1] for line in lines if line.startswith("Error ")}
    assert errors == {f"HTTP 500 Internal Server Error: {SHOWN}", f"error in the stream: {SHOWN}"}
    assert not any(line.startswith("error: forged line") for line in lines)  # nothing forged
    names = [path.name for path in tmp_path.iterdir()]
    assert len(names) == 2 and not any(CONTROL.search(name) for name in names), names
    assert all("-m-" in name for name in names)
    # The JSON keeps what the server said (JSON escapes it): only the terminal is spared. The
    # stream's error event keeps it whole (an HTTP error body is made one line by the worker),
    # and which request failed first varies: look at every error.
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert result["model_id"] == MODEL
    assert any(ESCAPES in error for error in result["errors"]), result["errors"]


def test_the_fail_fast_line_names_the_model_without_escapes(tmp_path: Path) -> None:
    with escaping_server("404") as port:
        proc = run(port, tmp_path, "--num-prompts", "40", "--max-concurrency", "2")
    assert proc.returncode == 1, proc.stderr
    assert controls(proc.stdout) == [] and controls(proc.stderr) == []
    error = proc.stderr.splitlines()[-1]
    assert error.startswith(
        "error: the first 20 requests all failed with 'HTTP 404 Not Found: The model `m` does "
        f"not exist. {SHOWN}'"
    ), error
    assert error.endswith("Is --model m served? GET /v1/models lists the server's models.")


def test_the_live_view_line_shows_error_kinds_without_escapes() -> None:
    figures = LiveFigures(
        elapsed_s=1.0, total=10, completed=4, failed=6, in_flight=0, req_per_s=10.0,
        output_tok_per_s=20.0, ttft=None, itl=None,
        errors=[(f"HTTP 500 \x1b[31m{ESCAPES}", 6)],
    )  # fmt: skip
    line = plain_line(figures)
    assert not CONTROL.search(line), repr(line)
    assert "errors: HTTP 500 red bell two error" in line
