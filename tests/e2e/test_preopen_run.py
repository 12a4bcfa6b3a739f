"""Connections opened before t0, end to end through the real CLI and workers: a pre-open that
falls short says so before t0, with the reason; a pre-opened connection the server closed idle
is re-sent without taking pooling away from the run; and several mock processes share a port
(--reuse-port), as scripts/bench/scale.py runs 20,000 streams."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import psutil
from helpers import hang_guard, mock_stats, run_against_mock, run_in_process
from raw_http_server import Habits, RawServer

from loadgen.mock.process import EmbeddedMockServer


def test_a_preopen_that_falls_short_says_so_before_t0(tmp_path: Path) -> None:
    # llama.cpp's 4 HTTP threads are each held by an idle connection: 32 cannot be opened.
    run = run_against_mock(
        "--num-prompts", "100", "--max-concurrency", "32", "--workers", "2",
        "--random-input-len", "8", "--random-output-len", "4", "--disable-tqdm",
        mock_args=("--personality", "llamacpp", "--http-threads", "4"),
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    out = run.proc.stdout
    warnings = [line for line in out.splitlines() if "connections planned" in line]
    assert len(warnings) == 1, out
    assert warnings[0].startswith("warning: ")
    assert "of the 32 connections planned were opened before t0" in warnings[0]
    # On a busy machine the budget for opening may run out first: the reason then names both.
    assert "the server served no more connections at once)" in warnings[0]
    assert out.index(warnings[0]) < out.index("Serving Benchmark Result")


def test_a_run_whose_preopen_is_complete_has_no_such_warning(tmp_path: Path) -> None:
    run = run_against_mock(
        "--num-prompts", "100", "--max-concurrency", "32", "--workers", "2",
        "--random-input-len", "8", "--random-output-len", "4", "--disable-tqdm",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    assert "connections planned" not in run.proc.stdout


def test_preopened_connections_closed_idle_are_resent_and_pooling_goes_on(tmp_path: Path) -> None:
    # Every pre-opened connection is closed as its first request arrives (an idle timeout
    # that ran out just then): each such request is re-sent once on a new connection, and
    # that says nothing about whether the server keeps connections, so they stay pooled.
    habits = Habits(close_after_stream_s=None, fail_post_after_get=True)
    with RawServer(habits) as server:
        proc = run_in_process(
            "--base-url", f"http://127.0.0.1:{server.port}", "--model", "m",
            "--tokenizer", "loadgen-mock", "--random-input-len", "8", "--random-output-len", "4",
            "--workers", "1", "--max-concurrency", "8", "--num-prompts", "80",
            "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert (result["completed"], result["failed"]) == (80, 0)
    extra = result["loadgen"]
    assert extra["connection_reuse_stopped"] is False
    assert extra["resent_on_stale_connection"] == 8  # one per pre-opened connection
    assert habits.posts == 80
    # The 8 pre-opened connections and the 8 the re-sends opened; the rest reused those.
    assert extra["new_connections_during_run"]["count"] == 8
    assert "no longer reused" not in proc.stdout


def test_mock_processes_with_reuse_port_share_one_port() -> None:
    first = EmbeddedMockServer(extra_args=("--reuse-port",))
    url = first.start()
    second = EmbeddedMockServer(extra_args=("--reuse-port", "--port", url.rsplit(":", 1)[1]))
    try:
        assert second.start() == url
        port = int(url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
        try:
            mock_stats(url)  # both serve: every connection is accepted by one of them
            assert first.process is not None and second.process is not None
            processes = (first.process, second.process)
            # Each process accepts from its queue on its own loop: on a busy machine the last
            # accepts can come after the stats answer, so wait (hang_guard) until all are in.
            deadline = time.monotonic() + hang_guard(10)
            while True:
                counts = [_established(p.pid, port) for p in processes]
                if sum(counts) >= 64 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            for sock in held:
                sock.close()
        assert min(counts) > 0, counts  # the kernel spread 64 connections over both
        assert sum(counts) >= 64
    finally:
        second.stop()
        first.stop()


def test_without_reuse_port_a_second_mock_cannot_take_the_port(tmp_path: Path) -> None:
    first = EmbeddedMockServer()
    url = first.start()
    try:
        port = url.rsplit(":", 1)[1]
        second = EmbeddedMockServer(extra_args=("--port", port), stderr_path=tmp_path / "err")
        try:
            second.start(timeout_s=20)
        except Exception as exc:  # MockServerError: it did not come up
            assert "address already in use" in str(exc).lower() or "did not start" in str(exc)
        else:
            raise AssertionError("a second mock took a port in use")
        finally:
            second.stop()
    finally:
        first.stop()


def _established(pid: int, port: int) -> int:
    """Connections to ``port`` that process ``pid`` has accepted and holds."""
    return sum(
        1
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )
