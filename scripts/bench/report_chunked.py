"""How long ``loadgen report`` takes, and how much memory, from a large records file: the report
built from the file (its token events read a bounded chunk of requests at a time) beside one
sequential read of the same file, the floor, at one or more sizes.

For each size a records file of made-up requests is written first (``--events`` token events
in requests of ``--events-per-request``, in batches of ``--requests-per-batch`` (64) requests
out of request order, as workers send them; a finished run, its end included). A long paced
run writes small batches, a request or two each: ``--requests-per-batch 1`` makes such a file
(a decoded batch costs the readers ~15 KB of C heap whatever its size). Each measure runs in
its own process, so its peak RSS (VmHWM) is its own:

- **read, cold**: the file's bytes, 16 MiB at a time, after its pages are dropped from the page
  cache (posix_fadvise DONTNEED on this file alone): what a report of a file that is not in
  memory pays at least;
- **read, warm**: the same read again, the file in the page cache;
- **imports**: the report's modules imported, nothing read: the process's own floor of RSS;
- **report**: ``read_records`` then ``build_report`` (the summary, the console lines and the
  result JSON, every percentile exact) under a generation run's settings (paced, TTFT/TPOT/
  ITL/E2EL, p50/p90/p99), as ``loadgen report FILE --save-result`` builds it.

Printed per size: the seconds and peak RSS of each, the report's time per million events and
its ratio to the cold and the warm read. Run it under the shared lock:

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/report_chunked.py \
        --events 10000000 100000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import machine_line

MODES = ("read-cold", "read-warm", "imports", "report")


def write_file(path: Path, events: int, per_request: int, per_batch: int = 64) -> int:
    """A finished records file of made-up requests; its number of requests."""
    from loadgen.records.arrow_file import RecordsWriter
    from loadgen.records.collected import Collected
    from loadgen.records.model import RunEnd, RunStart
    from workers.protocol import RECORD_DTYPE, ConnectionStats

    n = events // per_request
    rng = np.random.default_rng(7)
    config = {"request_rate": 1000.0, "percentile_metrics": "ttft,tpot,itl,e2el"}
    start = RunStart("0", [], config, "m", "m", n, 2, 0, "00", 0, "2026-12-06T00:00:00", None)
    writer = RecordsWriter(
        str(path),
        start,
        np.arange(n, dtype=np.int64) * 1_000_000,
        np.full(n, 10),
        np.ones(n, np.int64),
        None,
    )
    writer.start(0, start.t0_wall, 0)
    order = np.argsort(np.arange(n) + rng.integers(0, 512, n), kind="stable")
    for batch in np.array_split(order, max(n // per_batch, 1)):
        rows = np.zeros(len(batch), dtype=RECORD_DTYPE)
        rows["index"] = batch
        rows["sent_ns"] = batch * 1_000_000
        rows["released_ns"] = rows["sent_ns"]
        rows["n_events"] = per_request
        rows["status"] = 200
        rows["success"] = True
        rows["prompt_tokens"] = 10
        rows["completion_tokens"] = per_request
        rows["server_queue_s"] = np.nan
        rows["server_ttft_s"] = np.nan
        gaps = rng.integers(5_000_000, 25_000_000, (len(batch), per_request))
        flat = (rows["sent_ns"][:, None] + np.cumsum(gaps, axis=1)).ravel()
        rows["end_ns"] = flat.reshape(len(batch), per_request)[:, -1]
        writer.write(int(batch[0] % 2), rows, flat.astype(np.int64), {}, {})
    records = np.zeros(n, dtype=RECORD_DTYPE)  # the end's figures read the counts only
    records["n_events"] = per_request
    collected = Collected(
        records=records,
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.zeros(0, np.int64),
        errors={},
        texts={},
        t0_ns=0,
        connections=0,
        worker=np.zeros(n, np.int16),
    )
    end = RunEnd(
        interrupted=False,
        worker_problems=[],
        worker_cpu_ns=[1, 1],
        worker_wall_ns=[1, 1],
        connection_stats=ConnectionStats(),
        loop_lag_ns=np.zeros(0, np.int64),
        output_lens=np.full(n, per_request, np.int64),
        counters_after=None,
        probe_latencies_s=None,
    )
    writer.finish(collected, end)
    if writer.failure is not None:
        raise SystemExit(f"the records file could not be written: {writer.failure}")
    return n


def measure(mode: str, path: str) -> dict:
    """One measure, in this process: seconds, peak RSS and (report) a few of its figures."""
    started = time.perf_counter()
    figures: dict = {}
    if mode.startswith("read"):
        with open(path, "rb") as f:
            if mode == "read-cold":
                os.fsync(f.fileno())  # dirty pages stay cached: written back first
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                started = time.perf_counter()
            while f.read(1 << 24):
                pass
    else:
        from loadgen.config import RunConfig
        from loadgen.records.read import read_records
        from loadgen.report.run_report import build_report
        from loadgen.report.settings import output_of, settings_of

        started = time.perf_counter()
        if mode == "report":
            config = RunConfig(
                request_rate=1000.0,
                save_result=True,
                percentile_metrics="ttft,tpot,itl,e2el",
                metric_percentiles="50,90,99",
            )
            run = read_records(path)
            report = build_report(settings_of(config), output_of(config), run, date="0")
            assert report.result is not None
            figures = {k: report.result[k] for k in ("completed", "p99_itl_ms", "median_ttft_ms")}
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "peak_rss": vm_hwm(), "figures": figures}


def vm_hwm() -> int:
    """This process's peak resident set (bytes): VmHWM, its own since its exec (ru_maxrss
    would count the parent's peak at the fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def one_size(events: int, per_request: int, per_batch: int, directory: str | None) -> None:
    """Write a file of ``events`` events, measure each mode in its own process, print."""
    with tempfile.TemporaryDirectory(prefix="report-speed-", dir=directory) as tmp:
        path = Path(tmp) / "run.records.arrow"
        began = time.perf_counter()
        n = write_file(path, events, per_request, per_batch)
        size = path.stat().st_size
        print(
            f"{n:,} requests in batches of {per_batch}, {events:,} token events, "
            f"file {size / 1e6:,.0f} MB "
            f"({size / events:.2f} B/event), written in {time.perf_counter() - began:.0f} s"
        )
        got = {}
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, __file__, "--measure", mode, str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            got[mode] = json.loads(out.stdout)
            print(
                f"  {mode:>9}: {got[mode]['seconds']:7.2f} s "
                f"({got[mode]['seconds'] / events * 1e6:6.3f} s per M events)  "
                f"peak RSS {got[mode]['peak_rss'] / 1e6:7.1f} MB"
            )
    report = got["report"]
    print(
        f"  report / cold read: {report['seconds'] / got['read-cold']['seconds']:.1f}x; "
        f"report / warm read: {report['seconds'] / got['read-warm']['seconds']:.1f}x; "
        f"report RSS above the imports: "
        f"{(report['peak_rss'] - got['imports']['peak_rss']) / 1e6:.1f} MB; {report['figures']}"
    )


def main() -> None:
    """Each size's table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[10_000_000])
    parser.add_argument("--events-per-request", type=int, default=200)
    parser.add_argument("--requests-per-batch", type=int, default=64)
    parser.add_argument("--dir", help="where the records files are written (a temporary folder)")
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # MODE PATH, internal
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return
    print(machine_line("loadgen report from a records file, beside one read of the file"))
    for events in args.events:
        one_size(events, args.events_per_request, args.requests_per_batch, args.dir)


if __name__ == "__main__":
    main()
