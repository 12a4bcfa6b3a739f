"""Time from `loadgen run` starting to its first timed request, with the server already up and
with a server that boots in 5 s.

Each run launches `loadgen mock-server --record-timings` and `loadgen run` (the quick start's
dataset: 1,000 random prompts of 1,024 tokens); the first timed request is the earliest server-side
arrival among the requests carrying the run's request-id prefix, on the same monotonic clock as
the launch instant. "Booting" servers are launched at the same instant as the client with
`--startup-delay`, so their port opens after the delay plus the mock's own tokenizer load.

    python scripts/bench/startup.py [--repeat 3] [--workers 1,2] [--boot-s 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import stop_process

from loadgen.mock.recorder import TimingRecords

PREFIX = "timed-"
DATASET = ["--num-prompts", "1000", "--random-input-len", "1024", "--random-output-len", "16"]


@dataclass(frozen=True)
class Scenario:
    """One row of the table."""

    label: str
    boot_s: float  # 0: the server is up before the client starts
    with_model: bool
    interval_s: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_mock(port: int, boot_s: float, timings: Path) -> tuple[subprocess.Popen, list[int]]:
    """The mock, and a list that receives the perf_counter_ns instant its port opened."""
    mock = subprocess.Popen(
        [sys.executable, "-m", "loadgen.mock", "--port", str(port),
         "--startup-delay", str(boot_s), "--record-timings", str(timings)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    opened: list[int] = []

    def watch() -> None:
        for line in mock.stdout or []:
            if "listening on" in line and not opened:
                opened.append(time.perf_counter_ns())

    threading.Thread(target=watch, daemon=True).start()
    return mock, opened


def one_run(scenario: Scenario, workers: int, folder: Path) -> dict[str, float]:
    """Seconds from launch to the port opening, to the first timed request, and to the end."""
    port = free_port()
    timings = folder / f"timings-{port}.npz"
    if scenario.boot_s == 0:
        mock, opened = start_mock(port, 0, timings)
        while not opened:
            if mock.poll() is not None:
                raise SystemExit("the mock server did not start")
            time.sleep(0.01)
    launched_ns = time.perf_counter_ns()
    if scenario.boot_s > 0:
        mock, opened = start_mock(port, scenario.boot_s, timings)
    model = ["--model", "loadgen-mock"] if scenario.with_model else []
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", "--port", str(port), *model,
             "--workers", str(workers), "--ready-check-timeout-sec", "120",
             "--ready-check-interval-sec", str(scenario.interval_s), *DATASET,
             "--request-id-prefix", PREFIX, "--disable-tqdm"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        ended_ns = time.perf_counter_ns()
    finally:
        stop_process(mock)
    if proc.returncode != 0:
        raise SystemExit(f"loadgen run failed ({scenario.label}): {proc.stderr.strip()}")
    records = TimingRecords.load(timings)
    timed = np.char.startswith(records.request_ids, PREFIX)
    first_ns = int(records.arrival_ns[timed].min())
    return {
        "open_s": max(0.0, (opened[0] - launched_ns) / 1e9) if opened else float("nan"),
        "first_s": (first_ns - launched_ns) / 1e9,
        "wall_s": (ended_ns - launched_ns) / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--boot-s", type=float, default=5.0)
    args = parser.parse_args()
    boot = args.boot_s
    scenarios = [
        Scenario("up", 0, True, 5.0),
        Scenario("up, no --model", 0, False, 5.0),
        Scenario(f"boots {boot:g} s", boot, True, 5.0),
        Scenario(f"boots {boot:g} s, interval 0.5", boot, True, 0.5),
        Scenario(f"boots {boot:g} s, no --model, int. 0.5", boot, False, 0.5),
    ]
    print(
        "Seconds from `loadgen run` starting; medians of "
        f"{args.repeat}. Dataset: {' '.join(DATASET)}; --ready-check-timeout-sec 120."
    )
    header = (
        f"{'server':40} {'workers':>7} {'port open':>9} {'1st timed':>9} "
        f"{'after open':>10} {'run ends':>8}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="loadgen-startup-") as tmp:
        for workers in (int(w) for w in args.workers.split(",")):
            for scenario in scenarios:
                runs = [one_run(scenario, workers, Path(tmp)) for _ in range(args.repeat)]
                median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                after = median["first_s"] - median["open_s"] if scenario.boot_s else float("nan")
                open_text = f"{median['open_s']:9.2f}" if scenario.boot_s else f"{'before':>9}"
                after_text = f"{after:10.2f}" if scenario.boot_s else f"{'':>10}"
                print(
                    f"{scenario.label:40} {workers:7d} {open_text} {median['first_s']:9.2f} "
                    f"{after_text} {median['wall_s']:8.2f}",
                    flush=True,
                )
    print(
        "With --model the tokenizer loads and the dataset builds while the server boots, so the\n"
        "first timed request follows the port opening by the probe's retry interval at most;\n"
        "without --model the tokenizer is known only once /v1/models answers, so preparation\n"
        "starts after the boot."
    )


if __name__ == "__main__":
    main()
