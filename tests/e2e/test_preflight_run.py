"""End to end: the real CLI refuses, in one line and before anything starts, a run whose results
cannot be written, whose server flags make no URL, with too many workers or an open-file limit
too low for its connections; it masks a URL's password and hints at a doubled path; and a
result file that cannot be written at the end is one line and exit 1, the records kept."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    InProcess,
    cli,
    cli_as_nobody,
    free_port,
    hang_guard,
    loadgen,
    locked_directory,
    refusal,
)

from loadgen.config import available_cores

SMALL = ["--random-input-len", "16", "--random-output-len", "4", "--disable-tqdm"]
DENIED = "a file cannot be created there (Permission denied)"  # the probe's failure
STARTED = "Starting main benchmark run"  # printed once the workers and the server are ready


def refused(proc: subprocess.CompletedProcess[str] | InProcess, code: int) -> str:
    """The one error line of a run refused before it started (exit ``code``)."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert STARTED not in proc.stdout and "Model not specified" not in proc.stdout
    return proc.stderr.strip().splitlines()[-1]


def test_a_result_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result_dir = tmp_path / "file" / "results"
    proc = refusal("--mock", "--save-result", "--result-dir", str(result_dir))
    assert refused(proc, 1) == (
        f"error: --result-dir {result_dir}: {tmp_path / 'file'} is not a directory"
    )
    assert proc.stderr.count("\n") == 1


def test_a_result_dir_that_cannot_be_written(tmp_path: Path) -> None:
    with locked_directory(tmp_path) as locked:
        # As root the run is another user's, in process: root writes anywhere.
        code, stderr = cli_as_nobody("run", "--mock", "--save-result", "--result-dir", str(locked))
    assert code == 1
    assert stderr.strip().splitlines() == [
        f"error: --result-dir {locked}: {locked} is not writable: {DENIED}"
    ]


def test_a_result_filename_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "out.json").mkdir()
    proc = refusal(
        "--mock", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "out.json"
    )
    assert refused(proc, 1) == (
        f"error: --result-filename out.json: {tmp_path / 'out.json'} is a directory"
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_result_file_that_cannot_be_written_at_the_end(tmp_path: Path) -> None:
    # The result file is a link to /dev/full: it passes the checks, and writing it fails as
    # on a full disk. The records file beside it is written during the run and kept.
    (tmp_path / "out.json").symlink_to("/dev/full")
    proc = loadgen(
        "--mock", "--num-prompts", "10", *SMALL, "--save-result",
        "--result-dir", str(tmp_path), "--result-filename", "out.json",
    )  # fmt: skip
    records = tmp_path / "out.records.arrow"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Successful requests:" in proc.stdout  # the summary was printed
    assert proc.stderr.strip() == (
        f"error: cannot write the result file {tmp_path / 'out.json'}: No space left on device; "
        f"the run's records are in {records} (loadgen report {records} --save-result "
        "--result-dir DIR rebuilds it)"
    )
    rebuilt = cli("report", str(records), "--save-result", "--result-dir", str(tmp_path / "again"))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert len(list((tmp_path / "again").glob("*.json"))) == 1


def test_too_many_workers() -> None:
    most = 4 * available_cores()
    proc = refusal("--mock", "--workers", str(most + 1))
    assert proc.returncode == 2
    assert f"--workers {most + 1} is more than 4 per available core" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-url", "localhost:8000"],
         "--base-url localhost:8000: needs http:// or https:// before the host"),
        (["--base-url", "http://h:99999"],
         "--base-url http://h:99999: not a URL (port out of range"),
        (["--port", "0"], "--port must be in 1..65535, got 0"),
        (["--host", ""], "--host '': empty"),
    ],
)  # fmt: skip
def test_bad_server_flags_are_refused_before_the_workers_start(args, message) -> None:
    proc = refusal(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert STARTED not in proc.stdout


def test_a_password_in_the_url_never_shows() -> None:
    port = free_port()  # nothing listens: model discovery fails, naming the URL
    proc = loadgen("--base-url", f"http://me:s3cret@127.0.0.1:{port}", "--num-prompts", "2")
    assert proc.returncode == 1
    assert f"http://me:***@127.0.0.1:{port}/v1/models" in proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr
    # The workers' connection error too: with --model, discovery is skipped.
    proc = loadgen(
        "--base-url", f"http://me:s3cret@127.0.0.1:{port}", "--model", "loadgen-mock",
        "--num-prompts", "2", "--workers", "1", *SMALL,
    )  # fmt: skip
    assert proc.returncode == 1
    assert f"cannot connect to the server at http://me:***@127.0.0.1:{port}" in proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr
    # A bad URL's password, and a password with an Authorization header (aiohttp refuses both).
    proc = refusal("--base-url", "http://me:s3cret@h:99999")
    assert proc.returncode == 2 and "me:***@h" in proc.stderr and "s3cret" not in proc.stderr
    proc = refusal("--base-url", "http://me:s3cret@h:8000", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 2
    assert "OPENAI_API_KEY sets an Authorization header" in proc.stderr
    assert "s3cret" not in proc.stderr


def test_a_doubled_v1_gets_a_hint() -> None:
    port = free_port()
    proc = loadgen(
        "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "loadgen-mock",
        "--num-prompts", "2", "--workers", "1", *SMALL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/v1/completions"
    assert (
        f"warning: --base-url http://127.0.0.1:{port}/v1 ends with /v1 and --endpoint "
        f"/v1/completions (the default) starts with it: requests go to {url}; drop /v1 from "
        "--base-url unless the server serves that path\n"
    ) in proc.stdout
    assert f"cannot connect to the server at {url}" in proc.stderr


def test_an_open_file_limit_too_low_for_the_concurrency() -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    proc = subprocess.run(
        [sys.executable, "-m", "loadgen", "run", "--mock", "--max-concurrency", "1000",
         "--workers", "1"],
        capture_output=True, text=True, timeout=hang_guard(60), preexec_fn=low_limit,
    )  # fmt: skip
    assert refused(proc, 1) == (
        "error: the open-file limit is 256, and a worker may hold 1000 connections at once "
        "(--max-concurrency 1000): 1064 open files with its own. Raise the limit (ulimit -n "
        "1064 in the shell that starts loadgen; above the hard limit: nofile in "
        "/etc/security/limits.conf, LimitNOFILE= for a systemd service, docker run --ulimit "
        "nofile=1064) or lower --max-concurrency"
    )


def test_the_soft_limit_is_raised_for_the_run(tmp_path: Path) -> None:
    def low_soft_limit() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"the hard open-file limit ({hard}) is below what this run needs")
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen", "run", "--mock", "--max-concurrency", "1000",
         "--workers", "1", "--num-prompts", "10", *SMALL],
        capture_output=True, text=True, timeout=hang_guard(60), preexec_fn=low_soft_limit,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "open-file limit" not in proc.stdout + proc.stderr
