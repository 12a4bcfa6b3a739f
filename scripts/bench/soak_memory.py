"""A soak: does the coordinator's memory stay flat over a long run bounded by time?

One real ``loadgen run --mock --duration D`` at a paced rate (``--request-rate``, requests of
``--output-len`` tokens streamed every ``--itl-ms``: rate x output-len token events a second),
``--save-result`` into a temporary directory, and every ``--every`` seconds a row: the
coordinator's RSS (the ``loadgen run`` process alone), its workers' RSS (its children but the
mock), and the coordinator's CPU over the interval. At the end: the least-squares slope of the
coordinator's RSS over the run's second half (MB per hour; flat: near 0, whatever the level),
its last sample over the one at the end of the first interval, the run's own figures (requests,
events, the records file's size) and the coordinator's peak.

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/soak_memory.py --duration 3600
    .venv/bin/python scripts/bench/soak_memory.py --duration 300 --every 10   # a short one
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from common import loadgen_command, machine_line

MB = 1e6


def rss(proc: psutil.Process) -> int:
    """A process's resident set (bytes); 0 once it is gone."""
    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


def cpu_s(proc: psutil.Process) -> float:
    """A process's own CPU seconds so far (0 once it is gone)."""
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def worker_rss(proc: psutil.Process) -> int:
    """The RSS of the coordinator's children but the embedded mock (its workers)."""
    total = 0
    try:
        children = proc.children()
    except psutil.Error:
        return 0
    for child in children:
        try:
            if "loadgen.mock" in " ".join(child.cmdline()):
                continue
        except psutil.Error:
            continue
        total += rss(child)
    return total


def main() -> None:
    """Run the soak and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of the run")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--request-rate", type=float, default=20.0)
    parser.add_argument("--output-len", type=int, default=200)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    events_s = args.request_rate * args.output_len
    print(machine_line("soak_memory.py: the coordinator's memory over a --duration run"))
    print(f"--duration {args.duration:g} s at {args.request_rate:g} req/s x {args.output_len} "
          f"tokens: {events_s:,.0f} token events/s planned")  # fmt: skip
    with tempfile.TemporaryDirectory() as workdir:
        command = [
            *loadgen_command(), "run", "--mock", "--mock-itl-ms", str(args.itl_ms),
            "--random-input-len", "64", "--random-output-len", str(args.output_len),
            "--request-rate", str(args.request_rate), "--duration", f"{args.duration:g}s",
            "--workers", str(args.workers), "--save-result", "--result-dir", workdir,
            "--disable-tqdm", "-q",
        ]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)  # fmt: skip
        coordinator = psutil.Process(proc.pid)
        print(f"{'t (s)':>8} {'coord RSS MB':>13} {'workers RSS MB':>15} {'coord CPU %':>12}")
        samples: list[tuple[float, int]] = []
        peak = 0
        last_cpu, last_t = cpu_s(coordinator), started
        while proc.poll() is None:
            deadline = time.monotonic() + args.every
            while proc.poll() is None and time.monotonic() < deadline:
                peak = max(peak, rss(coordinator))
                time.sleep(0.2)
            if proc.poll() is not None:
                break
            now, used = time.monotonic(), cpu_s(coordinator)
            here = rss(coordinator)
            samples.append((now - started, here))
            share = 100 * (used - last_cpu) / (now - last_t)
            last_cpu, last_t = used, now
            print(f"{now - started:8.0f} {here / MB:13.1f} {worker_rss(coordinator) / MB:15.1f} "
                  f"{share:12.1f}", flush=True)  # fmt: skip
        output = proc.stdout.read() if proc.stdout else ""
        if proc.returncode != 0:
            sys.exit(f"loadgen run exited {proc.returncode}:\n{output[-2000:]}")
        (result_path,) = Path(workdir).glob("*.json")
        result = json.loads(result_path.read_text())
        (records,) = Path(workdir).glob("*.records.arrow")
        records_mb = records.stat().st_size / MB
    print(f"run: {result['completed']:,} completed, {result['total_output_tokens']:,} output "
          f"tokens in {result['duration']:.0f} s; records file {records_mb:.1f} MB; coordinator "
          f"peak RSS {peak / MB:.1f} MB (the report included)")  # fmt: skip
    if len(samples) >= 4:
        t = np.array([s[0] for s in samples])
        mb = np.array([s[1] for s in samples]) / MB
        half = t >= t[-1] / 2
        slope = np.polyfit(t[half], mb[half], 1)[0] * 3600 if half.sum() >= 2 else float("nan")
        print(f"coordinator RSS: first sample {mb[0]:.1f} MB, last {mb[-1]:.1f} MB "
              f"({mb[-1] / mb[0]:.2f}x); second half {slope:+.1f} MB per hour")  # fmt: skip


if __name__ == "__main__":
    main()
