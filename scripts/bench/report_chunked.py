"""How long and how much memory the token-event figures of a report take from a records file:
in memory (the report as it is: the whole file read, every event laid out) against a bounded
chunk of requests at a time (loadgen/records/events.py, loadgen/report/chunked_stats.py), beside
one sequential read of the file, the floor.

A records file of made-up requests is written first (``--events`` token events in requests of
``--events-per-request``, in batches of 64 requests out of request order, as workers send
them). Each measure runs in its own process, so its peak RSS (ru_maxrss) is its own:

- **read**: the file's bytes, 16 MiB at a time (nothing kept);
- **in memory**: ``read_records`` then ``derive_timings``, the ITL statistics
  (``summarize``) and the peak output tokens/s, as ``calculate_metrics`` has them;
- **chunked**: ``RequestOrderEvents``, each request's first and last event, the ITL statistics
  (``itl_stats_chunked``) and the peak (``peak_output_tokens_per_s_chunked``).

The two computed sets of figures are checked equal. Run it under the shared lock:

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/report_chunked.py
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import machine_line

PERCENTILES = [50.0, 90.0, 99.0]


def write_file(path: Path, events: int, per_request: int) -> int:
    """A records file of made-up requests; its number of requests."""
    from loadgen.records.arrow_file import RecordsWriter
    from loadgen.records.model import RunStart
    from workers.protocol import RECORD_DTYPE

    n = events // per_request
    rng = np.random.default_rng(7)
    start = RunStart("0", [], {}, "m", None, n, 1, 0, "00", 0, "2026-12-06T00:00:00", None)
    writer = RecordsWriter(
        str(path), start, np.zeros(n, np.int64), np.full(n, 10), np.ones(n, np.int64), None
    )
    writer.start(0, start.t0_wall, 0)
    order = np.argsort(np.arange(n) + rng.integers(0, 512, n), kind="stable")
    for batch in np.array_split(order, max(n // 64, 1)):
        rows = np.zeros(len(batch), dtype=RECORD_DTYPE)
        rows["index"] = batch
        rows["sent_ns"] = batch * 1_000_000
        rows["released_ns"] = rows["sent_ns"]
        rows["n_events"] = per_request
        rows["success"] = True
        gaps = rng.integers(5_000_000, 25_000_000, (len(batch), per_request))
        flat = (rows["sent_ns"][:, None] + np.cumsum(gaps, axis=1)).ravel()
        rows["end_ns"] = flat.reshape(len(batch), per_request)[:, -1]
        writer.write(0, rows, flat.astype(np.int64), {}, {})
    writer.close()
    return n


def measure(mode: str, path: str, n: int) -> dict:
    """One measure, in this process: its figures, seconds and peak RSS."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from loadgen.records.arrow_file import MAGIC_LEN
    from loadgen.records.events import RequestOrderEvents
    from loadgen.records.read import read_records
    from loadgen.report import metrics

    started = time.perf_counter()
    figures: dict = {}
    if mode == "read":
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    elif mode == "memory":
        run = read_records(path)
        ok = run.records["success"].astype(bool)
        results = metrics.RequestResults(
            ok,
            run.records["released_ns"] / 1e9,
            run.records["sent_ns"] / 1e9,
            run.event_ns / 1e9,
            run.event_offsets,
            np.zeros(n, np.int64),
            np.zeros(n, np.int64),
        )
        timings = metrics.derive_timings(results)
        counts = np.diff(run.event_offsets)
        itl = metrics.summarize(
            timings.itl_s[np.repeat(ok, np.maximum(counts - 1, 0))], PERCENTILES
        )
        send_ok = results.sent_s[ok]
        peak = metrics.peak_output_tokens_per_s(
            send_ok, timings.latency_s[ok], results.event_s[np.repeat(ok, counts)]
        )
        figures = {"itl": vars(itl), "peak": peak, "ttft": float(timings.ttft_s.sum())}
    else:
        events = RequestOrderEvents(path, n)
        first_s, last_s = metrics.event_bounds_s(events)
        sent = np.zeros(n)
        ok = np.zeros(n, bool)
        with pa.OSFile(path, "rb") as source:  # the rows' columns: per request, not per event
            source.seek(MAGIC_LEN)
            for batch in ipc.open_stream(source):
                index = batch.column("index").to_numpy()
                sent[index] = batch.column("sent_ns").to_numpy() / 1e9
                ok[index] = batch.column("success").to_numpy(zero_copy_only=False)
        ttft = np.where(~np.isnan(first_s), first_s - sent, 0.0)
        latency = np.where(ok & ~np.isnan(first_s), last_s - sent, 0.0)
        itl = metrics.itl_stats_chunked(events, ok, PERCENTILES)
        peak = metrics.peak_output_tokens_per_s_chunked(events, ok, sent[ok], latency[ok])
        figures = {"itl": vars(itl), "peak": peak, "ttft": float(ttft.sum())}
    seconds = time.perf_counter() - started
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "peak_rss": peak_rss, "figures": figures}


def main() -> None:
    """Write the file, run each measure in its own process, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000_000)
    parser.add_argument("--events-per-request", type=int, default=200)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)  # MODE PATH N, internal
    args = parser.parse_args()
    if args.measure:
        mode, path, n = args.measure
        print(json.dumps(measure(mode, path, int(n))))
        return
    print(machine_line("token-event figures of a report: in memory against chunks"))
    with tempfile.TemporaryDirectory(prefix="report-chunked-") as tmp:
        path = Path(tmp) / "run.records.arrow"
        n = write_file(path, args.events, args.events_per_request)
        size = path.stat().st_size
        print(f"{n:,} requests, {args.events:,} token events, file {size / 1e6:.0f} MB")
        got = {}
        for mode in ("read", "memory", "chunked", "read"):
            out = subprocess.run(
                [sys.executable, __file__, "--measure", mode, str(path), str(n)],
                capture_output=True,
                text=True,
                check=True,
            )
            got[mode] = json.loads(out.stdout)
            print(
                f"{mode:>8}: {got[mode]['seconds']:6.2f} s  "
                f"({got[mode]['seconds'] / args.events * 1e6 * 1e3:7.1f} ms per M events)  "
                f"peak RSS {got[mode]['peak_rss'] / 1e6:7.1f} MB"
            )
    same = got["memory"]["figures"] == got["chunked"]["figures"]
    print(f"figures equal: {same}; chunked / read: "
          f"{got['chunked']['seconds'] / got['read']['seconds']:.1f}x")  # fmt: skip
    if not same:
        raise SystemExit(f"{got['memory']['figures']} != {got['chunked']['figures']}")


if __name__ == "__main__":
    main()
