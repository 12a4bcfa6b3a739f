"""scripts/bench/coordinator_ingest.py end to end, at a tiny size: the real coordinator takes in
every record of synthetic remote workers over CurveZMQ (the script checks each event and exits
non-zero otherwise), in each mode, and prints its table; a bad --modes is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import hang_guard

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "coordinator_ingest.py"


def ingest(*args: str) -> subprocess.CompletedProcess:
    """Run the script with ``args``."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=hang_guard(50)
    )


def test_every_mode_takes_in_every_event_and_prints_the_table() -> None:
    run = ingest(
        "--workers", "2", "--requests-per-worker", "30", "--events-per-request", "4",
        "--worker-events-per-s", "400", "--repeat", "1",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "RECORDS batches of 5 requests (20 events" in out
    table = [line.split() for line in out.splitlines() if not line.startswith(" ")]
    rows = {row[0]: row for row in table if row and row[0] in ("floor", "bare", "full")}
    assert set(rows) == {"floor", "bare", "full"}, out
    assert rows["floor"][-1] == "1.00"
    assert "bytes per event" in out


def test_an_unknown_mode_is_one_line_and_exit_2() -> None:
    run = ingest("--modes", "floor,fastest")
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .endswith("--modes: unknown fastest (of floor, bare, full)")
    )
