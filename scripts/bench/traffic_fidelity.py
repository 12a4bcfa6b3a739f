"""Traffic fidelity: does `loadgen run` produce the load it was asked for?

Against the embedded mock server (`loadgen mock-server`, started in its own process on a free
port), the script runs the real client `loadgen run --save-result --save-detailed` in three
scenarios, each with `--workers 1` and `--workers 2`, and reads back the result JSON:

  r1000  1000 req/s (Poisson), 1-token responses, mock --itl-ms 0 (one write per response):
         5,000 requests, about 5 s of load.
  s200   200 req/s (Poisson), 128-token streams, mock --itl-ms 2 (each stream ~0.25 s, so
         ~50 open at once): 1,000 requests.
  floor  the s200 schedule with 1-token responses (mock --itl-ms 0): the send lag this machine
         allows when the worker has almost nothing else to do. A reference, not judged by the
         send-lag target: s200's lag cannot be lower than this floor.
  cap64  closed loop: --request-rate inf --max-concurrency 64, output lengths 13..243
         (--random-range-ratio output 0.9), mock --itl-ms 5: 1,000 requests, about 10 s.
         (At --itl-ms 1 the mock alone needs more than a core for the 57k events/s, and the
         2-core machine, not the cap, decides how full the cap stays.)

For every run it computes, from the per-request arrays:

- the achieved request rate, from the release instants (start_time - queue_time: when a request
  was released to be sent, before any wait for a concurrency slot), against the requested one;
- the send lag (release instant - scheduled instant) that loadgen itself reports under
  "loadgen" -> "send_lag_ms";
- the requests in flight over time, a sweep over the [start_time, start_time + latency]
  intervals of the successful requests: the most at once and, for the capped scenario, the
  share of the steady state (from the first instant the cap is reached to the last send) with
  at least 95 % of the cap in flight, weighted by time;
- the failed requests, and the rest of the machine's CPU during the run (other%).

It prints each run as it ends, then one table of medians and a check against the targets.
It exits 0 whether targets are met or not; only a run that fails outright stops it.

    python scripts/bench/traffic_fidelity.py            # all scenarios, workers 1 and 2, 3 runs
    python scripts/bench/traffic_fidelity.py --scenarios cap64 --workers 2 --repeat 1 --scale 0.5
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import psutil
from common import (
    PeriodicSampler,
    ProcessTreeCpu,
    cpu_seconds,
    loadgen_command,
    machine_line,
    mock_server,
    other_cpu_seconds,
)

from loadgen.schedule import arrival_offsets_s

SAMPLE_S = 0.1  # CPU sampling period during a run
RATE_TOLERANCE_PCT = 1.0  # achieved rate within this of the requested one
SEND_LAG_P99_MS = 2.0  # send lag p99 at most this
FULL_SHARE = 0.95  # "near the cap": at least this fraction of the cap in flight ...
STEADY_SHARE = 0.95  # ... for at least this share of the steady state
# errors of requests never released (workers/worker.py) or never reported (loadgen/fleet/fanout.py)
UNSENT_ERRORS = ("not sent", "lost: ")


@dataclass(frozen=True)
class Scenario:
    """One kind of load."""

    name: str
    label: str
    itl_ms: float  # the mock's gap between token events
    request_rate: float
    max_concurrency: int | None
    output_len: int
    range_ratio: str
    num_prompts: int
    input_len: int = 32
    reference: bool = False  # a floor to compare with; its send lag is not judged

    def scaled(self, scale: float) -> int:
        """--num-prompts at ``scale`` (at least 2, so a rate can be measured)."""
        return max(2, round(self.num_prompts * scale))

    def client_args(self, num_prompts: int) -> list[str]:
        """The `loadgen run` flags that describe this load."""
        args = [
            "--request-rate", "inf" if math.isinf(self.request_rate) else f"{self.request_rate:g}",
            "--random-input-len", str(self.input_len),
            "--random-output-len", str(self.output_len),
            "--random-range-ratio", self.range_ratio,
            "--num-prompts", str(num_prompts),
        ]  # fmt: skip
        if self.max_concurrency:
            args += ["--max-concurrency", str(self.max_concurrency)]
        return args


SCENARIOS = [
    Scenario("r1000", "1000 req/s, non-streaming-like", 0.0, 1000.0, None, 1, "0.0", 5000),
    Scenario("s200", "200 req/s, 128-token streams", 2.0, 200.0, None, 128, "0.0", 1000),
    Scenario(
        "floor",
        "s200's schedule, 1-token responses (the machine's floor)",
        0.0,
        200.0,
        None,
        1,
        "0.0",
        1000,
        reference=True,
    ),
    Scenario(
        "cap64",
        "closed loop, cap 64, mixed output lengths",
        5.0,
        math.inf,
        64,
        128,
        '{"input": 0.0, "output": 0.9}',
        1000,
    ),
]


@dataclass
class Measurement:
    """What one client run gave; None where a figure does not apply."""

    requested: float
    achieved: float | None
    error_pct: float | None
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    max_in_flight: int
    steady_share: float | None  # fraction of the steady state with >= 95 % of the cap in flight
    steady_mean: float | None  # time-weighted mean in flight over the steady state
    failed: int
    other_cpu_pct: float
    duration_s: float


class Sample(NamedTuple):
    """Cumulative CPU seconds at one instant."""

    t: float
    other: float  # the machine less the mock, the client tree and this script


class OtherCpu(PeriodicSampler):
    """Samples the rest of the machine's CPU (mock and client tree excluded) in a thread."""

    def __init__(self, server: psutil.Process, client_pid: int) -> None:
        self.server = server
        self.client = ProcessTreeCpu(client_pid)
        self.samples: list[Sample] = []
        super().__init__(SAMPLE_S, self._sample)

    def _sample(self) -> None:
        other = other_cpu_seconds(cpu_seconds(self.server), self.client.seconds())
        self.samples.append(Sample(time.monotonic(), other))

    def pct(self) -> float:
        """The rest of the machine's CPU over the client run, in % of one core."""
        first, last = self.samples[0], self.samples[-1]
        span = last.t - first.t
        return 100 * max(last.other - first.other, 0.0) / span if span > 0 else 0.0


def in_flight_steps(start_s: np.ndarray, end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The in-flight count as a step function: level[i] holds from t[i] to t[i + 1].

    A sweep over +1 (send) and -1 (end) events sorted by time; at equal instants ends come
    first, so back-to-back requests do not overlap.
    """
    times = np.concatenate((start_s, end_s))
    deltas = np.concatenate((np.ones(len(start_s), np.int64), -np.ones(len(end_s), np.int64)))
    order = np.lexsort((deltas, times))
    return times[order], np.cumsum(deltas[order])


def steady_state(
    t: np.ndarray, level: np.ndarray, cap: int, last_send_s: float
) -> tuple[float | None, float | None]:
    """Share of [first instant at the cap, last send] with >= FULL_SHARE of the cap in flight,
    and the time-weighted mean in flight there; (None, None) if the cap is never reached."""
    reached = np.flatnonzero(level >= cap)
    if len(reached) == 0:
        return None, None
    begin = t[reached[0]]
    if last_send_s <= begin:
        return None, None
    lo = np.clip(t[:-1], begin, last_send_s)
    hi = np.clip(t[1:], begin, last_send_s)
    span = hi - lo
    threshold = math.ceil(FULL_SHARE * cap - 1e-9)
    window = last_send_s - begin
    share = float(span[level[:-1] >= threshold].sum() / window)
    mean = float((span * level[:-1]).sum() / window)
    return share, mean


def measure(result: dict, other_pct: float) -> Measurement:
    """The fidelity figures of one result JSON (saved with --save-detailed)."""
    start = np.asarray(result["start_times"], dtype=np.float64)
    queue = np.asarray(result["queue_times"], dtype=np.float64)
    latency = np.asarray(result["latencies"], dtype=np.float64)
    errors = result["errors"]
    sent = np.array([not e.startswith(UNSENT_ERRORS) for e in errors], dtype=bool)
    ok = np.array([not e for e in errors], dtype=bool) & (latency > 0)

    rate = result["request_rate"]
    requested = math.inf if rate == "inf" else float(rate)
    release = (start - queue)[sent]
    achieved = error_pct = None
    if math.isfinite(requested) and len(release) > 1 and np.ptp(release) > 0:
        achieved = (len(release) - 1) / float(np.ptp(release))
        error_pct = 100 * (achieved / requested - 1)

    t, level = in_flight_steps(start[ok], start[ok] + latency[ok])
    cap = result["max_concurrency"]
    share = mean = None
    if cap and len(level):
        share, mean = steady_state(t, level, cap, float(start[sent].max()))
    lag = result["loadgen"]["send_lag_ms"]
    return Measurement(
        requested=requested,
        achieved=achieved,
        error_pct=error_pct,
        lag_p50_ms=lag["p50"],
        lag_p99_ms=lag["p99"],
        lag_max_ms=lag["max"],
        max_in_flight=int(level.max()) if len(level) else 0,
        steady_share=share,
        steady_mean=mean,
        failed=result["failed"],
        other_cpu_pct=other_pct,
        duration_s=result["duration"],
    )


def run_client(
    scenario: Scenario,
    workers: int,
    url: str,
    server: psutil.Process,
    out_dir: Path,
    rep: int,
    scale: float,
) -> Measurement:
    """Run `loadgen run` once against the mock and measure what it sent."""
    stem = f"{scenario.name}-w{workers}-{rep}"
    num_prompts = scenario.scaled(scale)
    cmd = [
        *loadgen_command(),
        "run",
        "--base-url", url,
        "--model", "loadgen-mock",
        "--save-result",
        "--save-detailed",
        "--result-dir", str(out_dir),
        "--result-filename", f"{stem}.json",
        "--disable-tqdm",
        "--workers", str(workers),
        *scenario.client_args(num_prompts),
    ]  # fmt: skip
    log_path = out_dir / f"{stem}.log"
    with log_path.open("w") as log:
        client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        with OtherCpu(server, client.pid) as sampler:
            rc = client.wait()
    result_path = out_dir / f"{stem}.json"
    if rc != 0 or not result_path.exists():
        tail = log_path.read_text().strip().splitlines()[-10:]
        raise SystemExit(f"client failed (exit {rc}): {' '.join(cmd)}\n" + "\n".join(tail))
    return measure(json.loads(result_path.read_text()), sampler.pct())


def summarize(runs: list[Measurement]) -> Measurement:
    """Medians of several runs; max in flight is the highest and failed the total."""

    def med(field: str) -> float | None:
        values = [v for r in runs if (v := getattr(r, field)) is not None]
        return statistics.median(values) if values else None

    values = {f: med(f) for f in asdict(runs[0])}
    values["max_in_flight"] = max(r.max_in_flight for r in runs)
    values["failed"] = sum(r.failed for r in runs)
    return Measurement(**values)


def fmt(value: float | None, spec: str, width: int) -> str:
    """A right-aligned figure, or a dash where it does not apply."""
    return ("–" if value is None else format(value, spec)).rjust(width)


HEADER = (
    f"{'scenario':<9}{'workers':>7}{'requested':>10}{'achieved':>10}{'err %':>8}"
    f"{'lag p50/p99/max ms':>20}{'max infl':>9}{'cap':>5}{'steady≥95%':>11}{'mean':>6}"
    f"{'failed':>7}{'other%':>7}"
)


def row(scenario: Scenario, workers: int, m: Measurement) -> str:
    """One table line."""
    requested = "inf" if math.isinf(m.requested) else f"{m.requested:g}"
    lag = f"{m.lag_p50_ms:.2f}/{m.lag_p99_ms:.2f}/{m.lag_max_ms:.1f}"
    share = None if m.steady_share is None else 100 * m.steady_share
    return (
        f"{scenario.name:<9}{workers:>7}{requested:>10}{fmt(m.achieved, '.1f', 10)}"
        f"{fmt(m.error_pct, '+.2f', 8)}{lag:>20}{m.max_in_flight:>9}"
        f"{fmt(scenario.max_concurrency, 'd', 5)}{fmt(share, '.1f', 11)}"
        f"{fmt(m.steady_mean, '.1f', 6)}{m.failed:>7}{m.other_cpu_pct:>7.0f}"
    )


def schedule_error_pct(scenario: Scenario, num_prompts: int) -> float | None:
    """How far the schedule's own release instants are from the requested rate (seed 0)."""
    if math.isinf(scenario.request_rate):
        return None
    offsets = arrival_offsets_s(num_prompts, scenario.request_rate, 1.0, 0)
    return 100 * ((num_prompts - 1) / np.ptp(offsets) / scenario.request_rate - 1)


def checks(scenario: Scenario, m: Measurement) -> list[tuple[str, str, bool]]:
    """(target, figure, met) for every target that applies to one scenario's medians."""
    found = []
    if m.error_pct is not None:
        within = abs(m.error_pct) <= RATE_TOLERANCE_PCT
        target = f"achieved rate within {RATE_TOLERANCE_PCT:g} % of requested"
        found.append((target, f"{m.error_pct:+.2f} %", within))
    # At rate inf loadgen's verdict does not judge send lag either.
    if math.isfinite(m.requested) and not scenario.reference:
        lag_ok = m.lag_p99_ms <= SEND_LAG_P99_MS
        target = f"send lag p99 <= {SEND_LAG_P99_MS:g} ms"
        found.append((target, f"{m.lag_p99_ms:.2f} ms", lag_ok))
    cap = scenario.max_concurrency
    if cap:
        found.append(
            (f"in flight never above the cap ({cap})", str(m.max_in_flight), m.max_in_flight <= cap)
        )
        share = m.steady_share
        target = f">= {FULL_SHARE:.0%} of the cap for >= {STEADY_SHARE:.0%} of the steady state"
        figure = "cap never reached" if share is None else f"{share:.1%}"
        found.append((target, figure, share is not None and share >= STEADY_SHARE))
    found.append(("no failed requests", str(m.failed), m.failed == 0))
    return found


def target_lines(
    scenarios: list[Scenario], workers_list: list[int], medians: dict[tuple[str, int], Measurement]
) -> list[str]:
    """One "ok"/"MISSED" line per target and row."""
    lines = []
    for scenario in scenarios:
        for workers in workers_list:
            for target, figure, met in checks(scenario, medians[(scenario.name, workers)]):
                verdict = "ok" if met else "MISSED"
                lines.append(
                    f"  {scenario.name:<6} w{workers}  {target:<58}{figure:>18}  {verdict}"
                )
    return lines


LEGEND = """
requested: --request-rate. achieved: (N - 1) / (last release - first release) over the N requests
  sent, a request's release instant being start_time - queue_time (when the schedule released it,
  before any wait for a concurrency slot; a request that fell due while every slot was taken
  counts as released at its scheduled instant); err %: achieved / requested - 1. Not defined at
  rate inf, where every request is due at t0.
lag p50/p99/max: loadgen's send lag (release instant - scheduled instant), "loadgen.send_lag_ms".
  At rate inf only the requests released without waiting for a slot have a lag (the others count
  as released on time), so it is how long the first burst of `cap` requests takes to go out; like
  loadgen's own verdict, the targets do not judge it there.
max infl: most requests in flight at once over [start_time, start_time + latency] of the
  successful requests (the highest of the runs). steady≥95%: share of the steady state (from the
  first instant the cap is in flight to the last send; the ramp-down excluded) with at least
  {full:.0%} of the cap in flight, time-weighted; mean: mean in flight over the same window.
failed: over all runs. other%: the rest of the machine (this script, mock and client excluded;
  hypervisor steal included) over the client run, in % of one core; high values flag disturbed
  runs. Figures are medians of {repeat} runs unless said otherwise."""


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [s.name for s in SCENARIOS]
    parser.add_argument("--scenarios", nargs="+", choices=names, default=names, help="default: all")
    parser.add_argument("--workers", default="1,2", help="comma list of --workers values")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario and worker count")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiplies every scenario's --num-prompts"
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument("--keep", type=Path, help="keep result JSONs and logs in this directory")
    return parser.parse_args()


def main() -> None:
    """Run every selected scenario at every worker count and print the medians and targets."""
    args = parse_args()
    scenarios = [s for s in SCENARIOS if s.name in args.scenarios]
    workers_list = [int(w) for w in args.workers.split(",")]
    print(
        f"{machine_line('traffic fidelity')}; `loadgen run` against the embedded mock on the "
        f"same machine; medians of {args.repeat} runs, --scale {args.scale:g}",
        flush=True,
    )
    for s in scenarios:
        args_text = " ".join(s.client_args(s.scaled(args.scale)))
        print(f"  {s.name}: {s.label}; mock --itl-ms {s.itl_ms:g}; client {args_text}")
    print(HEADER, flush=True)
    runs: dict[tuple[str, int], list[Measurement]] = {}
    with tempfile.TemporaryDirectory(prefix="traffic-fidelity-") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for scenario in scenarios:
            with mock_server(
                out_dir / f"mock-{scenario.name}.err",
                scenario.itl_ms,
                ("--output-len", str(scenario.output_len)),
            ) as (url, server):
                for workers in workers_list:
                    for rep in range(args.repeat):
                        m = run_client(scenario, workers, url, server, out_dir, rep, args.scale)
                        runs.setdefault((scenario.name, workers), []).append(m)
                        print(f"{row(scenario, workers, m)}  (run {rep + 1})", flush=True)
    medians = {key: summarize(ms) for key, ms in runs.items()}
    print(f"\nMedians of {args.repeat} runs:")
    print(HEADER)
    for scenario in scenarios:
        for workers in workers_list:
            print(row(scenario, workers, medians[(scenario.name, workers)]))
    print(LEGEND.format(full=FULL_SHARE, repeat=args.repeat))
    for scenario in scenarios:
        n = scenario.scaled(args.scale)
        sched = schedule_error_pct(scenario, n)
        if sched is not None:
            print(
                f"  {scenario.name}: the schedule itself (seed 0, {n} requests) is {sched:+.2f} % "
                "off the requested rate by this measure."
            )
    print("\nTargets:")
    for line in target_lines(scenarios, workers_list, medians):
        print(line)
    if args.json:
        dump = {f"{name}-w{w}": [asdict(m) for m in ms] for (name, w), ms in runs.items()}
        args.json.write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()
