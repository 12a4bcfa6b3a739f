"""A run keeps its token events in its records file alone: a run that keeps no records file
spills them to a temporary one, removed at its end, and its result's figures are those its
records give; a run that keeps one reports what `loadgen report` rebuilds from it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import cli, run_in_process

from loadgen.records import events
from loadgen.session import records as session_records

RUN = ["--mock", "--mock-itl-ms", "1", "--workers", "2", "--random-input-len", "16",
       "--random-output-len", "24", "--ignore-eos", "--num-prompts", "60",
       "--max-concurrency", "8", "--disable-tqdm", "--save-result"]  # fmt: skip
FIGURES = ("completed", "total_output_tokens", "mean_itl_ms", "p99_itl_ms", "median_tpot_ms",
           "std_ttft_ms", "max_output_tokens_per_s", "max_concurrent_requests")  # fmt: skip


def test_a_run_without_a_records_file_spills_its_events_to_a_temporary_one_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    made: list[str] = []

    def temporary() -> str:
        made.append(events.temporary_records_path())
        return made[-1]

    monkeypatch.setattr(session_records, "temporary_records_path", temporary)
    out = tmp_path / "out"
    proc = run_in_process(*RUN, "--no-save-records", "--result-dir", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(made) == 1 and Path(made[0]).parent == spill
    assert list(spill.iterdir()) == []
    assert list(out.glob("*.records.arrow")) == []
    (result,) = out.glob("*.json")
    figures = json.loads(result.read_text())
    assert figures["completed"] == 60
    assert figures["total_output_tokens"] == 60 * 24
    assert figures["mean_itl_ms"] > 0.5  # every request's 23 gaps were read back


def test_a_runs_figures_are_those_its_records_file_rebuilds(tmp_path: Path) -> None:
    live, again = tmp_path / "live", tmp_path / "again"
    proc = run_in_process(*RUN, "--save-detailed", "--result-dir", str(live))
    assert proc.returncode == 0, proc.stderr
    (records,) = live.glob("*.records.arrow")
    (result,) = live.glob("*.json")
    rebuilt = cli(
        "report", str(records), "--save-result", "--save-detailed", "--result-dir", str(again)
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    (other,) = again.glob("*.json")
    first, second = json.loads(result.read_text()), json.loads(other.read_text())
    assert {k: first[k] for k in FIGURES} == {k: second[k] for k in FIGURES}
    # Every key (the date stamp aside) the same: the live run read its events back from the
    # file as it was being written, the report from the finished file.
    first.pop("date"), second.pop("date")
    assert sorted(first) == sorted(second)
    assert sum(len(gaps) for gaps in first["itls"]) == 60 * 23  # every ITL, per request
    assert {k: v for k, v in first.items() if v != second[k]} == {}
