"""End to end against the mock playing llama.cpp's server with no local tokenizer: the output
re-tokenised through the server's /tokenize after the run (the session used to be closed by
then: `RuntimeError: Session is closed`, no summary, no JSON), Ctrl-C in that setup, and
pre-opening against a server with fewer HTTP threads than the run's concurrency."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers import (
    hang_guard,
    mock_server,
    only_json,
    run_against_mock,
    start_loadgen,
    startups,
    wait_for_t0,
)

MODEL = "acme/no-local-tokenizer-7b"  # not in any cache; HF_HUB_OFFLINE keeps it that way
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}
CHAT = ("--backend", "openai-chat", "--endpoint", "/v1/chat/completions")
NO_USAGE = ("--extra-body", '{"stream_options": {"include_usage": false}}')


def run_args(tmp_path: Path, *args: str) -> list[str]:
    return [
        "--random-input-len", "16", "--random-output-len", "8", "--save-result",
        "--save-detailed", "--result-dir", str(tmp_path), *args,
    ]  # fmt: skip


def llamacpp(*args: str) -> tuple[str, ...]:
    """The mock's arguments to play llama.cpp serving a model no local tokenizer knows."""
    return ("--personality", "llamacpp", "--model", MODEL, *args)


@pytest.fixture
def hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE=1 for the runs in this process (loadgen reads it when it looks for a
    tokenizer) and the processes they start."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def run_against_llamacpp(
    tmp_path: Path, *args: str, mock_args: tuple[str, ...] = ()
) -> tuple[dict, float]:
    """``loadgen run ARGS`` against a llamacpp mock, its coordinator in this process (the caller
    asks for ``hub_offline``); the result, and the first request's instant after launch in
    seconds (start_times are perf_counter instants: CLOCK_MONOTONIC, shared)."""
    run = run_against_mock(
        *run_args(tmp_path, "--disable-tqdm", *args), mock_args=llamacpp(*mock_args)
    )
    proc = run.proc
    assert proc.returncode == 0, proc.stderr
    assert "Session is closed" not in proc.stderr
    result = only_json(tmp_path)
    return result, min(result["start_times"]) - run.launched


@pytest.mark.usefixtures("hub_offline")
def test_output_is_retokenised_through_the_server_after_the_run(tmp_path: Path) -> None:
    result, _ = run_against_llamacpp(
        tmp_path, *CHAT, *NO_USAGE, "--num-prompts", "40", "--max-concurrency", "4"
    )
    assert (result["completed"], result["failed"]) == (40, 0)
    # No usage came: every output length is the server's count of the generated text.
    assert result["output_lens"] == [8] * 40


@pytest.mark.usefixtures("hub_offline")
def test_completions_against_llamacpp_without_a_local_tokenizer(tmp_path: Path) -> None:
    result, _ = run_against_llamacpp(tmp_path, "--num-prompts", "40")
    assert (result["completed"], result["failed"], result["total_output_tokens"]) == (40, 0, 320)


def test_ctrl_c_mid_run_reports_what_finished(tmp_path: Path) -> None:
    with mock_server(*llamacpp(), itl_ms=20.0) as url:  # 8 tokens: each stream lasts ~150 ms
        proc = start_loadgen(
            "--base-url", url, *run_args(tmp_path, *CHAT, *NO_USAGE, "--num-prompts", "2000",
                                         "--max-concurrency", "4"),
            env=OFFLINE,
        )  # fmt: skip
        wait_for_t0(proc)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=hang_guard(60))
    assert proc.returncode == 130, err
    assert "Session is closed" not in err
    assert "Serving Benchmark Result" in out
    result = only_json(tmp_path)
    assert result["completed"] > 0
    assert result["loadgen"]["interrupted"] is True


@pytest.mark.usefixtures("hub_offline")
def test_preopening_stops_at_the_servers_threads_and_never_stalls_t0(tmp_path: Path) -> None:
    # 4 HTTP threads, each held by an idle connection; 32 connections would be pre-opened.
    # Those beyond the threads wait for an idle one to close (the keep-alive timeout, set to
    # the bound): pre-opening must give up. The whole start-up (imports, tokenizer, dataset)
    # takes about one trivial run (startup_s) on any machine, and pre-opening at most about
    # another (its budget, workers/pool.py); a stalled pre-open adds the keep-alive timeout.
    bound_s = startups(3)
    result, started_s = run_against_llamacpp(
        tmp_path, "--tokenizer", "loadgen-mock", "--num-prompts", "200",
        "--max-concurrency", "32", "--workers", "2",
        mock_args=("--http-threads", "4", "--keepalive-timeout", f"{bound_s:.2f}"),
    )  # fmt: skip
    assert (result["completed"], result["failed"]) == (200, 0)
    assert result["loadgen"]["connections_preopened"] <= 4
    print(f"first request {started_s:.2f} s after launch; bound {bound_s:.2f} s")
    assert started_s < bound_s, f"the first request went out {started_s:.1f} s after launch"


@pytest.mark.usefixtures("hub_offline")
def test_a_server_answering_503_while_it_loads_is_waited_for(tmp_path: Path) -> None:
    # llama.cpp opens its port at once and answers 503 "Loading model" until the model is in.
    result, started_s = run_against_llamacpp(
        tmp_path, "--tokenizer", "loadgen-mock", "--num-prompts", "20",
        "--ready-check-timeout-sec", "30", "--ready-check-interval-sec", "0.2",
        mock_args=("--startup-delay", "2"),
    )  # fmt: skip
    assert (result["completed"], result["failed"]) == (20, 0)
    assert started_s >= 2.0  # nothing was measured before the server could answer
