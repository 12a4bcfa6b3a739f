"""--fail-on on `loadgen run` and `loadgen report`, `loadgen report --format csv`, and
--append-result's whole lines: the real CLI, workers and mock server."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    cli,
    hang_guard,
    loadgen,
    mock_server,
    mock_stats,
    only_json_path,
    refusal,
    run_in_process,
)

SMALL = ["--random-input-len", "32", "--random-output-len", "8", "--disable-tqdm"]
N = 12


def with_both_streams(*args: str) -> subprocess.CompletedProcess[str]:
    """``loadgen ARGS`` with stderr merged into stdout, as a CI log shows them."""
    return subprocess.run(
        [sys.executable, "-m", "loadgen", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=hang_guard(120),
    )


def run_args(tmp_path: Path, *more: str) -> list[str]:
    return ["run", "--mock", "--workers", "1", "--num-prompts", str(N), *SMALL,
            "--save-result", "--result-dir", str(tmp_path), *more]  # fmt: skip


def test_a_breached_gate_exits_3_and_prints_the_breaches_last(tmp_path: Path) -> None:
    proc = with_both_streams(
        *run_args(tmp_path, "--fail-on", "p99_ttft_ms>0", "--fail-on", "failed>0",
                  "--fail-on", "completed>=12", "--fail-on", "loadgen.send_lag_ms.p99<0"),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout
    lines = proc.stdout.splitlines()
    result = json.loads(only_json_path(tmp_path).read_text())
    p99 = result["p99_ttft_ms"]
    assert p99 > 0
    assert lines[-2:] == [
        f"breached: p99_ttft_ms>0 (measured {p99:.3f})",
        "breached: completed>=12 (measured 12)",
    ]
    assert any(line.startswith("Records written to ") for line in lines[:-2])
    assert result["completed"] == N  # the run itself is whole: its result is written


def test_a_run_that_meets_its_gates_exits_0(tmp_path: Path) -> None:
    proc = run_in_process(
        *run_args(tmp_path, "--fail-on", "failed>0", "--fail-on", "completed<12")[1:]
    )
    assert proc.returncode == 0, proc.stderr
    assert "breached" not in proc.stdout + proc.stderr


def test_a_bad_gate_is_refused_before_anything_is_sent() -> None:
    with mock_server() as url:
        for condition, says in (
            ("p99_tfft_ms>500", "no key p99_tfft_ms in this run's result JSON (close: p99_ttft_ms"),
            ("p99_ttft_ms=>500", "'p99_ttft_ms=>500' is not a condition"),
            ("label>1", "label has no value (null)"),
        ):
            proc = refusal("--base-url", url, "--num-prompts", "4", *SMALL, "--fail-on", condition)
            assert proc.returncode == 2, proc.stderr
            error = proc.stderr.strip().splitlines()[-1]
            assert says in error and "--fail-on" in error, error
            assert not proc.stdout
        assert mock_stats(url)["requests"] == {}  # not even GET /v1/models


def test_report_exports_the_rows_of_a_real_run_and_applies_gates(tmp_path: Path) -> None:
    live = run_in_process(*run_args(tmp_path)[1:])
    assert live.returncode == 0, live.stderr
    result = json.loads(only_json_path(tmp_path).read_text())
    (records,) = tmp_path.glob("*.records.arrow")
    proc = cli("report", str(records), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [int(row["index"]) for row in rows] == list(range(N))
    assert all(row["status"] == "200" and row["success"] == "true" for row in rows)
    assert all(row["request_id"].endswith(f"-{i}") for i, row in enumerate(rows))
    assert sum(int(row["output_tokens"]) for row in rows) == result["total_output_tokens"]
    mean_ttft_ms = sum(float(row["ttft_ms"]) for row in rows) / N  # rows keep 3 decimals
    assert mean_ttft_ms == pytest.approx(result["mean_ttft_ms"], abs=0.001)
    assert "Serving Benchmark Result" in proc.stderr  # the summary moved off the rows

    gated = cli("report", str(records), "--fail-on", "total_output_tokens>1", merged=True)
    assert gated.returncode == 3
    total = result["total_output_tokens"]
    assert gated.stdout.splitlines()[-1] == f"breached: total_output_tokens>1 (measured {total})"
    bad = cli("report", str(records), "--fail-on", "p99_itl_msec>1", merged=True)
    assert bad.returncode == 2 and "Serving Benchmark Result" not in bad.stdout


def test_append_result_twice_gives_two_whole_json_lines(tmp_path: Path) -> None:
    args = ["--mock", "--workers", "1", "--num-prompts", "4", *SMALL, "--append-result",
            "--result-dir", str(tmp_path), "--result-filename", "runs.jsonl"]  # fmt: skip
    for _ in range(2):
        proc = loadgen(*args)
        assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "runs.jsonl").read_text()
    assert text.endswith("\n") and text.count("\n") == 2
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["completed"] == second["completed"] == 4
    extra = second["loadgen"]
    assert extra["command_line"][-4:] == ["--result-dir", str(tmp_path), "--result-filename",
                                          "runs.jsonl"]  # fmt: skip
    assert extra["dataset"]["random_input_len"] == 32 and extra["dataset"]["num_prompts"] == 4
    assert extra["environment"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert list(extra)[-1] == "verdict"
