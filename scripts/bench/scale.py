"""Scale: loadgen holding 1,000 to 20,000 concurrent streams against the mock, and what it costs.

For each step of N streams the script starts `loadgen mock-server` in its own process (a fresh
one per step, with the open-file limit the step needs), then `loadgen run --max-concurrency N`
with enough requests that N streams are open together for a while: at `--request-rate inf`
every slot sends `--requests-per-stream` requests back to back, each a stream of
`--output-len` token events paced by the mock's ITL. The ITL grows with N (N / --events-per-s,
never under --min-itl-ms) so that the machine's two cores carry the same events/s at every
step and the streams, not the events, are what grows. While the run goes it samples the RSS
of loadgen's coordinator, each worker and the mock every --sample-s.

Per step it prints: the streams asked for and the most actually open at once (the overlap of
each request's sent..end interval in the records file), requests, failures grouped by reason,
connections pre-opened before t0 and opened during the run, each client process's RSS (peak,
and its median while at least 95 % of the streams were open) and KB per open stream above the
idle baseline (a run of --baseline-streams streams of the same shape), the mock's RSS and CPU,
and loadgen's verdict line. Targets (issue 15): 20,000 streams with no failure, no connection
opened mid-run, under 100 KB of client memory per open stream.

    flock /tmp/loadgen-bench.lock .venv/bin/python scripts/bench/scale.py
    flock /tmp/loadgen-bench.lock .venv/bin/python scripts/bench/scale.py --streams 1000 5000

The open-file limit: each step needs about N + 1,000 descriptors in the mock and in the busiest
worker; the script raises its own limit (soft and hard: as root, or within the hard limit) and
the processes it starts inherit it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import connect_floor
import numpy as np
import psutil
from common import loadgen_command, machine_line
from scale_sampling import (
    RssSampler,
    open_over_time,
    read_records,
    reason_key,
    time_wait_count,
)

from loadgen.mock.process import EmbeddedMockServer, MockServerError

TARGET_KB_PER_STREAM = 100.0
STEADY_SHARE = 0.95  # "steady state": at least this share of the streams open at once
FILES_MARGIN = 1024  # descriptors a process needs besides its connections
MOCK_SPREAD = 1.2  # SO_REUSEPORT's hash spreads connections unevenly: room for 20 % more


@dataclass
class Step:
    """What one step asks for."""

    streams: int
    requests: int
    itl_ms: float
    mock_processes: int


@dataclass
class Outcome:
    """What one step measured."""

    step: Step
    duration_s: float
    completed: int
    failed: int
    reasons: dict[str, int]
    preopened: int  # connections open at t0
    opened_at_ready: int  # connections the workers reported open before t0
    mid_run_connections: int  # requests that opened a connection during the run
    peak_open: int  # most requests in flight at once (sent..end overlap)
    steady_s: float  # time with >= STEADY_SHARE of the streams open
    events_per_s: float
    mean_itl_ms: float
    p99_itl_ms: float
    rss_peak_mb: dict[str, float] = field(default_factory=dict)  # role -> MB
    rss_steady_mb: dict[str, float] = field(default_factory=dict)  # role -> MB
    mock_cpu_pct: float = 0.0
    preopen_s: float = float("nan")  # from the mock's first new connection to t0
    time_wait: int = 0  # TIME_WAIT sockets on the machine when the step began
    floor: str = ""  # connect_floor's line for as many connections
    verdict: str = ""
    notes: list[str] = field(default_factory=list)  # loadgen's warning/note lines


def raise_file_limit(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted`` (above the hard limit only with
    CAP_SYS_RESOURCE), else to the hard limit; the soft limit now in force. The mock and
    loadgen inherit it: the mock is spread over processes to fit (mock_processes_for), and
    loadgen refuses a run its workers' limit cannot hold, with one line that says so."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = hard == resource.RLIM_INFINITY
    for new in ((wanted, hard if unlimited or hard >= wanted else wanted), (hard, hard)):
        if new[0] <= soft or (new[0] == resource.RLIM_INFINITY and unlimited):
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, new)
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def mock_processes_for(streams: int, limit: int) -> int:
    """Mock processes sharing the port (--reuse-port) so that each holds its connections
    within the open-file limit."""
    return max(1, -(-int(MOCK_SPREAD * streams) // (limit - FILES_MARGIN)))


@contextmanager
def mock_servers(
    count: int, itl_ms: float, extra_args: tuple[str, ...], err_prefix: Path
) -> Iterator[tuple[str, list[psutil.Process]]]:
    """``count`` mock-server processes on one port (SO_REUSEPORT); yield its URL and them."""
    with ExitStack() as stack:
        url, processes = "", []
        for i in range(count):
            port = ("--port", url.rsplit(":", 1)[1]) if url else ()
            server = EmbeddedMockServer(
                itl_ms=itl_ms,
                extra_args=(*extra_args, "--reuse-port", *port),
                stderr_path=Path(f"{err_prefix}.{i}.err"),
            )
            try:
                url = server.start()
            except MockServerError as exc:
                raise SystemExit(str(exc)) from None
            stack.callback(server.stop, 10)
            assert server.process is not None
            processes.append(psutil.Process(server.process.pid))
        yield url, processes


def itl_for(streams: int, args: argparse.Namespace) -> float:
    """The mock's ITL for a step: fixed by --itl-ms, else N / --events-per-s, at least
    --min-itl-ms."""
    if args.itl_ms is not None:
        return args.itl_ms
    return max(args.min_itl_ms, 1000.0 * streams / args.events_per_s)


def run_step(step: Step, args: argparse.Namespace, out_dir: Path) -> Outcome:
    """Start a mock for the step, run loadgen against it while sampling RSS, and measure."""
    name = f"scale-{step.streams}"
    time_wait = time_wait_count()
    floor = connect_floor.measure(step.streams, args.workers).line() if args.floor else ""
    keepalive = ("--keepalive-timeout", f"{args.server_keepalive_s:g}")
    keepalive = keepalive if args.server_keepalive_s else ()
    mock_args = ("--output-len", str(args.output_len), *keepalive, *args.mock_args)
    mocks = mock_servers(step.mock_processes, step.itl_ms, mock_args, out_dir / f"{name}.mock")
    with mocks as (url, mock):
        cmd = [
            *loadgen_command(),
            "run",
            "--base-url", url,
            "--model", "loadgen-mock",
            "--disable-tqdm",
            "--save-result",
            "--result-dir", str(out_dir),
            "--result-filename", f"{name}.json",
            "--workers", str(args.workers),
            "--input-len", str(args.input_len),
            "--output-len", str(args.output_len),
            "--request-rate", args.request_rate,
            "--max-concurrency", str(step.streams),
            "--num-prompts", str(step.requests),
            "--num-warmups", "0",
            "--no-dataset-cache",  # every step builds its dataset, as a first run does
            "--percentile-metrics", "ttft,itl",
            "--metric-percentiles", "50,99",
            "--idle-timeout", str(max(60.0, 10 * step.itl_ms / 1000)),
        ]  # fmt: skip
        log_path = out_dir / f"{name}.log"
        with log_path.open("w") as log:
            client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            with RssSampler(args.sample_s, client.pid, mock) as sampler:
                rc = client.wait()
    log_text = log_path.read_text(errors="replace")
    if rc != 0:
        tail = "\n".join(log_text.strip().splitlines()[-10:])
        raise SystemExit(f"loadgen failed at {step.streams} streams (exit {rc}):\n{tail}")
    result = json.loads((out_dir / f"{name}.json").read_text())
    records = read_records(out_dir / f"{name}.records.arrow")
    outcome = measure(step, result, records, sampler, log_text)
    outcome.time_wait, outcome.floor = time_wait, floor
    return outcome


def measure(
    step: Step,
    result: dict,
    records: dict,
    sampler: RssSampler,
    log_text: str,
) -> Outcome:
    """One step's figures from its result JSON, records and RSS samples."""
    sent, end = records["sent_ns"], records["end_ns"]
    valid = (sent >= 0) & (end >= sent)
    instants, counts = open_over_time(sent[valid], end[valid])
    peak_open = int(counts.max()) if len(counts) else 0
    steady = counts >= STEADY_SHARE * step.streams
    # The time from each instant to the next, summed over the instants that start a steady span.
    spans = np.diff(instants, append=instants[-1] if len(instants) else 0)
    steady_ns = int(spans[steady].sum())
    t0 = records["t0_ns"]
    if steady.any():
        window = (t0 + int(instants[steady].min()), t0 + int(instants[np.flatnonzero(steady)[-1]]))
    else:
        window = (0, 0)
    roles = sampler.roles()
    by_role = np.array([sampler.per_role(s) for s in sampler.samples], dtype=np.float64)
    times = np.array([s.t_ns for s in sampler.samples])
    in_window = (times >= window[0]) & (times <= window[1])
    rss_peak = {r: by_role[:, i].max() / 2**20 for i, r in enumerate(roles)}
    steady_rows = by_role[in_window] if in_window.any() else by_role
    rss_steady = {r: float(np.median(steady_rows[:, i])) / 2**20 for i, r in enumerate(roles)}
    reasons = Counter(reason_key(e) for e in records["error"] if e)
    lg = result.get("loadgen", {})
    notes = [
        line.strip()
        for line in log_text.splitlines()
        if line.lstrip().startswith(("warning:", "note:"))
    ]
    # Pre-opening began when the mock's open files rose above what it had before the run.
    before = sampler.samples[0].mock_fds + min(16, step.streams // 4)
    rising = [s.t_ns for s in sampler.samples if s.mock_fds > before and s.t_ns < t0]
    preopen_s = (t0 - rising[0]) / 1e9 if rising else float("nan")
    in_run = [s for s in sampler.samples if t0 <= s.t_ns <= t0 + int(end[valid].max(initial=0))]
    mock_cpu_pct = float("nan")
    if len(in_run) >= 2:
        first, last = in_run[0], in_run[-1]
        mock_cpu_pct = 1e11 * (last.mock_cpu_s - first.mock_cpu_s) / (last.t_ns - first.t_ns)
    return Outcome(
        step=step,
        duration_s=result["duration"],
        completed=result["completed"],
        failed=result["failed"],
        reasons=dict(reasons.most_common()),
        preopened=lg.get("connections_preopened", 0),
        opened_at_ready=records["connections"],
        mid_run_connections=int((records["connect_ns"] > 0).sum()),
        peak_open=peak_open,
        steady_s=steady_ns / 1e9,
        events_per_s=result["output_throughput"],
        mean_itl_ms=result.get("mean_itl_ms", float("nan")),
        p99_itl_ms=result.get("p99_itl_ms", float("nan")),
        rss_peak_mb=rss_peak,
        rss_steady_mb=rss_steady,
        mock_cpu_pct=mock_cpu_pct,
        preopen_s=preopen_s,
        verdict=lg.get("verdict", ""),
        notes=notes,
    )


def kb_per_stream(outcome: Outcome, base: Outcome | None, role: str, peak: bool = True) -> float:
    """KB of RSS per open stream above the baseline run's (per stream added beyond it)."""
    mb = outcome.rss_peak_mb if peak else outcome.rss_steady_mb
    base_mb = (base.rss_peak_mb if peak else base.rss_steady_mb).get(role, 0.0) if base else 0.0
    extra_streams = outcome.step.streams - (base.step.streams if base else 0)
    return 1024 * (mb.get(role, 0.0) - base_mb) / max(extra_streams, 1)


def client_roles(outcome: Outcome) -> list[str]:
    """The client's processes: the coordinator and each worker."""
    return [r for r in outcome.rss_peak_mb if r != "mock"]


def report_step(outcome: Outcome, base: Outcome | None) -> list[str]:
    """The lines printed for one step."""
    s = outcome.step
    ok_fail = outcome.failed == 0
    ok_conn = outcome.mid_run_connections == 0
    client_kb = sum(kb_per_stream(outcome, base, r) for r in client_roles(outcome))
    ok_mem = client_kb < TARGET_KB_PER_STREAM
    lines = [
        f"{s.streams:>6} streams, {s.requests} requests, ITL {s.itl_ms:g} ms: "
        f"peak open {outcome.peak_open} ({outcome.steady_s:.1f} s at >= "
        f"{100 * STEADY_SHARE:g} %), {outcome.duration_s:.1f} s, "
        f"{outcome.events_per_s:,.0f} events/s, ITL mean/p99 "
        f"{outcome.mean_itl_ms:.0f}/{outcome.p99_itl_ms:.0f} ms",
        f"  failures: {outcome.failed}" + ("" if ok_fail else "  MISSED"),
    ]
    lines += [f"    {n} x {reason}" for reason, n in list(outcome.reasons.items())[:5]]
    lines.append(
        f"  connections: {outcome.opened_at_ready} pre-opened in {preopen_time(outcome)} "
        f"({outcome.preopened} open at t0), {outcome.mid_run_connections} opened mid-run"
        + ("" if ok_conn else "  MISSED")
    )
    if outcome.floor:
        lines.append(f"  {outcome.floor}")
    lines.append(f"  TCP sockets in TIME_WAIT on the machine at the start: {outcome.time_wait}")
    lines.append(f"  {'RSS MB':<12}{'peak':>8}{'steady':>8}{'KB/stream':>11}")
    for role in outcome.rss_peak_mb:
        kb = kb_per_stream(outcome, base, role) if base is not outcome else float("nan")
        lines.append(
            f"  {role:<12}{outcome.rss_peak_mb[role]:>8.0f}{outcome.rss_steady_mb[role]:>8.0f}"
            f"{kb:>11.1f}"
        )
    if base is not outcome:
        lines.append(
            f"  client KB per open stream (peak RSS above the {base.step.streams if base else 0}"
            f"-stream baseline): {client_kb:.1f}" + ("" if ok_mem else "  MISSED")
        )
    lines.append(
        f"  mock: {s.mock_processes} process(es) on one port, CPU {outcome.mock_cpu_pct:.0f} % "
        "of a core during the run"
    )
    lines += [f"  loadgen said: {note[:300]}" for note in outcome.notes[:4]]
    lines.append(f"  {outcome.verdict}")
    return lines


def preopen_time(outcome: Outcome) -> str:
    """How long pre-opening took, as the mock's open files saw it."""
    if outcome.preopen_s != outcome.preopen_s:  # NaN: between two samples
        return "under a sampling period"
    return f"about {outcome.preopen_s:.1f} s"


def summary_table(outcomes: list[Outcome], base: Outcome) -> list[str]:
    """One line per step: the figures the targets are judged on."""
    workers = [r for r in client_roles(outcomes[0]) if r != "coordinator"]
    head = (
        f"{'streams':>8}{'peak':>7}{'reqs':>7}{'ITL':>6}{'failed':>7}{'pre-open':>9}"
        f"{'mid-run':>8}{'coord MB':>9}{'KB/str':>7}"
        + "".join(f"{f'w{i} MB':>7}{'KB/str':>7}" for i in range(len(workers)))
        + f"{'client KB/str':>14}{'mock MB':>8}{'mock CPU':>9}  verdict"
    )
    lines = [head]
    for o in outcomes:
        per_role = "".join(
            f"{o.rss_peak_mb[r]:>7.0f}{kb_per_stream(o, base, r):>7.1f}" for r in workers
        )
        client_kb = sum(kb_per_stream(o, base, r) for r in client_roles(o))
        lines.append(
            f"{o.step.streams:>8}{o.peak_open:>7}{o.step.requests:>7}{o.step.itl_ms:>6g}"
            f"{o.failed:>7}{o.opened_at_ready:>9}{o.mid_run_connections:>8}"
            f"{o.rss_peak_mb['coordinator']:>9.0f}{kb_per_stream(o, base, 'coordinator'):>7.1f}"
            f"{per_role}{client_kb:>14.1f}{o.rss_peak_mb['mock']:>8.0f}"
            f"{o.mock_cpu_pct:>8.0f}%  {o.verdict[:70]}"
        )
    return lines


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--streams", type=int, nargs="+", default=[1000, 5000, 10000, 20000])
    add("--workers", type=int, default=2, help="loadgen --workers")
    add("--requests-per-stream", type=int, default=1, help="--num-prompts = this x streams")
    add("--request-rate", default="inf", help="loadgen --request-rate (default inf)")
    add("--input-len", type=int, default=32)
    add("--output-len", type=int, default=32, help="token events per stream")
    add("--itl-ms", type=float, help="the mock's ITL at every step (default: see --events-per-s)")
    add("--events-per-s", type=float, default=20000.0, help="ITL = streams / this (default)")
    add("--min-itl-ms", type=float, default=250.0)
    add(
        "--mock-processes",
        type=int,
        help="mock processes on one port (default: as many as the open-file limit needs)",
    )
    add(
        "--server-keepalive-s",
        type=float,
        default=60.0,
        help="the mock's --keepalive-timeout (default 60; 0: its personality's, 5 s for vllm)",
    )
    add("--no-floor", dest="floor", action="store_false", help="skip the connect() floor")
    add("--settle-s", type=float, default=61.0, help="pause after a step of 5,000+ streams")
    add("--baseline-streams", type=int, default=100, help="the idle baseline's streams")
    add("--sample-s", type=float, default=0.15, help="RSS sampling period")
    add("--mock-args", nargs=argparse.REMAINDER, default=[], help="more mock-server options")
    add("--keep", type=Path, help="keep result JSONs, records and logs in this directory")
    add("--json", type=Path, help="also write every step's figures here")
    return parser.parse_args()


def main() -> None:
    """Run the baseline and every step; print each as it ends, then the table."""
    args = parse_args()
    limit = raise_file_limit(max(args.streams) + FILES_MARGIN)
    print(
        f"{machine_line('scale')}; loadgen --workers {args.workers}, --request-rate "
        f"{args.request_rate}, {args.requests_per_stream} requests per stream of "
        f"{args.output_len} events, input {args.input_len} tokens; open-file limit {limit}",
        flush=True,
    )
    steps = [
        Step(
            n,
            n * args.requests_per_stream,
            itl_for(n, args),
            args.mock_processes or mock_processes_for(n, limit),
        )
        for n in [args.baseline_streams, *args.streams]
    ]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for i, step in enumerate(steps):
            if i and steps[i - 1].streams >= 5000:
                # Its client's closed connections hold their local ports in TIME_WAIT for 60 s.
                time.sleep(args.settle_s)
            outcome = run_step(step, args, out_dir)
            outcomes.append(outcome)
            base = outcomes[0]
            label = "baseline" if outcome is base else "step"
            print(f"\n[{label}]", *report_step(outcome, base), sep="\n", flush=True)
    base, measured = outcomes[0], outcomes[1:]
    print(
        "\nSummary (peak RSS; KB/stream above the baseline):",
        *summary_table(measured, base),
        sep="\n",
    )
    worst = max(measured, key=lambda o: o.step.streams)
    client_kb = sum(kb_per_stream(worst, base, r) for r in client_roles(worst))
    met = worst.failed == 0 and worst.mid_run_connections == 0 and client_kb < TARGET_KB_PER_STREAM
    print(
        f"\ntarget at {worst.step.streams} streams (0 failures, 0 connections opened mid-run, "
        f"< {TARGET_KB_PER_STREAM:g} KB per stream): {'met' if met else 'MISSED'} "
        f"({worst.failed} failed, {worst.mid_run_connections} mid-run, {client_kb:.1f} KB)"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))


if __name__ == "__main__":
    main()
