"""Waiting out server start-up, end to end: the real CLI (most in process) and worker processes
against a real mock server process on 127.0.0.1 that opens late, answers 503 for a while, lists
no model, or speaks only llama.cpp's /tokenize form."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    InProcess,
    free_port,
    hang_guard,
    loadgen,
    refusal,
    run_in_process,
    server_tokenizer_round_trip,
    start_loadgen,
    startups,
)

from loadgen.mock.recorder import TimingRecords
from loadgen.server.tokenizer import VLLM_FORM
from loadgen.text.tokenizer import load_tokenizer

SMALL = ["--random-input-len", "32", "--random-output-len", "8", "--disable-tqdm"]


def no_wait_bound() -> tuple[str, float]:
    """For a test that a refusal is not a wait: a ready-check timeout (the flag's value, whole
    seconds) of ten start-ups of the CLI on this machine, and the bound on the refusal, half
    that."""
    return str(math.ceil(startups(10))), startups(5)


FAST_RETRY = ["--ready-check-interval-sec", "0.25"]


@contextmanager
def mock_on_port(port: int, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A mock server process on ``port``; the caller does not wait for it to listen."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.mock", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=hang_guard(10))


def wait_listening(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + hang_guard(timeout_s)
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def requests_seen(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/mock/stats", timeout=5) as response:
        return json.load(response)["requests"]


def loadgen_at(port: int, *args: str) -> InProcess:
    """``loadgen run`` with 2 workers against the server on ``port`` (its coordinator in this
    process: what a run waits for and says does not depend on its own process)."""
    return run_in_process("--port", str(port), "--workers", "2", *args)


def error_lines(proc: subprocess.CompletedProcess[str] | InProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def test_run_started_before_a_late_server_completes_without_model(tmp_path: Path) -> None:
    port = free_port()
    with mock_on_port(port, "--startup-delay", "2"):
        proc = loadgen_at(
            port, "--ready-check-timeout-sec", "30", *FAST_RETRY, "--num-prompts", "20", *SMALL,
            "--save-result", "--result-dir", str(tmp_path),
        )  # fmt: skip
        seen = requests_seen(port)
    assert proc.returncode == 0, proc.stderr
    assert "Waiting for the model list: cannot reach" in proc.stdout
    assert "Connection refused" in proc.stdout
    assert "First model name: loadgen-mock" in proc.stdout
    assert "Initial test run completed." in proc.stdout
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert result["completed"] == 20 and result["model_id"] == "loadgen-mock"
    assert seen["POST /v1/completions"] == 21  # the probe, then the run


def test_503s_while_loading_are_waited_out(tmp_path: Path) -> None:
    port = free_port()
    # Long enough that the CLI, started after the port opens, meets several 503s on any machine:
    # its start-up (under one trivial run) leaves two more start-ups of 503s at 0.25 s retries.
    loading_s = max(1.5, startups(3))
    with mock_on_port(port, "--unavailable-for", f"{loading_s:.2f}"):
        wait_listening(port)
        wait_s = math.ceil(loading_s + hang_guard(30))
        proc = loadgen_at(
            port, "--ready-check-timeout-sec", str(wait_s), *FAST_RETRY, "--num-prompts", "10",
            *SMALL,
        )  # fmt: skip
        seen = requests_seen(port)
    assert proc.returncode == 0, proc.stderr
    assert "HTTP 503: The model is loading" in proc.stdout
    assert seen["GET /v1/models"] >= 3
    assert "Successful requests:                     10" in proc.stdout


def test_timeout_zero_makes_exactly_one_attempt() -> None:
    port = free_port()
    with mock_on_port(port, "--unavailable-for", "60"):
        wait_listening(port)
        proc = loadgen_at(port, "--num-prompts", "5", *SMALL)
        seen = requests_seen(port)
    assert proc.returncode == 1
    assert seen == {"GET /v1/models": 1}
    (line,) = error_lines(proc)
    assert "/v1/models answered HTTP 503" in line


def test_server_down_names_the_url_and_the_flag() -> None:
    port = free_port()
    for model in ([], ["--model", "loadgen-mock"]):
        proc = loadgen_at(port, *model, "--num-prompts", "5", *SMALL)
        assert proc.returncode == 1
        (line,) = error_lines(proc)
        assert f"http://127.0.0.1:{port}/" in line
        assert "--ready-check-timeout-sec" in line


def test_an_empty_model_list_is_a_configuration_error_not_a_wait() -> None:
    port = free_port()
    with mock_on_port(port, "--empty-model-list"):
        wait_listening(port)
        wait_s, bound_s = no_wait_bound()
        started = time.monotonic()
        proc = loadgen_at(port, "--ready-check-timeout-sec", wait_s, "--num-prompts", "5", *SMALL)
        elapsed = time.monotonic() - started
        seen = requests_seen(port)
    assert proc.returncode == 1
    assert error_lines(proc) == [
        f"error: no models found on the server at http://127.0.0.1:{port}/v1/models; pass --model"
    ]
    assert seen == {"GET /v1/models": 1}
    assert elapsed < bound_s


def test_probe_and_warmups_carry_the_runs_payload_with_min_tokens() -> None:
    port = free_port()
    with mock_on_port(port):
        wait_listening(port)
        proc = loadgen_at(
            port, "--model", "loadgen-mock", "--ready-check-timeout-sec", "30",
            "--extra-body", '{"min_tokens": 4}', "--num-warmups", "3", "--max-concurrency", "2",
            "--num-prompts", "10", *SMALL,
        )  # fmt: skip
        seen = requests_seen(port)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    order = [
        "Starting initial single prompt test run...",
        "Initial test run completed.",
        "Warming up with 3 requests...",
        "Warmup run completed.",
        "Starting main benchmark run...",
    ]
    assert [lines.index(line) for line in order] == sorted(lines.index(line) for line in order)
    assert seen["POST /v1/completions"] == 1 + 3 + 10
    assert "Successful requests:                     10" in proc.stdout


def test_a_probe_the_server_rejects_fails_fast_with_its_message() -> None:
    port = free_port()
    with mock_on_port(port):
        wait_listening(port)
        wait_s, bound_s = no_wait_bound()
        started = time.monotonic()
        proc = loadgen_at(
            port, "--model", "loadgen-mock", "--ready-check-timeout-sec", wait_s,
            "--extra-body", '{"min_tokens": 50}', "--num-prompts", "5", *SMALL,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        seen = requests_seen(port)
    assert proc.returncode == 1
    (line,) = error_lines(proc)
    assert line.startswith("error: initial test run failed: POST ")
    assert "HTTP 400: min_tokens must be less than or equal to max_tokens=8" in line
    assert seen["POST /v1/completions"] == 1
    assert elapsed < bound_s


def test_warmup_failures_are_counted_not_fatal() -> None:
    port = free_port()
    with mock_on_port(port, "--error-rate", "1"):
        wait_listening(port)
        proc = loadgen_at(
            port, "--model", "loadgen-mock", "--num-warmups", "2", "--num-prompts", "3", *SMALL
        )
    assert "Warmup: 2 of 2 requests failed; the first: POST " in proc.stdout
    assert "Warmup run completed." in proc.stdout
    assert proc.returncode == 1  # every timed request failed too
    assert "every request failed" in proc.stderr


def test_boot_and_dataset_build_overlap(tmp_path: Path) -> None:
    """A boot and a dataset build of about 3 s each reach the first timed request before their
    sum: the build is hidden behind the boot."""
    from loadgen.datasets.random import sample_random_requests
    from loadgen.text.tokenizer import LocalTokenizer

    args = dict(num_requests=1000, input_len=1024, output_len=2, prefix_len=0)
    tokenizer = LocalTokenizer(load_tokenizer("loadgen-mock"))
    started = time.perf_counter()
    sample_random_requests(tokenizer, **args, range_ratio=(0.0, 0.0), seed=0)
    build_s = time.perf_counter() - started
    boot_s = build_s + 1.0  # the server is the later of the two

    port = free_port()
    timings = tmp_path / "timings.npz"
    launched_ns = time.perf_counter_ns()
    mock = subprocess.Popen(
        [sys.executable, "-m", "loadgen.mock", "--port", str(port),
         "--startup-delay", f"{boot_s:.2f}", "--record-timings", str(timings)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    listening_ns: list[int] = []
    watcher = threading.Thread(
        target=lambda: listening_ns.extend(time.perf_counter_ns() for _ in mock.stdout or [])
    )
    watcher.start()
    try:
        proc = loadgen(  # the CLI's own process: its start-up overlaps the server's boot too
            "--port", str(port), "--workers", "2",
            "--model", "loadgen-mock", "--ready-check-timeout-sec", "60", *FAST_RETRY,
            "--num-prompts", "1000", "--random-input-len", "1024", "--random-output-len", "2",
            "--request-id-prefix", "timed-", "--max-concurrency", "16", "--disable-tqdm",
        )  # fmt: skip
    finally:
        mock.terminate()
        mock.wait(timeout=hang_guard(10))
        watcher.join(timeout=hang_guard(10))
    booted_s = (listening_ns[0] - launched_ns) / 1e9  # the port opened (tokenizer load + delay)
    assert proc.returncode == 0, proc.stderr
    records = TimingRecords.load(timings)
    timed = np.char.startswith(records.request_ids, "timed-")
    first_timed_s = (records.arrival_ns[timed].min() - launched_ns) / 1e9
    assert timed.sum() == 1000 and (~timed).sum() == 1  # the probe carries no request id
    print(
        f"first timed request {first_timed_s:.2f} s; boot {booted_s:.2f} s, build {build_s:.2f} s"
    )
    # One after the other, the first timed request would come a whole build after the boot;
    # overlapped, it comes the run's own start-up after it (half a build on a quiet machine, but
    # the start-up and the build do not slow down alike on a busy one).
    assert booted_s < first_timed_s < booted_s + build_s, (first_timed_s, booted_s, build_s)


def test_server_tokenizer_fallback_builds_the_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the model's tokenizer is in no cache
    with mock_on_port(port, "--model", "acme/no-local-tokenizer-7b"):
        wait_listening(port)
        proc = loadgen_at(
            port, "--num-prompts", "40", "--random-input-len", "100", "--random-output-len",
            "4", "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir",
            str(tmp_path),
        )  # fmt: skip
        seen = requests_seen(port)
    assert proc.returncode == 0, proc.stderr
    assert "Using the server's /tokenize and /detokenize" in proc.stdout
    assert "Server tokenizer: vLLM form, vocabulary size 8192, 1 special token(s)" in proc.stdout
    assert seen["POST /tokenize"] >= 40 and seen["POST /detokenize"] >= 40
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    # The mock counts the BOS it adds, so 99 + 1 tokens: the length upstream's formula aims for.
    assert sum(n == 100 for n in result["input_lens"]) >= 36


def test_a_server_tokenizer_build_past_its_timeout_stops_the_run_saying_how_far_it_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the model's tokenizer is in no cache
    args = ["--port", str(port), "--workers", "1", "--num-prompts", "2000",
            "--random-input-len", "100", "--random-output-len", "4", "--disable-tqdm"]  # fmt: skip
    with mock_on_port(port, "--model", "acme/no-local-tokenizer-7b"):
        wait_listening(port)
        proc = run_in_process(*args, "--server-tokenizer-timeout-sec", "0.001")
    assert proc.returncode == 1, proc.stderr
    # "after N s": the time it took, which a busy machine stretches past the timeout's 1 ms
    (line,) = error_lines(proc)
    assert re.fullmatch(
        r"error: building the dataset of 2,000 prompts through the server's /tokenize and "
        r"/detokenize: 0 calls answered after \d+ s; pass --tokenizer to use a local "
        r"tokenizer, or raise --server-tokenizer-timeout-sec",
        line,
    ), proc.stderr
    refused = refusal(*args, "--server-tokenizer-timeout-sec", "0")
    assert refused.returncode == 2
    assert "--server-tokenizer-timeout-sec must be > 0, got 0" in refused.stderr


def test_interrupt_while_waiting_stops_at_once() -> None:
    port = free_port()
    proc = start_loadgen(
        "--port", str(port), "--workers", "1", "--ready-check-timeout-sec", "600",
        "--num-prompts", "5", *SMALL,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Waiting for the model list"):
            break
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=hang_guard(20))
    assert proc.returncode == 130
    assert "interrupted before the run started" in stderr
    assert time.monotonic() - sent < startups(2)  # at once: less than starting the CLI twice


# --- the server tokenizer on its own ----------------------------------------------------------


def test_server_tokenizer_in_vllm_form_against_the_mock() -> None:
    port = free_port()
    with mock_on_port(port):
        wait_listening(port)
        tokenizer, ids, decoded = asyncio.run(
            server_tokenizer_round_trip(f"http://127.0.0.1:{port}")
        )
    local = load_tokenizer("loadgen-mock")
    assert tokenizer.form == VLLM_FORM
    assert tokenizer.vocab_size == 8192  # bisected: the mock refuses ids past its vocabulary
    assert tokenizer.num_special_tokens == 1
    assert ids[0] == local.encode("Hello world, this is a test.", add_special_tokens=False).ids
    assert decoded[:2] == ["Hello world, this is a test.", "Another prompt"]
