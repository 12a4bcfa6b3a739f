"""A soak: does the coordinator's memory stay flat over a long run bounded by time, and do the
live view, the failures and the timeouts behave at its end as at its start?

One real ``loadgen run --duration D`` at a paced rate (``--request-rate``, requests of about
``--output-len`` tokens streamed every ``--itl-ms``: rate x output-len token events a second)
against a ``loadgen mock-server`` that answers ``--error-rate`` of the requests with a 500, with
``--random-range-ratio`` spreading the answers' lengths so that the longest pass
``--request-timeout`` and fail with 'request timeout'. ``--save-result`` goes into a temporary
directory. Every ``--every`` seconds a row: the coordinator's RSS (the ``loadgen run`` process
alone), its workers' RSS, and the coordinator's CPU over the interval. At the end: the
least-squares slope of the coordinator's RSS over the run's second half (MB per hour; flat: near
0, whatever the level), the run's own figures, the live view's plain line (the run's stderr is
a log, not a terminal) at the first minute and its last one, and a table per minute read from
the records file: requests sent, completed, timed out and answered 500, the median E2EL of the
completed and the p99 of how late requests were sent after their scheduled instant. Timeouts
and 500s at the same share in the last minute as in the first say that neither went stale.

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
import pyarrow.ipc as ipc
from common import loadgen_command, machine_line, mock_server

from loadgen.records.read import read_records

MB = 1e6
MINUTE_NS = 60 * 10**9


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


def minute_table(path: Path) -> list[str]:
    """Per minute of the run (by send instant): sent, completed, timeouts, 500s, median E2EL of
    the completed, p99 lateness of the send after its scheduled instant."""
    run = read_records(str(path))
    rows, scheduled = run.records, run.scheduled_ns
    sent = rows["sent_ns"] >= 0
    timeout = np.array([run.errors.get(int(i), "").startswith("request timeout")
                        for i in rows["index"]])  # fmt: skip
    lines = [f"{'minute':>6} {'sent':>7} {'ok':>7} {'timeouts':>9} {'500s':>6} "
             f"{'E2EL p50 ms':>12} {'late p99 ms':>12}"]  # fmt: skip
    minute = np.where(sent, rows["sent_ns"] // MINUTE_NS, -1)
    for m in range(int(minute.max()) + 1 if sent.any() else 0):
        here = minute == m
        ok = here & rows["success"].astype(bool)  # u1 on the wire: a mask only as bool
        e2el = (rows["end_ns"][ok] - rows["sent_ns"][ok]) / 1e6
        late = (rows["sent_ns"][here] - scheduled[here]) / 1e6
        lines.append(
            f"{m + 1:6d} {here.sum():7,d} {ok.sum():7,d} {(here & timeout).sum():9,d} "
            f"{(here & (rows['status'] == 500)).sum():6,d} "
            f"{np.median(e2el) if e2el.size else float('nan'):12.1f} "
            f"{np.percentile(late, 99) if late.size else float('nan'):12.2f}"
        )
    return lines


def live_lines(output: str) -> tuple[str, str]:
    """The live view's plain line nearest the end of the first minute, and its last one."""
    lines = [line for line in output.splitlines() if "%|" in line and line.startswith("[")]
    if not lines:
        return "(no live view line)", "(no live view line)"
    first = min(lines, key=lambda line: abs(float(line[1:].split(" s]")[0]) - 60))
    return first, lines[-1]


def main() -> None:
    """Run the soak and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of the run")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--request-rate", type=float, default=20.0)
    parser.add_argument("--output-len", type=int, default=200)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--error-rate", type=float, default=0.01, help="the mock's 500s")
    parser.add_argument("--random-range-ratio", type=float, default=0.5)
    parser.add_argument("--request-timeout", type=float, default=1.3, help="seconds")
    args = parser.parse_args()
    events_s = args.request_rate * args.output_len
    print(machine_line("soak_memory.py: the coordinator's memory over a --duration run"))
    print(f"--duration {args.duration:g} s at {args.request_rate:g} req/s x {args.output_len} "
          f"tokens: {events_s:,.0f} token events/s planned")  # fmt: skip
    print(f"mock server: --error-rate {args.error_rate:g}; --random-range-ratio "
          f"{args.random_range_ratio:g}, --request-timeout {args.request_timeout:g} s")  # fmt: skip
    mock_args = ("--error-rate", str(args.error_rate), "--seed", "1")
    with (
        tempfile.TemporaryDirectory() as workdir,
        mock_server(Path(workdir) / "mock.log", args.itl_ms, mock_args) as (url, _),
    ):
        command = [
            *loadgen_command(), "run", "--base-url", url, "--model", "loadgen-mock",
            "--random-input-len", "64", "--random-output-len", str(args.output_len),
            "--random-range-ratio", str(args.random_range_ratio),
            "--request-timeout", str(args.request_timeout),
            "--request-rate", str(args.request_rate), "--duration", f"{args.duration:g}s",
            "--workers", str(args.workers), "--save-result", "--result-dir", workdir,
        ]  # fmt: skip
        started = time.monotonic()
        # A file, not a pipe: an hour of live-view lines would fill a pipe read only at the end.
        log = Path(workdir) / "run.log"
        with log.open("w") as log_file:
            proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
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
            # Past --duration (counted from the process's start, so t0 is later still) the
            # run drains and its report is built: shown, but not part of the run's slope.
            in_run = now - started < args.duration
            if in_run:
                samples.append((now - started, here))
            share = 100 * (used - last_cpu) / (now - last_t)
            last_cpu, last_t = used, now
            print(f"{now - started:8.0f} {here / MB:13.1f} {worker_rss(coordinator) / MB:15.1f} "
                  f"{share:12.1f}{'' if in_run else '  (run over: the report)'}",
                  flush=True)  # fmt: skip
        exited = time.monotonic()
        output = log.read_text()
        if proc.returncode != 0:
            sys.exit(f"loadgen run exited {proc.returncode}:\n{output[-2000:]}")
        (result_path,) = Path(workdir).glob("*.json")
        result = json.loads(result_path.read_text())
        (records,) = Path(workdir).glob("*.records.arrow")
        records_mb = records.stat().st_size / MB
        with ipc.open_file(str(records)) as file:
            batches = file.num_record_batches
        minutes = minute_table(records)
    print(f"run: {result['completed']:,} completed, {result['total_output_tokens']:,} output "
          f"tokens in {result['duration']:.0f} s; records file {records_mb:.1f} MB; coordinator "
          f"peak RSS {peak / MB:.1f} MB (the report included)")  # fmt: skip
    past = exited - started - args.duration
    print(f"records file: {batches:,} Arrow batches; the process ran {past:.1f} s past "
          "--duration (its start-up, the last answers, the read-back, the report)")  # fmt: skip
    if len(samples) >= 4:
        t = np.array([s[0] for s in samples])
        mb = np.array([s[1] for s in samples]) / MB
        half = t >= t[-1] / 2
        slope = np.polyfit(t[half], mb[half], 1)[0] * 3600 if half.sum() >= 2 else float("nan")
        print(f"coordinator RSS during the run: first sample {mb[0]:.1f} MB, last {mb[-1]:.1f} "
              f"MB ({mb[-1] / mb[0]:.2f}x); second half {slope:+.1f} MB per hour")  # fmt: skip
    first, last = live_lines(output)
    print(f"live view near minute 1: {first}\nlive view at the end:    {last}")
    print("\n".join(minutes))


if __name__ == "__main__":
    main()
