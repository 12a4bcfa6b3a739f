"""Capacity of `loadgen mock-server`: requests/s, SSE events/s and server CPU under `loadgen run`.

The mock server runs in its own process and the real client (`loadgen run --workers 1`) in
another, so on a 2-core machine each side has about one core. For each configuration the script
runs the client a few times, reads its result JSON, samples both processes' CPU time with psutil,
and prints medians side by side. Server CPU near 100 % means the server was the bottleneck;
client CPU near 100 % means loadgen was.

    python scripts/bench/mock_capacity.py            # all configurations, 3 repetitions
    python scripts/bench/mock_capacity.py --configs a64 c --repeat 1 --scale 0.5
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

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

SAMPLE_S = 0.1  # CPU sampling period during a run
BUSY_CPU_S = 0.005  # a sampling period in which the server used this much CPU is "in the run"
SATURATED_PCT = 75.0  # a process at this share of one core or more is taken as the bottleneck
MACHINE_FULL_PCT = 170.0  # server + client + other CPU at this (of 200 %) means no core was free


@dataclass(frozen=True)
class Config:
    """One benchmark configuration."""

    name: str
    input_len: int
    output_len: int
    concurrency: int
    itl_ms: float
    num_prompts: int
    purpose: str


CONFIGS = [
    Config("a64", 128, 128, 64, 0.0, 10000, "max event throughput"),
    Config("a256", 128, 128, 256, 0.0, 10000, "max event throughput, more streams"),
    Config("b", 1024, 128, 64, 0.0, 1500, "prompt tokenization cost"),
    Config("c", 128, 128, 1024, 50.0, 2048, "paced streams held at once"),
]


@dataclass
class Measurement:
    """What one client run gave."""

    duration_s: float
    completed: int
    failed: int
    req_per_s: float
    events_per_s: float
    server_cpu_pct: float
    server_us_per_event: float
    client_cpu_pct: float
    other_cpu_pct: float
    mean_ttft_ms: float
    mean_itl_ms: float
    p99_itl_ms: float


class Sample(NamedTuple):
    """Cumulative CPU seconds at one instant."""

    t: float
    server: float
    client: float  # loadgen's processes, the ones that have exited at their last sampled value
    other: float  # the rest of the machine (this script excluded) plus hypervisor steal


class CpuSampler(PeriodicSampler):
    """Samples the server's, the client tree's and the rest of the machine's CPU in a thread."""

    def __init__(self, server: psutil.Process, client_pid: int) -> None:
        self.server = server
        self.client = ProcessTreeCpu(client_pid)
        self.samples: list[Sample] = []
        super().__init__(SAMPLE_S, self._sample)

    def _sample(self) -> None:
        server, client = cpu_seconds(self.server), self.client.seconds()
        other = other_cpu_seconds(server, client)
        self.samples.append(Sample(time.monotonic(), server, client, other))

    def server_seconds(self) -> float:
        """The server's CPU seconds over the whole client run."""
        return self.samples[-1].server - self.samples[0].server

    def busy_window_pct(self) -> tuple[float, float]:
        """Client and other CPU, in % of one core, over the time the server was working."""
        pairs = itertools.pairwise(self.samples)
        busy = [i for i, (a, b) in enumerate(pairs) if b.server - a.server >= BUSY_CPU_S]
        if not busy:
            return 0.0, 0.0
        first, last = self.samples[busy[0]], self.samples[busy[-1] + 1]
        span = last.t - first.t
        other = max(last.other - first.other, 0.0)  # clock-tick rounding can make it negative
        return 100 * (last.client - first.client) / span, 100 * other / span


def run_client(
    config: Config, url: str, server: psutil.Process, out_dir: Path, rep: int, scale: float
) -> Measurement:
    """Run `loadgen run` once against the server and measure it."""
    filename = f"{config.name}-{rep}.json"
    num_prompts = max(1, round(config.num_prompts * scale))
    cmd = [
        *loadgen_command(),
        "run",
        "--base-url", url,
        "--model", "loadgen-mock",
        "--disable-tqdm",
        "--save-result",
        "--result-dir", str(out_dir),
        "--result-filename", filename,
        "--workers", "1",
        "--input-len", str(config.input_len),
        "--output-len", str(config.output_len),
        "--request-rate", "inf",
        "--max-concurrency", str(config.concurrency),
        "--num-prompts", str(num_prompts),
        "--percentile-metrics", "ttft,itl",
        "--metric-percentiles", "50,99",
    ]  # fmt: skip
    log_path = out_dir / f"{config.name}-{rep}.log"
    with log_path.open("w") as log:
        client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        with CpuSampler(server, client.pid) as sampler:
            rc = client.wait()
    if rc != 0:
        tail = log_path.read_text().strip().splitlines()[-10:]
        raise SystemExit(f"client failed (exit {rc}): {' '.join(cmd)}\n" + "\n".join(tail))
    result = json.loads((out_dir / filename).read_text())
    duration = result["duration"]
    server_cpu = sampler.server_seconds()
    client_pct, other_pct = sampler.busy_window_pct()
    return Measurement(
        duration_s=duration,
        completed=result["completed"],
        failed=result["failed"],
        req_per_s=result["request_throughput"],
        events_per_s=result["output_throughput"],
        server_cpu_pct=100 * server_cpu / duration,
        server_us_per_event=1e6 * server_cpu / max(result["total_output_tokens"], 1),
        client_cpu_pct=client_pct,
        other_cpu_pct=other_pct,
        mean_ttft_ms=result["mean_ttft_ms"],
        mean_itl_ms=result["mean_itl_ms"],
        p99_itl_ms=result["p99_itl_ms"],
    )


def median(runs: list[Measurement]) -> Measurement:
    """Per-field medians of several runs."""
    fields = asdict(runs[0]).keys()
    values = {f: statistics.median(getattr(r, f) for r in runs) for f in fields}
    return Measurement(**values)


def bottleneck(config: Config, m: Measurement) -> str:
    """Which side limited the run, judged by CPU."""
    server, client = m.server_cpu_pct >= SATURATED_PCT, m.client_cpu_pct >= SATURATED_PCT
    if server and client:
        return "both"
    if server or client:
        return "server" if server else "client"
    if m.server_cpu_pct + m.client_cpu_pct + m.other_cpu_pct >= MACHINE_FULL_PCT:
        return "machine (other load)"
    return "neither (paced)" if config.itl_ms else "neither"


HEADER = (
    f"{'cfg':<5}{'in':>5}{'out':>5}{'conc':>6}{'itl':>4}{'dur s':>6}{'req/s':>7}{'events/s':>9}"
    f"{'srv CPU%':>9}{'srv µs/ev':>10}{'srv cap ev/s':>13}{'cli CPU%':>9}{'other%':>7}"
    f"{'TTFT ms':>8}{'ITL mean/p99':>13}  saturated"
)


def row(config: Config, m: Measurement) -> str:
    """One table line."""
    itl = f"{m.mean_itl_ms:.1f}/{m.p99_itl_ms:.0f}"
    cap = 1e6 / m.server_us_per_event if m.server_us_per_event else 0.0
    return (
        f"{config.name:<5}{config.input_len:>5}{config.output_len:>5}{config.concurrency:>6}"
        f"{config.itl_ms:>4g}{m.duration_s:>6.1f}{m.req_per_s:>7.0f}{m.events_per_s:>9.0f}"
        f"{m.server_cpu_pct:>9.0f}{m.server_us_per_event:>10.1f}{cap:>13.0f}"
        f"{m.client_cpu_pct:>9.0f}{m.other_cpu_pct:>7.0f}{m.mean_ttft_ms:>8.0f}{itl:>13}"
        f"  {bottleneck(config, m)}"
    )


NOTES = """
events/s: output tokens/s, one SSE event per token. CPU % is of one core.
srv CPU%: mock server CPU time over the benchmark duration; srv cap ev/s = 1e6 / srv µs/ev, the
  events/s one full core of server would sustain (an extrapolation).
cli CPU%: loadgen's main and worker process; other%: the rest of the machine plus hypervisor
  steal; both over the time the server was busy.
saturated: a side at >= {sat:g} % is the bottleneck; "machine" when srv + cli + other >= {full:g} %.
Configurations:"""


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [c.name for c in CONFIGS]
    parser.add_argument("--configs", nargs="+", choices=names, default=names, help="default: all")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiplies every configuration's --num-prompts"
    )
    parser.add_argument(
        "--min-duration", type=float, default=3.0, help="warn about runs shorter than this (s)"
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument("--keep", type=Path, help="keep result JSONs and logs in this directory")
    return parser.parse_args()


def main() -> None:
    """Measure every selected configuration and print the medians."""
    args = parse_args()
    configs = [c for c in CONFIGS if c.name in args.configs]
    print(
        f"{machine_line('mock-server capacity')}; client `loadgen run --workers 1` on the same "
        f"machine; medians of {args.repeat} runs",
        flush=True,
    )
    print(HEADER, flush=True)
    runs: dict[str, list[Measurement]] = {}
    with tempfile.TemporaryDirectory(prefix="mock-capacity-") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for itl_ms in sorted({c.itl_ms for c in configs}):
            with mock_server(out_dir / f"mock-server-itl{itl_ms:g}.err", itl_ms) as (url, server):
                for config in (c for c in configs if c.itl_ms == itl_ms):
                    for rep in range(args.repeat):
                        m = run_client(config, url, server, out_dir, rep, args.scale)
                        runs.setdefault(config.name, []).append(m)
                        print(f"{row(config, m)}  (run {rep + 1})", flush=True)
                        if m.failed:
                            print(f"  warning: {m.failed} requests failed", flush=True)
                        if m.duration_s < args.min_duration:
                            print(f"  warning: shorter than {args.min_duration:g} s; raise --scale")
    print(f"\nMedians of {args.repeat} runs:")
    print(HEADER)
    for config in configs:
        print(row(config, median(runs[config.name])))
    print(NOTES.format(sat=SATURATED_PCT, full=MACHINE_FULL_PCT))
    for config in configs:
        print(f"  {config.name}: {config.purpose}")
    if args.json:
        dump = {name: [asdict(m) for m in ms] for name, ms in runs.items()}
        args.json.write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()
