"""What the live view costs the coordinator, and whether it moves the measurement.

Runs ``loadgen run --mock --num-prompts N --request-rate inf --max-concurrency C`` (defaults
20,000 and 256) with the view in each of its modes, interleaved, --repeat times:

- **off**: ``--disable-tqdm`` (the floor: no view at all);
- **plain**: stderr a pipe, one line every 5 s;
- **panel**: stderr a pseudo-terminal (120 x 40) read by this script, the rich panel redrawn
  4 times a second.

For each run, the coordinator's own CPU seconds (``/proc/PID/stat``, its threads but not its
workers or the mock) from the line printed as the timed run starts (``Maximum request
concurrency``) to the summary's title: the timed run plus the report, the same work in every
mode but the view. Beside them the run's request throughput and TTFT p99 from the summary, to
show the view leaves the measurement where it was. Medians; run it under the shared lock:

    flock /tmp/loadgen-bench.lock .venv/bin/python scripts/bench/live_view_cost.py
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import statistics
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass

from common import loadgen_command, machine_line

START_MARK = "Maximum request concurrency:"
END_MARK = "============ Serving Benchmark Result ============"
MODES = ("off", "plain", "panel")


@dataclass
class Measured:
    """One run: the coordinator's CPU seconds from START_MARK to END_MARK, and the summary's
    figures."""

    cpu_s: float
    span_s: float
    req_per_s: float
    ttft_p99_ms: float
    view_bytes: int  # what the view wrote to stderr


def process_cpu_s(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(fd: int, counted: list[int]) -> None:
    """Read ``fd`` to its end, counting the bytes (a full pipe or pty would stall the run)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # a pty's reader gets EIO once the other end is closed
            break
        if not chunk:
            break
        counted[0] += len(chunk)


def run_once(mode: str, args: argparse.Namespace) -> Measured:
    """One `loadgen run` with the view in ``mode``."""
    command = [
        *loadgen_command(), "run", "--mock", "--num-prompts", str(args.num_prompts),
        "--request-rate", "inf", "--max-concurrency", str(args.max_concurrency),
        *(["--disable-tqdm"] if mode == "off" else []),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "xterm-256color", "COLUMNS": "120"}
    if mode == "panel":
        reader, writer = os.openpty()
        fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    else:
        reader, writer = os.pipe()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=writer, text=True, env=env)
    os.close(writer)
    counted = [0]
    drainer = threading.Thread(target=drain, args=(reader, counted), daemon=True)
    drainer.start()
    assert proc.stdout is not None
    cpu_start = cpu_end = span_start = span_end = 0.0
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(START_MARK) and not span_start:  # the summary repeats it
            cpu_start, span_start = process_cpu_s(proc.pid), time.monotonic()
        elif line.startswith(END_MARK):
            cpu_end, span_end = process_cpu_s(proc.pid), time.monotonic()
    proc.wait()
    drainer.join(timeout=10)
    os.close(reader)
    text = "".join(out)
    if proc.returncode != 0 or not span_end:
        raise SystemExit(f"{mode} run failed ({proc.returncode}):\n{text[-2000:]}")
    return Measured(
        cpu_end - cpu_start,
        span_end - span_start,
        summary_value(text, "Request throughput (req/s):"),
        summary_value(text, "P99 TTFT (ms):"),
        counted[0],
    )


def summary_value(text: str, label: str) -> float:
    """A figure of the summary table."""
    found = re.search(rf"^{re.escape(label)}\s+([\d.]+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no {label!r} in the summary")
    return float(found.group(1))


def main() -> None:
    """Run the modes interleaved and print their medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-prompts", type=int, default=20_000)
    parser.add_argument("--max-concurrency", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(machine_line("live view cost"), flush=True)
    print(
        f"loadgen run --mock --num-prompts {args.num_prompts} --request-rate inf "
        f"--max-concurrency {args.max_concurrency}, {args.repeat} runs per mode, interleaved",
        flush=True,
    )
    runs: dict[str, list[Measured]] = {mode: [] for mode in MODES}
    for r in range(args.repeat):
        for mode in MODES:
            m = run_once(mode, args)
            runs[mode].append(m)
            print(
                f"  run {r + 1} {mode:5}: coordinator {m.cpu_s:.2f} CPU s over {m.span_s:.2f} s, "
                f"{m.req_per_s:,.0f} req/s, TTFT p99 {m.ttft_p99_ms:.1f} ms",
                flush=True,
            )
    floor = statistics.median(m.cpu_s for m in runs["off"])
    print()
    print("| view | coordinator CPU s (median) | vs off | req/s (median) | TTFT p99 ms "
          "(median) | bytes to stderr |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        ms = runs[mode]
        cpu = statistics.median(m.cpu_s for m in ms)
        print(
            f"| {mode} | {cpu:.2f} | {cpu / floor:.2f}x | "
            f"{statistics.median(m.req_per_s for m in ms):,.0f} | "
            f"{statistics.median(m.ttft_p99_ms for m in ms):.1f} | "
            f"{statistics.median(m.view_bytes for m in ms):,.0f} |"
        )


if __name__ == "__main__":
    main()
