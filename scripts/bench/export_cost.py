"""Cost of `loadgen report --format csv|jsonl` per request, beside the machine's floor.

For N made-up requests of E token events each (default 20,000 x 128), in one process:

- **floor**: reading every record as a Python dict (``ndarray.tolist`` and one ``dict`` per
  row), the least any per-row export in Python costs;
- **request_rows**: loadgen/report/exports.py's rows (timings, ITL statistics, tokens);
- **write_csv** and **write_jsonl**: those rows written to memory;
- **gate_problem**: the sample report `--fail-on` builds before a run starts.

Medians of --repeat runs. Run it under the shared lock:

    flock /tmp/loadgen-bench.lock python scripts/bench/export_cost.py
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import statistics
import time
from collections.abc import Callable

import numpy as np

from loadgen.config import RunConfig
from loadgen.records.model import RunRecords
from loadgen.report.exports import request_rows, write_csv, write_jsonl
from loadgen.report.gate_keys import gate_problem
from loadgen.report.settings import settings_of
from workers.protocol import RECORD_DTYPE

MS = 1_000_000


def made_up_run(n: int, events: int) -> RunRecords:
    """``n`` successful requests 1 µs apart, each with ``events`` token events 1 ms apart."""
    records = np.zeros(n, RECORD_DTYPE)
    records["index"] = np.arange(n)
    records["released_ns"] = records["sent_ns"] = np.arange(n) * 1_000
    records["end_ns"] = records["sent_ns"] + (events + 1) * MS
    records["n_events"] = events
    records["status"] = 200
    records["success"] = 1
    records["prompt_tokens"] = records["completion_tokens"] = events
    event_ns = (records["sent_ns"][:, None] + np.arange(1, events + 1) * MS).ravel()
    return RunRecords(
        start=None,  # type: ignore[arg-type]  # the rows never read the run's start
        end=None,
        records=records,
        worker=np.zeros(n, np.int16),
        scheduled_ns=records["sent_ns"].copy(),
        input_tokens=np.full(n, events, np.int64),
        input_sequences=np.ones(n, np.int64),
        event_ns=event_ns.astype(np.int64),
        event_offsets=np.arange(n + 1, dtype=np.int64) * events,
        errors={},
        texts={},
    )


def median_s(step: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``step``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.requests
    run = made_up_run(n, args.events)
    output_lens = np.full(n, args.events)
    rows = request_rows(run, output_lens, "bench-")
    names = run.records.dtype.names
    steps = {
        "floor: every record as a dict": lambda: [
            dict(zip(names, row, strict=True)) for row in run.records.tolist()
        ],
        "request_rows": lambda: request_rows(run, output_lens, "bench-"),
        "write_csv": lambda: write_csv(rows, io.StringIO()),
        "write_jsonl": lambda: write_jsonl(rows, io.StringIO()),
    }
    print(f"{n} requests x {args.events} events, median of {args.repeat}")
    print("| step | s | µs per request | x floor |")
    print("|---|---|---|---|")
    floor = None
    for name, step in steps.items():
        seconds = median_s(step, args.repeat)
        floor = floor or seconds
        print(f"| {name} | {seconds:.3f} | {seconds / n * 1e6:.1f} | {seconds / floor:.1f} |")
    gates = RunConfig(workers=1, fail_on=("p99_ttft_ms>500", "failed>0"))
    stored = dataclasses.asdict(gates)
    gate_ms = median_s(lambda: gate_problem(settings_of(gates), stored), args.repeat) * 1000
    print(f"gate_problem (the sample report before a run): {gate_ms:.1f} ms")


if __name__ == "__main__":
    main()
