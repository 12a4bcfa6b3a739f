"""A first run: the README's quick start command (the real CLI, workers and embedded mock) prints
upstream's lines and the report and nothing else; ``-q`` prints the report alone; the
temperature warning (of loadgen's) stays for a real server."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from helpers import loadgen, only_json, refusal, run_against_mock

from loadgen.report.summary import SUMMARY_TITLE
from loadgen.report.verdict import VERDICT_HEADS
from loadgen.session.flag_checks import TEMPERATURE_WARNING

README = Path(__file__).parents[2] / "README.md"
# What may come before the report: upstream's lines, and loadgen's lines on the dataset.
BEFORE_REPORT = (
    "Dataset: ",  # built (and cached), or read from the cache
    "note: ",  # prompts not their target length once encoded again (upstream warns too)
    "Skipping endpoint ready check: ",
    "Starting main benchmark run...",
    "Traffic request rate: ",
    "Burstiness factor: ",
    "Maximum request concurrency: ",
)
AFTER_REPORT = ("Results written to ", "Records written to ")


def quick_start_args(num_prompts: str) -> list[str]:
    """The README's quick start ``loadgen run`` arguments, with fewer prompts."""
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"\.venv/bin/loadgen run ([^\n`]+)", quick_start)
    assert command is not None, "no loadgen run command in the README's quick start"
    args = shlex.split(command.group(1))
    args[args.index("--num-prompts") + 1] = num_prompts
    return args


def test_the_quick_start_prints_upstreams_lines_and_the_report(tmp_path: Path) -> None:
    proc = loadgen(*quick_start_args("64"), "--result-dir", str(tmp_path), "--disable-tqdm")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    report_at = lines.index(SUMMARY_TITLE)
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith(VERDICT_HEADS))
    for line in lines[:report_at]:
        assert line.startswith(BEFORE_REPORT), line
    for line in lines[verdict_at + 1 :]:
        assert line.startswith(AFTER_REPORT), line
    assert not any(line.startswith(("tip:", "WARNING")) for line in lines), proc.stdout
    assert only_json(tmp_path)["completed"] == 64


def test_quiet_prints_the_report_alone(tmp_path: Path) -> None:
    proc = loadgen(*quick_start_args("32"), "--result-dir", str(tmp_path), "-q")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == SUMMARY_TITLE and lines[-1].startswith(VERDICT_HEADS), proc.stdout
    assert "Successful requests:                     32        " in lines
    assert proc.stderr == ""  # no progress bar
    assert only_json(tmp_path)["loadgen"]["verdict"] == lines[-1]  # the result is still saved


def test_quiet_still_prints_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    proc = loadgen(
        "--mock", "-q", "--dataset-name", "custom", "--dataset-path", str(missing), timeout=30
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == f"error: --dataset-path {missing}: No such file\n"


def test_the_temperature_warning_stays_for_a_server() -> None:
    run = run_against_mock("--num-prompts", "4", "--random-input-len", "16", "--disable-tqdm")
    assert run.proc.returncode == 0, run.proc.stderr
    assert f"{TEMPERATURE_WARNING}\n" in run.proc.stdout
    assert TEMPERATURE_WARNING.startswith("WARNING: loadgen sends no temperature")


def test_quiet_dry_run_is_refused_for_a_campaign_too() -> None:
    # -q prints a campaign's table (tests/e2e/test_compare_campaigns.py); --dry-run plans one run
    proc = refusal("--mock", "-q", "--max-concurrency", "1,2", "--dry-run")
    assert proc.returncode == 2
    assert "--dry-run plans one run" in proc.stderr
