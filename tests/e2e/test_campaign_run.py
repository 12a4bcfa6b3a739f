"""A campaign (issue 16 point 3): a 2x2 grid of --max-concurrency and --request-rate, 2 runs
each, through the real CLI, real workers and the embedded mock, in one process start."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from helpers import hang_guard, refusal

from loadgen.report.campaign_summary import write_summary_csv
from loadgen.report.html_campaign import campaign_points, point_figures, read_reports

# The real CLI, with the worker processes it starts counted (pids, on stderr at exit).
COUNTING_CLI = """
import atexit, sys
import loadgen.fleet.fanout as fanout
started = []
real_start = fanout.start_without_main
def counting_start(processes):
    real_start(processes)
    started.extend(process.pid for process in processes)
fanout.start_without_main = counting_start
atexit.register(lambda: print(f"worker pids: {sorted(started)}", file=sys.stderr))
from loadgen.cli import main
main()
"""
GRID = ["--max-concurrency", "2,4", "--request-rate", "200,inf", "--num-runs", "2"]
SMALL = ["--num-prompts", "24", "--random-input-len", "16", "--random-output-len", "8",
         "--mock-ttft-ms", "5", "--mock-itl-ms", "2", "--workers", "2",
         "--disable-tqdm"]  # fmt: skip
POINTS = [
    "max_concurrency=2-request_rate=200.0",
    "max_concurrency=2-request_rate=inf",
    "max_concurrency=4-request_rate=200.0",
    "max_concurrency=4-request_rate=inf",
]


def counted_run(*args: str) -> subprocess.CompletedProcess[str]:
    """``loadgen run --mock ARGS`` in its own process, its workers counted."""
    return subprocess.run(
        [sys.executable, "-c", COUNTING_CLI, "run", "--mock", *args],
        capture_output=True, text=True, timeout=hang_guard(180),
    )  # fmt: skip


def worker_pids(stderr: str) -> list[int]:
    (line,) = [line for line in stderr.splitlines() if line.startswith("worker pids: ")]
    return json.loads(line.removeprefix("worker pids: "))


def test_a_grid_with_repeats_runs_on_workers_started_once(tmp_path: Path) -> None:
    proc = counted_run(*GRID, *SMALL, "--result-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert len(worker_pids(proc.stderr)) == 2  # one pool, the grid's 8 runs on it
    (folder,) = tmp_path.iterdir()
    assert folder.name.startswith("campaign-openai-200.0,infqps-concurrency2,4-loadgen-mock-")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*POINTS, "summary.csv", "report.html"]
    )
    for point in POINTS:
        names = sorted(p.name for p in (folder / point).iterdir())
        assert names == [
            f"{point}-run=0.json",
            f"{point}-run=0.records.arrow",
            f"{point}-run=1.json",
            f"{point}-run=1.records.arrow",
        ]
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [row["point"] for row in rows] == POINTS
    for row, point in zip(rows, POINTS, strict=True):
        results = [
            json.loads((folder / point / f"{point}-run={k}.json").read_text()) for k in (0, 1)
        ]
        assert [r["max_concurrency"] for r in results] == [int(row["max_concurrency"])] * 2
        assert row["runs_ok"] == "2" and row["error"] == ""
        for key in ("mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_itl_ms",
                    "request_throughput", "output_throughput"):  # fmt: skip
            expected = sum(r[key] for r in results) / 2  # the runs' own result JSONs
            assert abs(float(row[f"{key}_mean_of_runs"]) - expected) < 1e-3, key
        assert float(row["completed_mean_of_runs"]) == 24
        assert not [key for key in row if "ci95" in key]  # 2 runs: no interval
    assert (
        "means across runs; no interval: 2 run(s) at this point; intervals need >= 3 (--num-runs)"
        in proc.stdout.splitlines()
    )
    rates = [
        json.loads((folder / p / f"{p}-run=0.json").read_text())["request_rate"] for p in POINTS
    ]
    assert rates == [200.0, "inf", 200.0, "inf"]
    run_lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(run_lines) == 8 and run_lines[-1].startswith(
        "[8/8] max_concurrency=4-request_rate=inf run=1: 24 completed"
    )
    assert "Campaign written to" in proc.stdout


def test_steady_state_trims_and_says_how_many(tmp_path: Path) -> None:
    proc = counted_run("--max-concurrency", "4", "--steady-state", *SMALL,
                       "--result-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.iterdir()
    (row,) = csv.DictReader((folder / "summary.csv").open())
    trimmed = int(row["steady_state_trimmed"])
    assert 0 < trimmed < 24
    assert float(row["completed"]) == 24 - trimmed
    assert f", {trimmed} trimmed," in proc.stdout


def test_a_single_value_is_a_plain_run(tmp_path: Path) -> None:
    proc = counted_run("--max-concurrency", "4", *SMALL, "--save-result",
                       "--result-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result,) = tmp_path.glob("*.json")
    assert result.name.startswith("openai-infqps-concurrency4-loadgen-mock-")
    assert json.loads(result.read_text())["max_concurrency"] == 4
    assert "Campaign" not in proc.stdout


def test_a_bad_list_is_one_line_naming_the_flag() -> None:
    proc = refusal("--mock", "--max-concurrency", "2,x", *SMALL)
    assert proc.returncode == 2
    assert "--max-concurrency" in proc.stderr and "'x' is not an integer" in proc.stderr


# The counting CLI, with worker 0 of the first pool killed as the campaign's second run begins.
KILLING_CLI = COUNTING_CLI.replace(
    "from loadgen.cli import main",
    """import os, signal
real_next_run = fanout.WorkerPool.next_run
runs = []
def next_run(self, workers):
    runs.append(self)
    if len(runs) == 2:
        os.kill(self.processes[0].pid, signal.SIGKILL)
        self.processes[0].join(10)
    real_next_run(self, workers)
fanout.WorkerPool.next_run = next_run
from loadgen.cli import main""",
)


def test_a_pool_that_lost_a_worker_is_replaced_for_the_next_runs(tmp_path: Path) -> None:
    """The run on the broken pool fails and says why; the session closes that pool and starts
    a new one, on which the remaining runs complete."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLING_CLI, "run", "--mock", "--max-concurrency", "4",
         "--num-runs", "3", *SMALL, "--result-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=hang_guard(180),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "1 of 3 runs failed; summary.csv says why" in proc.stderr
    assert len(worker_pids(proc.stderr)) == 4  # the first pool's 2, then a new pool's 2
    run_lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert [line.split(": ", 1)[1].split()[0] for line in run_lines] == ["24", "failed:", "24"]
    (folder,) = tmp_path.iterdir()
    (row,) = csv.DictReader((folder / "summary.csv").open())
    assert row["runs_ok"] == "2" and "run=1: " in row["error"]


def test_three_runs_give_intervals_that_the_records_give_again(tmp_path: Path) -> None:
    proc = counted_run("--max-concurrency", "2", "--num-runs", "3", *SMALL,
                       "--result-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (row,) = csv.DictReader((folder / "summary.csv").open())
    for key in ("p99_ttft_ms", "median_itl_ms", "mean_e2el_ms", "request_throughput"):
        mean = float(row[f"{key}_mean_of_runs"])
        low, high = float(row[f"{key}_ci95_low"]), float(row[f"{key}_ci95_high"])
        assert 0 <= low <= mean <= high, key
    assert any("[95 % interval" in line for line in proc.stdout.splitlines())
    # `loadgen report`'s reading of the folder gives summary.csv again, byte for byte
    points = campaign_points(folder)
    read_reports(points)
    settings = points[0].reports[0].summary.settings
    rows = point_figures(points, 3, settings.steady_state, settings.percentiles)
    write_summary_csv(str(tmp_path / "again.csv"), rows)
    assert (tmp_path / "again.csv").read_bytes() == (folder / "summary.csv").read_bytes()
