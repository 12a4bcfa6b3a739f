"""`loadgen report RECORDS`: the live run's summary and result JSON, rebuilt offline from the
records file the run wrote (the real CLI, workers and mock server, then the real report CLI)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import (
    InProcess,
    cli,
    hang_guard,
    only_json,
    only_json_path,
    run_in_process,
    start_loadgen,
    wait_for_t0,
)

SMALL = ["--random-input-len", "64", "--random-output-len", "16"]
FILE_LINES = ("Results written to ", "Records written to ")


def report(*args: str) -> InProcess:
    """``loadgen report ARGS``, in this process (no server anywhere, nothing started)."""
    return cli("report", *args)


def records_file(directory: Path) -> Path:
    """The one records file in ``directory``, named as the result JSON beside it."""
    (path,) = directory.glob("*.records.arrow")
    assert path.name == only_json_path(directory).name.replace(".json", ".records.arrow")
    return path


def report_lines(stdout: str) -> list[str]:
    """What a report printed, less the lines naming the files it wrote."""
    return [line for line in stdout.splitlines() if not line.startswith(FILE_LINES)]


def assert_rebuilt(live_dir: Path, live_stdout: str, tmp_path: Path, *flags: str) -> dict:
    """`loadgen report` on the live run's records prints the live summary and writes the live
    JSON but for ``date``; returns the rebuilt JSON."""
    rebuilt_dir = tmp_path / "rebuilt"
    proc = report(
        str(records_file(live_dir)), "--save-result", "--result-dir", str(rebuilt_dir), *flags
    )
    assert proc.returncode == 0, proc.stderr
    rebuilt_lines = report_lines(proc.stdout)
    assert rebuilt_lines and rebuilt_lines == report_lines(live_stdout)[-len(rebuilt_lines) :]
    live, rebuilt = only_json(live_dir), only_json(rebuilt_dir)
    assert rebuilt["date"] != "" and list(rebuilt) == list(live)
    assert {**rebuilt, "date": None} == {**live, "date": None}
    assert not list(rebuilt_dir.glob("*.records.arrow"))  # a report writes no records
    return rebuilt


def test_a_generation_run_is_rebuilt_exactly(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    proc = run_in_process(
        "--mock", "--mock-ttft-ms", "5", "--mock-itl-ms", "1", "--workers", "2",
        "--num-prompts", "40", *SMALL, "--request-rate", "400", "--max-concurrency", "8",
        "--save-result", "--save-detailed", "--disable-tqdm", "--result-dir", str(live_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rebuilt = assert_rebuilt(live_dir, proc.stdout, tmp_path, "--save-detailed")
    assert rebuilt["completed"] == 40 and len(rebuilt["itls"]) == 40
    assert "============ Serving Benchmark Result ============" in proc.stdout


def test_a_pooling_run_is_rebuilt_exactly(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    proc = run_in_process(
        "--mock", "--workers", "2", "--backend", "openai-embeddings",
        "--endpoint", "/v1/embeddings", "--num-prompts", "30", "--random-input-len", "32",
        "--random-batch-size", "3", "--request-rate", "500", "--max-concurrency", "4",
        "--percentile-metrics", "e2el,client_queue_time", "--disable-tqdm",
        "--save-result", "--result-dir", str(live_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rebuilt = assert_rebuilt(live_dir, proc.stdout, tmp_path)
    assert rebuilt["total_input_sequences"] == 30  # 10 requests of 3 inputs each


def test_an_interrupted_run_is_rebuilt_exactly(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    proc = start_loadgen(
        "--mock", "--mock-itl-ms", "20", "--workers", "2", "--num-prompts", "400",
        *SMALL, "--max-concurrency", "8", "--save-result", "--result-dir", str(live_dir),
    )  # fmt: skip
    wait_for_t0(proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=hang_guard(60))
    assert proc.returncode == 130, stderr
    rebuilt = assert_rebuilt(live_dir, stdout, tmp_path)
    assert rebuilt["loadgen"]["interrupted"] is True
    assert 0 < rebuilt["completed"] < 400


def test_reporting_flags_given_again_apply(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    proc = run_in_process(
        "--mock", "--mock-itl-ms", "1", "--workers", "1", "--num-prompts", "20", *SMALL,
        "--disable-tqdm", "--save-result", "--result-dir", str(live_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "again"
    again = report(
        str(records_file(live_dir)), "--percentile-metrics", "ttft,e2el",
        "--metric-percentiles", "50,90", "--goodput", "e2el:100000", "--label", "again",
        "--metadata", "round=2", "--save-result", "--result-dir", str(out),
        "--result-filename", "again.json",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    result = json.loads((out / "again.json").read_text())
    assert {"p50_ttft_ms", "p90_ttft_ms", "p90_e2el_ms", "request_goodput"} <= set(result)
    assert "p99_ttft_ms" not in result and "mean_itl_ms" not in result
    assert (result["label"], result["round"], result["request_goodput"] > 0) == ("again", "2", True)
    assert "P90 E2EL (ms):" in again.stdout
    # Flags that would change the run itself are not report flags.
    refused = report(str(records_file(live_dir)), "--num-prompts", "5")
    assert refused.returncode == 2 and "--num-prompts" in refused.stderr


def test_a_crashed_runs_records_still_report(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    proc = run_in_process(
        "--mock", "--workers", "1", "--num-prompts", "20", *SMALL, "--disable-tqdm",
        "--save-result", "--result-dir", str(live_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path = records_file(live_dir)
    cut = tmp_path / "cut.records.arrow"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])  # no end, no footer
    proc = report(str(cut))
    assert proc.returncode == 0, proc.stderr
    assert "============ Serving Benchmark Result ============" in proc.stdout
    assert "the run did not end" in proc.stderr
    assert "client: not judged: the run did not end" in proc.stdout


def test_a_file_that_is_not_records_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "result.json"
    bad.write_text("{}")
    proc = report(str(bad))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {bad} is not a loadgen records file")


def test_save_records_alone_or_turned_off_and_never_a_secret(tmp_path: Path) -> None:
    secret = "sk-do-not-keep-me"
    only_records = tmp_path / "only-records"
    proc = run_in_process(
        "--mock", "--workers", "1", "--num-prompts", "10", *SMALL, "--disable-tqdm",
        "--save-records", "--result-dir", str(only_records),
        "--header", f"Authorization=Bearer {secret}", f"x-api-key={secret}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not list(only_records.glob("*.json"))
    (path,) = only_records.glob("*.records.arrow")
    assert f"Records written to {path}" in proc.stdout
    assert secret.encode() not in path.read_bytes()
    rebuilt = report(str(path), "--save-result", "--result-dir", str(only_records))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert only_json(only_records)["completed"] == 10

    no_records = tmp_path / "no-records"
    proc = run_in_process(
        "--mock", "--workers", "1", "--num-prompts", "10", *SMALL, "--disable-tqdm",
        "--save-result", "--no-save-records", "--result-dir", str(no_records),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [p.suffix for p in no_records.iterdir()] == [".json"]
    assert "Records written" not in proc.stdout


WRITE_A_BATCH = """
import sys
import numpy as np
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.model import RunStart
from workers.protocol import RECORD_DTYPE
start = RunStart("0", [], {}, "m", None, 2, 1, 0, "", 0, "", None)
ones = np.ones(2, np.int64)
writer = RecordsWriter(sys.argv[1], start, ones, ones, ones, "p-")
writer.start(1, "t", 0)
rows = np.zeros(2, dtype=RECORD_DTYPE)
rows["index"], rows["n_events"], rows["server_queue_s"] = [0, 1], 1, np.nan
writer.write(0, rows, np.array([5, 6], np.int64), {1: "error"}, {0: "text"})
writer.close()
print("pandas" in sys.modules)
"""


def test_writing_records_never_imports_pandas(tmp_path: Path) -> None:
    # pa.array() imports pandas when it is installed: 0.4 s of coordinator CPU at the run's
    # first batch, inside the measured run (seen as +20 % client CPU per event).
    proc = subprocess.run(
        [sys.executable, "-c", WRITE_A_BATCH, str(tmp_path / "r.records.arrow")],
        capture_output=True,
        text=True,
        timeout=hang_guard(60),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_a_duration_run_whose_blocks_were_let_go_is_rebuilt_exactly(tmp_path: Path) -> None:
    # Blocks of 8 at 40 req/s for 2 s: each block's offsets and lengths are let go once its
    # rows are written, and the live report reads them back from the file at the end.
    live_dir = tmp_path / "live"
    proc = run_in_process(
        "--mock", "--mock-ttft-ms", "5", "--mock-itl-ms", "1", "--workers", "2", *SMALL,
        "--duration", "2", "--duration-block", "8", "--request-rate", "40", "--seed", "5",
        "--save-result", "--save-detailed", "--disable-tqdm", "--result-dir", str(live_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rebuilt = assert_rebuilt(live_dir, proc.stdout, tmp_path, "--save-detailed")
    assert rebuilt["num_prompts"] > 8 * 4  # many blocks
    # The offsets read back are the schedule's: a send is late by the dispatcher's lag, not
    # by an offset of -1 (a lost value would put every request seconds late).
    assert 0 <= rebuilt["loadgen"]["send_lag_ms"]["max"] < 1000
    assert rebuilt["total_input_tokens"] > 0
