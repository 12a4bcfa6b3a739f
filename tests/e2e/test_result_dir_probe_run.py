"""End to end: where the results go is tried before anything is sent, by creating and removing
a probe file there. ``--result-dir /proc/x`` and a read-only mount pass the permission bits (as
root, and /proc is 0555 yet "writable" to os.access), so the whole run was sent and its result
and records lost at the end; now each is one line, exit 1, and the server sees no request.
``loadgen report``'s output paths are checked the same way, before its summary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import InProcess, hang_guard, mock_server, mock_stats
from helpers import cli as in_process

SMALL = ["--num-prompts", "4", "--random-input-len", "8", "--random-output-len", "4"]
PROC_DENIED = "/proc is not writable: a file cannot be created there (No such file or directory)"
READ_ONLY = "a file cannot be created there (Read-only file system)"


def cli(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str] | InProcess:
    """``loadgen ARGS`` (the real CLI): in its own process behind ``prefix`` (unshare ...), else
    in this one (a refusal before anything starts, a report: nothing of its own process)."""
    if not prefix:
        return in_process(*args)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "loadgen", *args],
        capture_output=True,
        text=True,
        timeout=hang_guard(120),
    )


def refused_before_sending(*args: str, prefix: tuple[str, ...] = ()) -> str:
    """The one error line of ``loadgen run ARGS`` against a fresh mock, which got no request."""
    with mock_server() as url:
        proc = cli("run", "--base-url", url, "--tokenizer", "loadgen-mock", *args, prefix=prefix)
        sent = mock_stats(url)["requests"]
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Starting main benchmark run" not in proc.stdout
    assert sent == {}, sent  # not even the model's discovery
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@contextmanager
def read_only_mount(directory: Path) -> Iterator[tuple[str, ...]]:
    """A prefix that runs a command in its own mount namespace, where ``directory`` is a
    read-only bind mount of itself (so nothing outside the command sees the mount; root or a
    user namespace is needed, else the test is skipped)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux)")
    user = () if os.geteuid() == 0 else ("--map-root-user",)
    mount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    prefix = (unshare, "--mount", *user, "sh", "-c", mount, str(directory))
    probe = subprocess.run(
        [*prefix, "sh", "-c", f'! touch "{directory}/probe" 2>/dev/null'], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {probe.stderr.decode().strip()}")
    yield prefix
    assert list(directory.iterdir()) == []  # the probe left nothing, outside the namespace


def test_result_dir_under_proc_is_refused_before_anything_is_sent() -> None:
    line = refused_before_sending(*SMALL, "--save-result", "--result-dir", "/proc/x")
    assert line == f"error: --result-dir /proc/x: {PROC_DENIED}"


def test_a_read_only_mount_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    with read_only_mount(results) as prefix:
        line = refused_before_sending(
            *SMALL, "--save-result", "--result-dir", str(results), prefix=prefix
        )
        assert line == f"error: --result-dir {results}: {results} is not writable: {READ_ONLY}"
        # A directory still to be made under it: the probe goes to the nearest one that exists.
        line = refused_before_sending(
            *SMALL, "--save-result", "--result-dir", str(results / "new"), prefix=prefix
        )
        assert line == (
            f"error: --result-dir {results / 'new'}: {results} is not writable: {READ_ONLY}"
        )


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run's records file, written by a real --mock run."""
    out = tmp_path_factory.mktemp("run")
    proc = cli("run", "--mock", *SMALL, "--disable-tqdm", "--save-result", "--result-dir", str(out))
    assert proc.returncode == 0, proc.stderr
    return next(out.glob("*.records.arrow"))


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--save-result", "--result-dir", "/proc/x"], "--result-dir /proc/x"),
        (["--format", "csv", "--output", "/proc/x/rows.csv"], "--output /proc/x/rows.csv"),
    ],
)
def test_report_output_paths_are_tried_before_the_summary(
    records: Path, args: list[str], culprit: str
) -> None:
    proc = cli("report", str(records), *args)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""  # refused before the summary
    assert proc.stderr.splitlines() == [f"error: {culprit}: {PROC_DENIED}"]


def test_report_into_a_read_only_mount_is_refused(records: Path, tmp_path: Path) -> None:
    with read_only_mount(tmp_path) as prefix:
        proc = cli(
            "report", str(records), "--format", "jsonl", "--output", str(tmp_path / "rows.jsonl"),
            prefix=prefix,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: --output {tmp_path / 'rows.jsonl'}: {tmp_path} is not writable: {READ_ONLY}"
    ]
