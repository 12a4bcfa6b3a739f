"""The verdict's causes provoked on this machine, each beside the machine's own floor.

Each case is the real CLI (``loadgen run --mock``, 40 requests at 20 requests/s, 16-token
answers), run ``--repeat`` times:

- ``quiet``: ITL 50 ms, TTFT 100 ms, --workers 2; the verdict should be OK;
- ``busy worker``: the same with --workers 1 and the test-only LOADGEN_TEST_WORKER_SPIN_MS=2
  (workers/busy_hook.py), which keeps the worker's loop busy: "workers saturated";
- ``hog``: ITL 1 ms beside a process spinning on every CPU: "host busy";
- ``back to back``: ITL 0, the tokens of an answer written at once: "too fast for this machine"
  (ITLs not resolved);
- ``ITL 2 ms``: a quiet run (TTFT 50 ms) whose ITL is short for this machine, so its wake-up
  delay matters with nothing else to blame: "too fast for this machine" (its own floor).

Before each run the machine's floor is measured (loadgen/wake_floor.py: an idle uvloop
process's timer and datagram wake-up p99, over 2 s). Prints per case how often the expected
cause was named, the medians of the client delay p99, its share of the median it weighs on, the
loop lag p50, the floor p99, the busiest worker's CPU and the CPUs that went to other processes;
then the last verdict line of each case. Run: python scripts/bench/verdict_cases.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from loadgen.report.verdict import HOST_BUSY, SATURATED, TOO_FAST
from loadgen.wake_floor import measure_floor
from workers.busy_hook import SPIN_ENV

PACED = ["--request-rate", "20", "--num-prompts", "40", "--random-input-len", "32",
         "--random-output-len", "16", "--disable-tqdm"]  # fmt: skip
HOG = """
import ctypes, os, sys, time
cpus, seconds = int(sys.argv[1]), float(sys.argv[2])
for _ in range(cpus - 1):
    if os.fork() == 0:
        break
ctypes.CDLL(None).prctl(15, b"cpu-hog", 0, 0, 0)  # PR_SET_NAME
end = time.monotonic() + seconds
while time.monotonic() < end:
    pass
"""
FLOOR_S = 2.0


@dataclass
class Case:
    """One way to provoke a verdict."""

    name: str
    expected: str  # a cause, or "" for OK
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    hog: bool = False


CASES = [
    Case("quiet", "", ["--mock-ttft-ms", "100", "--mock-itl-ms", "50", "--workers", "2"]),
    Case(
        "busy worker",
        SATURATED,
        ["--mock-ttft-ms", "100", "--mock-itl-ms", "50", "--workers", "1"],
        {SPIN_ENV: "2"},
    ),
    Case("hog", HOST_BUSY, ["--mock-itl-ms", "1", "--workers", "2"], hog=True),
    Case("back to back", TOO_FAST, ["--mock-itl-ms", "0", "--workers", "2"]),
    Case("ITL 2 ms", TOO_FAST, ["--mock-ttft-ms", "50", "--mock-itl-ms", "2", "--workers", "2"]),
]


@dataclass
class Outcome:
    """One run: its verdict line, the JSON's client figures and the floor measured before."""

    verdict: str
    client: dict
    floor_p99_ms: float


@contextmanager
def cpu_hog() -> Iterator[None]:
    """A process spinning on every CPU (its own session) for the block."""
    hog = subprocess.Popen(
        [sys.executable, "-c", HOG, str(os.cpu_count() or 1), "600"], start_new_session=True
    )
    try:
        yield
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()


def run_case(case: Case) -> Outcome:
    """The floor, then the case's run (beside its hog, if it has one)."""
    floor = measure_floor(FLOOR_S)
    with tempfile.TemporaryDirectory() as out, cpu_hog() if case.hog else nullcontext():
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", "--mock", *case.args, *PACED,
             "--save-result", "--result-dir", out],
            capture_output=True, text=True, env={**os.environ, **case.env}, timeout=300,
        )  # fmt: skip
        if proc.returncode != 0:
            sys.exit(f"{case.name}: loadgen failed: {proc.stderr.strip().splitlines()[-1]}")
        result = json.loads(next(Path(out).glob("*.json")).read_text())
    return Outcome(result["loadgen"]["verdict"], result["loadgen"]["client"], floor.p99_ms())


def median(values: list[float]) -> float:
    """The median, NaN for none."""
    return statistics.median(values) if values else float("nan")


def row(case: Case, outcomes: list[Outcome]) -> str:
    """One table row: how often the expected verdict came, and the medians of the figures."""
    found = sum(
        (case.expected in o.client["causes"]) if case.expected else not o.client["causes"]
        for o in outcomes
    )
    share = [o.client["delay_share"] or float("inf") for o in outcomes]
    host = [o.client["host"] for o in outcomes if o.client["host"]]
    return (
        f"{case.name:<13} {case.expected or 'OK':<26} {found}/{len(outcomes):<4} "
        f"{median([o.client['delay_p99_ms'] or 0.0 for o in outcomes]):>8.2f} "
        f"{100 * median(share):>7.0f} % "
        f"{median([o.client['loop_lag_p50_ms'] for o in outcomes]):>8.3f} "
        f"{median([o.floor_p99_ms for o in outcomes]):>9.3f} "
        f"{median([max(o.client['worker_cpu_pct']) for o in outcomes]):>7.0f} % "
        f"{median([h['other_pct'] + h['started_pct'] for h in host]):>7.0f} %"
    )


def main() -> None:
    """Run every case --repeat times and print the table and the verdict lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=[c.name for c in CASES])
    args = parser.parse_args()
    cases = [c for c in CASES if c.name in args.cases]
    outcomes = {c.name: [run_case(c) for _ in range(args.repeat)] for c in cases}
    print(
        f"{'case':<13} {'expected':<26} {'found':<6} {'delay p99':>8} {'share':>9} "
        f"{'lag p50':>8} {'floor p99':>9} {'wkr CPU':>9} {'others':>9}"
    )
    print(f"{'':<47} {'ms':>8} {'':>9} {'ms':>8} {'ms':>9}")
    for case in cases:
        print(row(case, outcomes[case.name]))
    print("\nlast verdict line of each case:")
    for case in cases:
        print(f"  {case.name}: {outcomes[case.name][-1].verdict}")


if __name__ == "__main__":
    main()
