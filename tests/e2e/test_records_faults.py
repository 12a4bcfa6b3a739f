"""A records file after a crash or a full disk: the real CLI runs against the embedded mock,
its records file is cut or its disk fills, and the real `loadgen report` and `loadgen compare`
read every complete batch of what is left."""

from __future__ import annotations

import itertools
import random
import re
import resource
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
from click.testing import CliRunner
from helpers import hang_guard, run_in_process

from loadgen.cli.compare import compare_command
from loadgen.cli.report import report_command
from loadgen.records.arrow_file import END_KEY, MAGIC_LEN

# 100 requests a second: the file writes the batches of each second as one (~20 KB), so a run
# of 300 has batches to cut between and a disk fills after its first.
RUN = ["--mock", "--workers", "2", "--random-input-len", "16", "--random-output-len", "16",
       "--request-rate", "100", "--disable-tqdm", "--save-result"]  # fmt: skip


def batch_ends(data: bytes) -> list[tuple[int, int]]:
    """(the byte where each row batch ends, the successful requests up to it)."""
    source = pa.BufferReader(pa.py_buffer(data[MAGIC_LEN:]))
    stream = ipc.open_stream(source)
    ends, done = [], 0
    for batch, custom in stream.iter_batches_with_custom_metadata():
        if custom is not None and END_KEY in custom:
            break
        done += sum(batch.column("success").to_pylist())
        ends.append((MAGIC_LEN + source.tell(), done))
    return ends


def successful(stdout: str) -> int:
    (count,) = re.findall(r"^Successful requests:\s+(\d+)", stdout, re.MULTILINE)
    return int(count)


def test_a_file_cut_at_any_byte_reports_every_complete_batch(tmp_path: Path) -> None:
    live = tmp_path / "live"
    proc = run_in_process(*RUN, "--num-prompts", "300", "--result-dir", str(live))
    assert proc.returncode == 0, proc.stderr
    (whole,) = live.glob("*.records.arrow")
    data = whole.read_bytes()
    ends = batch_ends(data)
    assert len(ends) >= 3, ends  # batches to cut between
    rng = random.Random(27)
    # Inside each of the first batches, at a boundary, and anywhere (the footer included).
    cuts = [rng.randrange(a, b) for (a, _), (b, _) in itertools.pairwise(ends)][:6]
    cuts += [ends[1][0], ends[1][0] + 1, *rng.sample(range(ends[0][0], len(data)), 6)]
    cut = tmp_path / "cut.records.arrow"
    for offset in cuts:
        cut.write_bytes(data[:offset])
        complete = max([done for end, done in ends if end <= offset], default=0)
        report = CliRunner().invoke(report_command, [str(cut)])
        assert report.exit_code == 0, (offset, report.output)
        if offset < ends[-1][0]:
            assert successful(report.stdout) == complete, offset
            assert "the run did not end" in report.stderr
        compared = CliRunner().invoke(compare_command, [str(whole), str(cut), "--resamples", "20"])
        assert compared.exit_code == 0, (offset, compared.output)
        assert "nan" not in compared.stdout
    # The real CLI in its own process: one note, no traceback.
    cut.write_bytes(data[: cuts[0]])
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen", "report", str(cut)],
        capture_output=True, text=True, timeout=hang_guard(120),
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "Serving Benchmark Result" in proc.stdout


def full_disk_at(size: int):
    """A child whose files cannot grow past ``size`` bytes (write fails with EFBIG, as on a
    full disk; Python ignores SIGXFSZ)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def run_with_disk(directory: Path, size: int, n: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadgen", "run", *RUN, "--num-prompts", str(n),
         "--result-dir", str(directory)],
        capture_output=True, text=True, timeout=hang_guard(120), preexec_fn=full_disk_at(size),
    )  # fmt: skip


def test_a_full_disk_stops_the_records_with_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_with_disk(out, 40_000, 300)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning: records")]
    assert len(warnings) == 1 and "File too large; the records stop here" in warnings[0]
    assert "Serving Benchmark Result" in proc.stdout and "Results written to" in proc.stdout
    assert "Traceback" not in proc.stderr
    # The run's own report has every request: the rows the file refused were kept in memory.
    assert successful(proc.stdout) == 300
    (records,) = out.glob("*.records.arrow")
    assert records.stat().st_size == 40_000  # cut inside a batch
    report = CliRunner().invoke(report_command, [str(records)])
    assert report.exit_code == 0, report.output
    assert 0 < successful(report.stdout) < 300
    assert "the run did not end" in report.stderr


def test_a_disk_too_full_for_the_result_leaves_no_empty_result_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_with_disk(out, 2_000, 100)  # not even the records file's schema fits
    assert proc.returncode == 1, proc.stderr
    assert "Serving Benchmark Result" in proc.stdout  # the summary, before the error
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith("error: cannot write the result file") and "File too large" in error
    assert "Traceback" not in proc.stderr
    assert not list(out.glob("*.json"))


def test_a_torn_file_of_a_duration_run_reads_past_its_first_block(tmp_path: Path) -> None:
    # Blocks of 8 over 2 s: most rows belong to blocks the file's start did not know of.
    live = tmp_path / "live"
    proc = run_in_process(*RUN, "--duration", "2s", "--max-concurrency", "4",
                          "--duration-block", "8", "--result-dir", str(live))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (whole,) = live.glob("*.records.arrow")
    data = whole.read_bytes()
    ends = batch_ends(data)
    offset, complete = ends[-1]  # every batch, no end: as a kill -9 leaves it
    assert complete > 8
    cut = tmp_path / "cut.records.arrow"
    cut.write_bytes(data[:offset])
    report = CliRunner().invoke(report_command, [str(cut)])
    assert report.exit_code == 0, report.output
    assert successful(report.stdout) == complete
    assert "the run did not end" in report.stderr
    assert "ran out of requests" not in report.output
