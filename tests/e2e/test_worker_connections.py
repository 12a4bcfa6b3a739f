"""Connection habits of real servers, end to end through the real CLI and workers, against a
small raw-socket HTTP/1.1 server whose behaviour each test sets exactly: a server that closes
after every stream (as llama.cpp's does, while it advertises keep-alive), one that fails a fresh
connection, one that dies after the first response byte (tests/raw_http_server.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import run_in_process
from raw_http_server import Habits, RawServer


def run(port: int, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = run_in_process(
        "--base-url", f"http://127.0.0.1:{port}", "--model", "m", "--tokenizer", "loadgen-mock",
        "--random-input-len", "8", "--random-output-len", "4", "--disable-tqdm", "--save-result",
        "--save-detailed", "--result-dir", str(tmp_path), *args,
    )  # fmt: skip
    files = list(tmp_path.glob("*.json"))
    return proc, json.loads(files[0].read_text()) if files else {}


@pytest.mark.parametrize(("workers", "concurrency"), [("1", "4"), ("2", "16")])
def test_a_server_that_closes_after_every_stream_loses_no_request(
    tmp_path: Path, workers: str, concurrency: str
) -> None:
    habits = Habits()
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", workers, "--max-concurrency", concurrency,
            "--num-prompts", "300",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (result["completed"], result["failed"]) == (300, 0)
    assert habits.posts == 300  # each request reached the server once: none lost, none twice
    extra = result["loadgen"]
    assert extra["connection_reuse_stopped"] is True
    # Re-sends happen only until reuse stops: a few per worker, not one per request.
    assert 0 < extra["resent_on_stale_connection"] < 30
    assert "connections were no longer reused" in proc.stdout


def test_a_server_that_keeps_connections_sees_no_resend_and_no_new_connection(
    tmp_path: Path,
) -> None:
    habits = Habits(close_after_stream_s=None)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "4",
            "--num-prompts", "100",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    extra = result["loadgen"]
    assert (extra["resent_on_stale_connection"], extra["connection_reuse_stopped"]) == (0, False)
    assert extra["connections_preopened"] == 4
    assert extra["connections_closed_before_use"] == 0
    assert extra["new_connections_during_run"]["count"] == 0
    assert habits.generation_connections == 4


def test_a_fresh_connection_that_fails_is_never_resent(tmp_path: Path) -> None:
    # Every connection's first POST is closed unanswered; pre-opened connections served a GET,
    # so their first POST is a reuse: re-sent once on a fresh connection, which fails again.
    habits = Habits(close_after_stream_s=None, fail_posts_on_fresh=1)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "1",
            "--num-prompts", "3",
        )  # fmt: skip
    assert (proc.returncode, result["failed"]) == (1, 3)
    # The first request went on the pre-opened connection and was re-sent once on a new one;
    # the other two found no pooled connection, so their failure on a new one is final.
    assert (result["loadgen"]["resent_on_stale_connection"], habits.closed_unanswered) == (1, 4)
    assert habits.posts == 0


def test_no_resend_after_a_response_byte(tmp_path: Path) -> None:
    habits = Habits(close_after_stream_s=None, die_after_status_line=True)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "1",
            "--num-prompts", "2",
        )  # fmt: skip
    assert proc.returncode == 1  # every request failed
    assert "every request failed" in proc.stderr
    assert (result["failed"], result["loadgen"]["resent_on_stale_connection"]) == (2, 0)
    assert habits.generation_connections == 2  # the pre-opened one, then a new one: no resend
