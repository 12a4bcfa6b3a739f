"""The Python API against the embedded mock: ``loadgen.run(...)`` from a script without a
``__main__`` guard, from stdin and under a running event loop (a notebook's cell), each in a
process of its own; its metrics are the result JSON the same run saved."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import free_port, hang_guard, only_json_path

import loadgen
from loadgen.api import Note
from loadgen.records.event_source import materialized
from loadgen.text.tokenizer import MOCK_MODEL_NAME

SMALL_RUN = (
    "mock=True, num_prompts=20, max_concurrency=4, random_input_len=32, random_output_len=8, "
    "disable_tqdm=True"
)
# No __main__ guard: with multiprocessing's spawn, each worker would run this file again.
SCRIPT = f"""
import json
import loadgen

result = loadgen.run({SMALL_RUN})
print("RESULT " + json.dumps([result.completed, result["failed"], result.exit_code]))
"""
NOTEBOOK_CELL = f"""
import asyncio
import json
import loadgen

async def cell():  # a notebook runs each cell under its event loop
    result = loadgen.run({SMALL_RUN})
    print("RESULT " + json.dumps([result.completed, result["failed"], result.exit_code]))

asyncio.run(cell())
"""


def result_line(proc: subprocess.CompletedProcess[str]) -> list[int]:
    """The script's RESULT line, after checking that it exited cleanly."""
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "died before" not in proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout[-2000:]  # the workers ran none of the script again
    return json.loads(lines[0].removeprefix("RESULT "))


def test_a_script_without_a_main_guard(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=hang_guard(90),
    )
    assert result_line(proc) == [20, 0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.py"]  # no result file unasked


def test_a_script_from_stdin(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-"],
        input=SCRIPT,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=hang_guard(90),
    )
    assert result_line(proc) == [20, 0, 0]


def test_under_a_running_event_loop_as_in_a_notebook(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NOTEBOOK_CELL)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=hang_guard(90),
    )
    assert result_line(proc) == [20, 0, 0]


def test_the_metrics_are_the_saved_result_json_and_the_records_its_records_file(
    tmp_path: Path,
) -> None:
    result = loadgen.run(
        mock=True,
        num_prompts=30,
        max_concurrency=4,
        random_input_len=32,
        random_output_len=8,
        disable_tqdm=True,
        save_result=True,
        result_dir=tmp_path,
    )
    saved = only_json_path(tmp_path)
    assert result.result_file == str(saved)
    assert result.metrics == json.loads(saved.read_text())
    assert result.completed == result["completed"] == 30
    assert result.verdict == result.metrics["loadgen"]["verdict"] == result.summary[-1]
    assert result.records_file is not None
    from_file = loadgen.read_records(result.records_file)
    assert np.array_equal(from_file.records, result.records.records)
    # The run's records follow its file to its final name: their events read back from it.
    events, offsets = materialized(result.records.event_source)
    from_file_events, from_file_offsets = materialized(from_file.event_source)
    assert len(events) > 0 and np.array_equal(from_file_events, events)
    assert np.array_equal(from_file_offsets, offsets)


def test_a_notebook_cell_prints_nothing_and_gets_the_notes(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """As in a notebook: under a running event loop, no disable_tqdm; the worker processes and
    the mock write to the same file descriptors, so capfd sees them too."""

    async def cell() -> loadgen.Result:
        return loadgen.run(
            mock=True,
            num_prompts=8,
            max_concurrency=2,
            random_input_len=32,
            random_output_len=8,
            timeline_itl_thresholds="10,20",  # a flag without effect here: a warning
            save_result=True,
            result_dir=tmp_path,
        )

    result = asyncio.run(cell())
    assert capfd.readouterr() == ("", "")
    assert result.notes[0] == Note(
        "warning", "warning: --timeline-itl-thresholds has no effect without --plot-timeline"
    )
    assert Note("info", "Starting main benchmark run...") in result.notes
    assert result.notes[-2:] == [
        Note("info", f"Results written to {result.result_file}"),
        Note("info", f"Records written to {result.records_file}"),
    ]
    assert all(note.text not in result.summary for note in result.notes)


def test_verbose_prints_what_the_cli_prints(capfd: pytest.CaptureFixture[str]) -> None:
    result = loadgen.run(
        mock=True,
        num_prompts=4,
        random_input_len=16,
        random_output_len=4,
        disable_tqdm=True,
        verbose=True,
    )
    out = capfd.readouterr().out
    shown = "".join(f"{line}\n" for line in [*(n.text for n in result.notes), *result.summary])
    assert sorted(out.splitlines()) == sorted(shown.splitlines())
    assert out.endswith(f"{result.verdict}\n")


def test_a_failed_runs_notes_come_with_its_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(loadgen.BenchmarkError) as failed:
        loadgen.run(
            base_url=f"http://127.0.0.1:{free_port()}",  # nothing listens
            model=MOCK_MODEL_NAME,
            ready_check_timeout_sec=0,
            num_prompts=2,
            random_input_len=8,
            random_output_len=2,
        )
    assert "cannot connect to the server" in str(failed.value)
    assert capfd.readouterr() == ("", "")
    warning, *_ = (note for note in failed.value.notes if note.level == "warning")
    assert warning.text.startswith("WARNING: loadgen sends no temperature")
    assert any(n.text.startswith("Skipping endpoint ready check: ") for n in failed.value.notes)
