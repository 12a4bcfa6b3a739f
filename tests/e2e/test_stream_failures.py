"""Honest failures end to end (issue 14 point 5): the real CLI and workers against a raw HTTP
server (tests/raw_http_server.py) that answers 200 with what a misbehaving server sends: an
error event after tokens, a stream that ends without [DONE], an HTML page, events that are not
JSON. Every request is accounted for (completed + failed = sent) and each failure says why."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from helpers import InProcess, run_in_process
from raw_http_server import Habits, RawServer
from stream_errors import ERROR_TAILS

N = 6
SSE = b"text/event-stream"
DONE = b"data: [DONE]\n\n"


def token(k: int) -> bytes:
    chunk = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": f" t{k}"}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def tokens(n: int) -> bytes:
    return b"".join(token(k) for k in range(n))


def usage(n: int) -> bytes:
    chunk = {"id": "c", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": n}}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def good(n: int) -> bytes:
    return tokens(n) + usage(n) + DONE


def run(
    tmp_path: Path, answer: Callable[[int, int], tuple[bytes, bytes]]
) -> tuple[InProcess, dict]:
    """``N`` requests of 4 tokens through 2 workers, against a server that answers ``answer``."""
    habits = Habits(close_after_stream_s=None, answer=answer)
    with RawServer(habits) as server:
        proc = run_in_process(
            "--base-url", f"http://127.0.0.1:{server.port}", "--model", "m",
            "--tokenizer", "loadgen-mock", "--random-input-len", "8", "--random-output-len", "4",
            "--num-prompts", str(N), "--workers", "2", "--max-concurrency", "2",
            "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
        )  # fmt: skip
    assert habits.posts == N  # each request reached the server once
    files = list(tmp_path.glob("*.json"))
    result = json.loads(files[0].read_text()) if files else {}
    if result:
        assert result["completed"] + result["failed"] == N, result["errors"]
    return proc, result


def every_other(bad: Callable[[int], bytes]) -> Callable[[int, int], tuple[bytes, bytes]]:
    """Odd POSTs get ``bad(n)``, even ones a good stream."""
    return lambda k, n: (SSE, bad(n) if k % 2 else good(n))


@pytest.mark.parametrize(("tail", "message"), ERROR_TAILS.values(), ids=ERROR_TAILS.keys())
def test_an_error_event_after_tokens_fails_the_request_with_the_servers_message(
    tmp_path, tail, message
):
    # Each server's mid-stream error. Upstream's completions backend would count these requests
    # as successes with 2 tokens.
    proc, result = run(tmp_path, every_other(lambda n: tokens(2) + tail))
    assert proc.returncode == 0, proc.stderr
    assert (result["completed"], result["failed"]) == (N // 2, N // 2)
    failed = [e for e in result["errors"] if e]
    assert failed == [f"error in the stream: {message}"] * (N // 2)
    assert f"error in the stream: {message}" in proc.stdout  # the failure preamble
    assert result["loadgen"]["truncated_streams"] == 0


def test_a_stream_without_done_counts_as_upstream_counts_it_and_is_reported(tmp_path):
    # The last event of every other stream is cut short by the end of the body.
    proc, result = run(
        tmp_path, lambda k, n: (SSE, tokens(n) + usage(n) + (token(n)[:20] if k % 2 else b""))
    )
    assert proc.returncode == 0, proc.stderr
    assert (result["completed"], result["failed"]) == (N, 0)  # upstream never needs [DONE]
    assert result["output_lens"] == [4] * N
    extra = list(result["loadgen"])
    assert extra[extra.index("resent_on_stale_connection") + 1] == "truncated_streams"
    assert result["loadgen"]["truncated_streams"] == N
    warning = f"warning: {N} streams ended without data: [DONE]; counted as upstream counts them"
    assert warning in proc.stdout
    lines = proc.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("client"))
    assert next(i for i, line in enumerate(lines) if line.startswith(warning)) < verdict


def test_an_html_page_with_status_200_fails_every_request(tmp_path):
    page = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n\n<body></body></html>\n"
    proc, result = run(tmp_path, lambda k, n: (b"text/html", page))
    assert proc.returncode == 1  # every request failed
    reason = "the answer is not SSE: it begins b'<!DOCTYPE html>\\n<html><head><title>Sign in"
    assert f"error: every request failed; the first error: {reason}" in proc.stderr
    assert (result["completed"], result["failed"]) == (0, N)
    assert all(e.startswith(reason) for e in result["errors"])
    assert result["loadgen"]["truncated_streams"] == 0


def test_events_that_are_not_json_fail_their_request(tmp_path):
    proc, result = run(tmp_path, every_other(lambda n: tokens(2) + b"data: keep-alive\n\n" + DONE))
    assert proc.returncode == 0, proc.stderr
    assert (result["completed"], result["failed"]) == (N // 2, N // 2)
    reason = "the stream's data event 3 is not a JSON object: b'keep-alive'"
    assert [e for e in result["errors"] if e] == [reason] * (N // 2)
    # A failed request counts no token: only the good streams make the output.
    assert result["total_output_tokens"] == 4 * (N // 2)
