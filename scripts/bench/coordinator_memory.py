"""Does the coordinator's memory grow with the run's length? Two runs of the same shape, N and
4N requests, and the coordinator's peak RSS in each.

Each run is the real command, ``loadgen run --mock`` (the embedded mock, no pauses: long
outputs as fast as this machine goes), ``--save-result`` into a temporary directory, so the
records file is written as a run has it, and ``--no-dataset-cache``: each run builds its
prompts as a first run does (a cache warmed by an earlier run hid the build's memory, 440 MB
at 40,000 prompts before it encoded them a chunk at a time). The
coordinator's peak RSS is its own (``VmHWM`` of the ``loadgen run`` process, sampled every
20 ms, and its ``ru_maxrss`` written by an atexit hook at its end: the larger), never its
workers' nor the mock's. Printed per length: requests,
token events (counted in the records file), the peak, bytes of peak per event, the records
file's bytes per event, wall time and the coordinator's own CPU seconds; then the long run's
peak over the short one's (flat memory: near 1; everything kept per event: near 4) and the
extra bytes each extra event cost.

Run it under the shared lock:

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/coordinator_memory.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.ipc as ipc
from common import machine_line

# Runs loadgen's command line in this process and, at its exit, writes the process's own peak
# RSS (ru_maxrss, KiB on Linux: its children are not counted) and CPU seconds to the file named
# in argv[1].
RUNNER = """
import atexit, resource, sys
out = sys.argv.pop(1)
def peak():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        f.write(f"{usage.ru_maxrss * 1024} {usage.ru_utime + usage.ru_stime}")
atexit.register(peak)
sys.argv[0] = "loadgen"
from loadgen.cli import main
main()
"""


@dataclass
class Run:
    """One run's figures."""

    requests: int
    events: int
    peak_rss: int  # bytes
    records_bytes: int
    wall_s: float
    cpu_s: float  # the coordinator's own CPU time, start-up and report included


def vm_hwm(pid: int) -> int:
    """The process's peak resident set so far (bytes), or 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sampled_peak(proc: subprocess.Popen) -> tuple[int, bytes]:
    """Wait for ``proc``, its VmHWM sampled every 20 ms: the peak seen (bytes) and its stderr."""
    sampled = 0

    def sample() -> None:
        nonlocal sampled
        while proc.poll() is None:
            sampled = max(sampled, vm_hwm(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    sampler.join()
    return sampled, stderr


def count_events(path: Path) -> int:
    """The token events a records file holds."""
    with ipc.open_file(str(path)) as reader:
        return sum(
            int(pc.sum(pc.list_value_length(reader.get_batch(i).column("events_ns"))).as_py() or 0)
            for i in range(reader.num_record_batches)
        )


def run_once(args: argparse.Namespace, requests: int, workdir: Path) -> Run:
    """One ``loadgen run --mock`` of ``requests`` requests; its coordinator's peak RSS."""
    out = workdir / f"run-{requests}"
    out.mkdir()
    peak_file = out / "peak"
    command = [
        sys.executable, "-c", RUNNER, str(peak_file), "run", "--mock", "-q",
        "--workers", str(args.workers), "--max-concurrency", str(args.concurrency),
        "--num-prompts", str(requests), "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len), "--ignore-eos",
        "--save-result", "--result-dir", str(out), "--no-dataset-cache",
    ]  # fmt: skip
    if args.no_save_records:
        command.append("--no-save-records")
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampled, stderr = sampled_peak(proc)
    wall_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"loadgen run exited {proc.returncode}: {stderr.decode()[-2000:]}")
    at_exit, cpu_s = (0, 0.0)
    if peak_file.exists():
        rss, cpu = peak_file.read_text().split()
        at_exit, cpu_s = int(rss), float(cpu)
    files = list(out.glob("*.records.arrow"))
    events = count_events(files[0]) if files else requests * args.output_len
    size = files[0].stat().st_size if files else 0
    return Run(requests, events, max(sampled, at_exit), size, wall_s, cpu_s)


def main() -> None:
    """Run both lengths and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="the short run's N")
    parser.add_argument("--factor", type=int, default=4, help="the long run is N times this")
    parser.add_argument("--output-len", type=int, default=200)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-save-records", action="store_true", help="run without a records file")
    args = parser.parse_args()
    print(machine_line("coordinator memory against the run's length"))
    runs = []
    with tempfile.TemporaryDirectory(prefix="coordinator-memory-") as tmp:
        for requests in (args.requests, args.requests * args.factor):
            runs.append(run_once(args, requests, Path(tmp)))
    print(
        f"{'requests':>9} {'events':>11} {'peak RSS MB':>12} {'peak B/event':>13} "
        f"{'file B/event':>13} {'wall s':>7} {'coord CPU s':>12}"
    )
    for r in runs:
        per_file = f"{r.records_bytes / r.events:13.2f}" if r.records_bytes else f"{'-':>13}"
        print(
            f"{r.requests:>9} {r.events:>11,} {r.peak_rss / 1e6:12.1f} "
            f"{r.peak_rss / r.events:13.1f} {per_file} {r.wall_s:7.1f} {r.cpu_s:12.1f}"
        )
    short, long = runs
    extra = (long.peak_rss - short.peak_rss) / max(long.events - short.events, 1)
    print(
        f"peak RSS ratio {args.factor}N/N: {long.peak_rss / short.peak_rss:.2f} "
        f"(flat: <= 1.3; everything kept per event: ~{args.factor}); "
        f"{extra:.1f} bytes of peak per extra event"
    )


if __name__ == "__main__":
    main()
