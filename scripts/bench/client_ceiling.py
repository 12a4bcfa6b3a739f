"""Client ceiling: loadgen vs `vllm bench serve` against nginx serving a pre-baked SSE stream.

nginx (one worker, loopback) answers every POST with the same static file of a stream shape
(scripts/bench/ceiling_streams.py; by default vLLM's: 128 completion events, a usage event and
`data: [DONE]`). The server does almost no work per event, so the client is what limits
requests/s. For each client configuration (loadgen `--workers 1`
and `--workers 2`, `vllm bench serve` through scripts/bench/vllm_bench_serve.py when
/work/vllm-venv exists) at each concurrency, the script runs the client a few times and prints
medians of requests/s, SSE events/s, client CPU per SSE event, nginx CPU and mean TTFT, then
the loadgen(workers=2)/vllm ratio and whether the targets hold.

    python scripts/bench/client_ceiling.py                  # everything, 3 repetitions
    python scripts/bench/client_ceiling.py --repeat 1 --concurrency 64 --no-vllm
    python scripts/bench/client_ceiling.py --baseline 67b5180 --no-vllm --workers 2
    python scripts/bench/client_ceiling.py --shape all --workers 2 --concurrency 64

``--shape`` runs each client on each of the servers' stream shapes (vllm, usage-on-choices,
spaced, chat) and prints each shape's loadgen --workers 2 requests/s against the vllm shape's
in the same run (target: within 15 %), and whether every client counted exactly 128 output
tokens per request, as upstream's rule gives for each shape.

``--baseline REF`` also runs loadgen as it was at git commit REF (a temporary worktree, the
same interpreter and packages) beside the working tree, run for run, and prints the tree/REF
ratios: the check that a change costs nothing at the ceiling. On 2 shared cores a run's
absolute figures drift; ratios of interleaved runs do not, so use --repeat 5 or more.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import NamedTuple

import psutil
from ceiling_streams import SHAPES, backend, endpoint, models_json, stream
from common import (
    PeriodicSampler,
    ProcessTreeCpu,
    cpu_seconds,
    loadgen_command,
    make_tokenizer_dir,
    other_cpu_seconds,
    stop_process,
)
from scrape_cost import vllm_page

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "scripts" / "nginx" / "ceiling.conf.template"
VLLM_DRIVER = REPO / "scripts" / "bench" / "vllm_bench_serve.py"
DEFAULT_VLLM_PYTHON = Path("/work/vllm-venv/bin/python")

MODEL = "loadgen-mock"  # ceiling_streams.MODEL
EVENTS = 128  # completion events per response; one token each
PROMPT_TOKENS = 128
SAMPLE_S = 0.05  # CPU and request-counter sampling period
MIN_BUSY_REQUESTS = 3  # a sampling period with this many client requests is "in the run"
MAX_GAP_SAMPLES = 2  # idle periods tolerated inside one measured phase

TARGET_RATIO = 8.0  # loadgen --workers 2 requests/s over vllm's
TARGET_US_PER_EVENT = 3.0  # loadgen --workers 2 steady-state client CPU per SSE event
TARGET_SHAPE_RATIO = 0.85  # each shape's loadgen --workers 2 req/s over the vllm shape's

STUB_STATUS = re.compile(rb"\s(\d+)\s+(\d+)\s+(\d+)\s")


@dataclass(frozen=True)
class Client:
    """One client configuration: loadgen with a worker count, or vllm bench serve."""

    name: str
    workers: int  # 0 for vllm
    extra: tuple[str, ...] = ()  # loadgen flags of this configuration
    source: Path | None = None  # a checkout of another commit to run instead (--baseline)

    def command(self, vllm_python: Path) -> list[str]:
        """The command line up to the shared benchmark flags."""
        if not self.workers:
            return [str(vllm_python), str(VLLM_DRIVER)]
        loadgen = [sys.executable, "-m", "loadgen"] if self.source else loadgen_command()
        return [*loadgen, "run", "--workers", str(self.workers), *self.extra]

    def environment(self) -> dict[str, str]:
        """The client's environment: offline, and the baseline's sources first on the path."""
        env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        if self.source:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(self.source), env.get("PYTHONPATH")])
            )
        return env


@dataclass
class Measurement:
    """What one client run gave."""

    wall_s: float  # the client process from start to exit
    duration_s: float  # the benchmark phase, as the client reports it
    completed: int
    failed: int
    req_per_s: float
    events_per_s: float
    total_us_per_event: float  # getrusage(RUSAGE_CHILDREN) over the whole client process
    steady_us_per_event: float  # psutil, client tree, measured phase only
    steady_cpu_pct: float  # client tree CPU in the measured phase, % of one core
    coordinator_cpu_pct: float  # of it, the client's main process (loadgen's coordinator)
    nginx_cpu_pct: float  # nginx worker CPU in the measured phase, % of one core
    nginx_us_per_event: float
    other_cpu_pct: float  # the rest of the machine in the measured phase (steal included)
    mean_ttft_ms: float
    tokens_per_request: float  # output tokens counted per completed request (128 expected)


class Sample(NamedTuple):
    """Cumulative counters at one instant."""

    t: float
    requests: int  # nginx's request counter, this script's own status polls excluded
    nginx: float  # nginx worker CPU seconds
    client: float  # client tree CPU seconds (exited processes at their last sampled value)
    coordinator: float  # the client's main process's CPU seconds (loadgen's coordinator)
    other: float  # the rest of the machine (this script excluded) plus hypervisor steal


class NginxStatus:
    """Reads nginx's stub_status request counter over one kept-alive connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.polls = 0
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def requests(self) -> int:
        """Requests nginx has served, not counting this reader's own polls."""
        self.conn.request("GET", "/nginx_status")
        body = self.conn.getresponse().read()
        self.polls += 1
        match = STUB_STATUS.search(body)
        if match is None:
            raise RuntimeError(f"unexpected stub_status reply: {body!r}")
        return int(match.group(3)) - self.polls

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class Sampler(PeriodicSampler):
    """Samples nginx's request count, nginx's CPU and the client tree's CPU in a thread."""

    def __init__(self, status: NginxStatus, nginx: psutil.Process, client_pid: int) -> None:
        self.status = status
        self.nginx = nginx
        self.client = ProcessTreeCpu(client_pid)
        self.coordinator = psutil.Process(client_pid)
        self.coordinator_s = 0.0  # its last value, kept once it has exited
        self.samples: list[Sample] = []
        super().__init__(SAMPLE_S, self._sample)

    def _sample(self) -> None:
        requests = self.status.requests()
        nginx, client = cpu_seconds(self.nginx), self.client.seconds()
        with suppress(psutil.Error):
            self.coordinator_s = cpu_seconds(self.coordinator)
        other = other_cpu_seconds(nginx, client)
        sample = Sample(time.monotonic(), requests, nginx, client, self.coordinator_s, other)
        self.samples.append(sample)

    def measured_phase(self) -> tuple[Sample, Sample] | None:
        """First and last sample around the longest stretch of periods with client traffic.

        A period is busy when nginx served at least MIN_BUSY_REQUESTS requests in it, which
        leaves out readiness probes and single test requests; stretches separated by at most
        MAX_GAP_SAMPLES idle periods are joined.
        """
        pairs = zip(self.samples, self.samples[1:], strict=False)
        busy = [i for i, (a, b) in enumerate(pairs) if b.requests - a.requests >= MIN_BUSY_REQUESTS]
        if not busy:
            return None
        stretches: list[list[int]] = [[busy[0], busy[0]]]
        for i in busy[1:]:
            if i - stretches[-1][1] <= MAX_GAP_SAMPLES + 1:
                stretches[-1][1] = i
            else:
                stretches.append([i, i])
        first, last = max(stretches, key=lambda s: s[1] - s[0])
        return self.samples[first], self.samples[last + 1]


def children_cpu_seconds() -> float:
    """User plus system CPU seconds of all waited-for descendants of this process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def loadgen_commit() -> str:
    """The repository's HEAD commit (the working tree may differ), or "unknown"."""
    with suppress(OSError, subprocess.CalledProcessError):
        cmd = ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    return "unknown"


def write_site(prefix: Path, port: int) -> Path:
    """Write the static files and nginx.conf under `prefix`; return the config's path."""
    root = prefix / "html"
    for shape in SHAPES:
        api = root / shape / "v1"
        (api / "chat").mkdir(parents=True)
        (api / endpoint(shape).removeprefix("/v1/")).write_bytes(
            stream(shape, EVENTS, PROMPT_TOKENS)
        )
        (api / "models").write_bytes(models_json())
    (root / "metrics").write_text(vllm_page())  # --scrape-cost's --telemetry-url
    (prefix / "tmp").mkdir()
    conf = TEMPLATE.read_text()
    for key, value in {"@PREFIX@": str(prefix), "@ROOT@": str(root), "@PORT@": str(port)}.items():
        conf = conf.replace(key, value)
    path = prefix / "nginx.conf"
    path.write_text(conf)
    return path


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def nginx_server(nginx: str, prefix: Path, port: int) -> Iterator[psutil.Process]:
    """Run nginx with the ceiling config under `prefix`; yield its worker process."""
    conf = write_site(prefix, port)
    args = [nginx, "-c", str(conf), "-p", str(prefix)]
    log = (prefix / "nginx.out").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield wait_nginx(proc, args, port, prefix)
    finally:
        stop_process(proc)
        log.close()


def wait_nginx(proc: subprocess.Popen, args: list[str], port: int, prefix: Path) -> psutil.Process:
    """Wait until nginx answers /v1/models; return its (single) worker process."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and proc.poll() is None:
        with suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", f"/{SHAPES[0]}/v1/models")
            if conn.getresponse().status == 200:
                conn.close()
                workers = psutil.Process(proc.pid).children()
                if len(workers) == 1:
                    return workers[0]
        time.sleep(0.05)
    out = (prefix / "nginx.out").read_text() + (prefix / "error.log").read_text()
    raise SystemExit(f"nginx did not start: {' '.join(args)}\n{out}")


def run_client(
    client: Client,
    shape: str,
    concurrency: int,
    rep: int,
    args: argparse.Namespace,
    port: int,
    tokenizer: Path,
    nginx: psutil.Process,
    out_dir: Path,
) -> Measurement:
    """Run one client once against nginx serving ``shape`` and measure it."""
    stem = f"{client.name}-{shape}-c{concurrency}-{rep}"
    cmd = [
        *client.command(args.vllm_python),
        "--base-url", f"http://127.0.0.1:{port}/{shape}",
        "--backend", backend(shape),
        "--endpoint", endpoint(shape),
        "--model", MODEL,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(PROMPT_TOKENS),
        "--random-output-len", str(EVENTS),
        "--num-prompts", str(args.num_prompts),
        "--request-rate", "inf",
        "--max-concurrency", str(concurrency),
        "--disable-tqdm",
        "--save-result",
        "--result-dir", str(out_dir),
        "--result-filename", f"{stem}.json",
    ]  # fmt: skip
    env = client.environment()
    log_path = out_dir / f"{stem}.log"
    status = NginxStatus(port)
    try:
        with log_path.open("w") as log:
            before, start = children_cpu_seconds(), time.monotonic()
            # Not run from the repository: `python -m` puts the working directory first on the
            # path, ahead of a baseline's PYTHONPATH.
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out_dir)
            with Sampler(status, nginx, proc.pid) as sampler:
                rc = proc.wait()
            total_cpu, wall = children_cpu_seconds() - before, time.monotonic() - start
    finally:
        status.close()
    if rc != 0:
        tail = log_path.read_text().strip().splitlines()[-15:]
        raise SystemExit(f"client failed (exit {rc}): {' '.join(cmd)}\n" + "\n".join(tail))
    result = json.loads((out_dir / f"{stem}.json").read_text())
    events = max(result["total_output_tokens"], 1)
    phase = sampler.measured_phase()
    if phase is None:
        raise SystemExit(f"no traffic seen at nginx during: {' '.join(cmd)}")
    first, last = phase
    span = last.t - first.t
    phase_events = max((last.requests - first.requests) * EVENTS, 1)
    completed = result["completed"]
    return Measurement(
        wall_s=wall,
        duration_s=result["duration"],
        completed=completed,
        failed=result.get("failed", args.num_prompts - completed),
        req_per_s=result["request_throughput"],
        events_per_s=result["output_throughput"],
        total_us_per_event=1e6 * total_cpu / events,
        steady_us_per_event=1e6 * (last.client - first.client) / phase_events,
        steady_cpu_pct=100 * (last.client - first.client) / span,
        coordinator_cpu_pct=100 * (last.coordinator - first.coordinator) / span,
        nginx_cpu_pct=100 * (last.nginx - first.nginx) / span,
        nginx_us_per_event=1e6 * (last.nginx - first.nginx) / phase_events,
        other_cpu_pct=max(100 * (last.other - first.other) / span, 0.0),  # tick rounding
        mean_ttft_ms=result["mean_ttft_ms"],
        tokens_per_request=result["total_output_tokens"] / max(completed, 1),
    )


def median(runs: list[Measurement]) -> Measurement:
    """Per-field medians of several runs."""
    values = {f: statistics.median(getattr(r, f) for r in runs) for f in asdict(runs[0])}
    return Measurement(**values)


HEADER = (
    f"{'client':<17}{'shape':>17}{'conc':>5}{'wall s':>7}{'dur s':>6}{'ok':>6}{'fail':>5}"
    f"{'req/s':>8}{'events/s':>10}{'cli µs/ev':>10}{'steady µs/ev':>13}{'cli CPU%':>9}"
    f"{'coord%':>7}{'nginx CPU%':>11}{'nginx µs/ev':>12}{'other%':>7}{'TTFT ms':>9}{'tok/req':>8}"
)


def row(client: Client, shape: str, concurrency: int, m: Measurement) -> str:
    """One table line."""
    return (
        f"{client.name:<17}{shape:>17}{concurrency:>5}{m.wall_s:>7.1f}{m.duration_s:>6.2f}"
        f"{m.completed:>6.0f}{m.failed:>5.0f}{m.req_per_s:>8.0f}{m.events_per_s:>10.0f}"
        f"{m.total_us_per_event:>10.2f}{m.steady_us_per_event:>13.2f}{m.steady_cpu_pct:>9.0f}"
        f"{m.coordinator_cpu_pct:>7.1f}{m.nginx_cpu_pct:>11.0f}{m.nginx_us_per_event:>12.3f}{m.other_cpu_pct:>7.0f}"
        f"{m.mean_ttft_ms:>9.2f}{m.tokens_per_request:>8.1f}"
    )


NOTES = """
wall s: the client process from start to exit; dur s: its benchmark phase (result JSON "duration").
req/s, events/s, TTFT: from each client's result JSON (request_throughput, output_throughput,
  mean_ttft_ms); one SSE event per output token here. CPU % is of one core (the machine has {cpus}).
cli µs/ev: the client's whole CPU (getrusage RUSAGE_CHILDREN around the run: main process and
  worker processes, including startup, tokenizer loading and dataset building) / SSE events.
steady µs/ev: the measured phase only. This script polls nginx's request counter and samples the
  client process tree's CPU with psutil every {sample_ms:g} ms; the measured phase runs from the
  sample before the first to the sample after the last period with >= {busy} requests at nginx
  (readiness probes and test requests excluded). Client CPU in that phase / (requests nginx
  served in it x {events} events). cli CPU% and nginx CPU% are over the same phase.
coord%: of cli CPU%, loadgen's coordinator (the client's main process) alone, same phase.
tok/req: output tokens the client counted per completed request ({events} by upstream's rule on
  every shape: usage where upstream reads it, else the re-tokenised text).
nginx CPU%: its one worker process; near 100 % would mean the server, not the client, was the limit.
other%: the rest of the machine (this script excluded) plus hypervisor steal, same phase; cli +
  nginx + other near {full:g} % means the client had no idle core left to use.
"""


Key = tuple[str, str, int]  # client name, stream shape, concurrency


def summary(
    medians: dict[Key, Measurement], args: argparse.Namespace, have_vllm: bool
) -> list[str]:
    """Lines comparing loadgen --workers 2 with vllm and checking the targets."""
    lines = [
        f"Target: loadgen --workers 2 >= {TARGET_RATIO:g}x vllm bench serve's requests/s, and <= "
        f"{TARGET_US_PER_EVENT:g} µs client CPU per SSE event (steady state)."
    ]
    for shape in args.shape:
        for c in args.concurrency:
            lg = medians.get(("loadgen-w2", shape, c))
            if lg is None:
                continue
            us_ok = lg.steady_us_per_event <= TARGET_US_PER_EVENT
            cpu = (
                f"steady {lg.steady_us_per_event:.2f} µs/ev ({'ok' if us_ok else 'MISSED'}), "
                f"whole run {lg.total_us_per_event:.2f} µs/ev"
            )
            vl = medians.get(("vllm", shape, c))
            where = f"{shape} conc {c:>4}"
            if have_vllm and vl is not None:
                ratio = lg.req_per_s / vl.req_per_s
                verdict = "ok" if ratio >= TARGET_RATIO else "MISSED"
                lines.append(
                    f"  {where}: loadgen(w2)/vllm = {lg.req_per_s:.0f}/{vl.req_per_s:.0f} "
                    f"req/s = {ratio:.1f}x ({verdict}); {cpu}"
                )
            else:
                lines.append(f"  {where}: loadgen(w2) {lg.req_per_s:.0f} req/s (no vllm); {cpu}")
    return lines + shape_lines(medians, args)


def shape_lines(medians: dict[Key, Measurement], args: argparse.Namespace) -> list[str]:
    """Each shape's loadgen --workers 2 requests/s against the vllm shape's, and whether every
    client counted the output tokens upstream's rule gives."""
    lines = []
    if len(args.shape) > 1 and "vllm" in args.shape:
        lines.append(
            f"Target: each shape's loadgen --workers 2 req/s >= {TARGET_SHAPE_RATIO:g} x the vllm "
            "shape's, same run."
        )
        for c in args.concurrency:
            base = medians.get(("loadgen-w2", "vllm", c))
            for shape in args.shape:
                lg = medians.get(("loadgen-w2", shape, c))
                if base is None or lg is None or shape == "vllm":
                    continue
                ratio = lg.req_per_s / base.req_per_s
                verdict = "ok" if ratio >= TARGET_SHAPE_RATIO else "MISSED"
                lines.append(
                    f"  conc {c:>4} {shape:<17} {lg.req_per_s:.0f} / {base.req_per_s:.0f} req/s "
                    f"= {ratio:.2f} ({verdict})"
                )
    wrong = [
        f"{name} {shape} c{c}: {m.tokens_per_request:.2f}"
        for (name, shape, c), m in medians.items()
        if m.tokens_per_request != EVENTS
    ]
    lines.append(
        f"Output tokens per request: {EVENTS} for every client and shape"
        if not wrong
        else f"Output tokens per request differ from {EVENTS}: " + "; ".join(wrong)
    )
    return lines


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    parser.add_argument("--num-prompts", type=int, default=5000, help="requests per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="loadgen workers")
    parser.add_argument(
        "--shape",
        nargs="+",
        default=["vllm"],
        choices=[*SHAPES, "all"],
        help="the servers' stream shapes to serve (scripts/bench/ceiling_streams.py); default vllm",
    )
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON)
    parser.add_argument("--no-vllm", action="store_true", help="skip vllm bench serve")
    parser.add_argument(
        "--scrape-cost",
        action="store_true",
        help="also run each loadgen configuration scraping a vLLM-sized /metrics page "
        "(--telemetry-url) and print the ratios",
    )
    parser.add_argument(
        "--scrape-interval", type=float, default=0.1, help="--scrape-cost's interval (s)"
    )
    parser.add_argument(
        "--aa",
        action="store_true",
        help="also run each loadgen configuration a second time in each repetition (an A/A "
        "pair) and print its ratios: the noise the other ratios are read against",
    )
    parser.add_argument(
        "--records-cost",
        action="store_true",
        help="also run each loadgen configuration with --no-save-records, and print the ratio",
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run loadgen at git commit REF (a temporary worktree), and print the ratios",
    )
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    parser.add_argument("--port", type=int, default=0, help="nginx port (default: a free one)")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument("--keep", type=Path, help="keep result JSONs, logs and nginx files here")
    args = parser.parse_args()
    if "all" in args.shape:
        args.shape = list(SHAPES)
    return args


def main() -> None:
    """Measure every client configuration against nginx and print the medians."""
    args = parse_args()
    clients = [Client(f"loadgen-w{w}", w) for w in args.workers]
    if args.aa:  # the same configuration again, as a noise floor for the other ratios
        clients += [Client(f"loadgen-w{w}-again", w) for w in args.workers]
    if args.records_cost:  # the same runs without the records file --save-result writes
        clients += [Client(f"loadgen-w{w}-norec", w, ("--no-save-records",)) for w in args.workers]
    if args.scrape_cost:  # the same runs scraping a vLLM-sized page (nginx's /metrics)
        args.port = args.port or free_port()
        scrape = ("--telemetry-url", f"http://127.0.0.1:{args.port}/metrics")
        scrape += ("--server-metrics-interval", str(args.scrape_interval))
        clients += [Client(f"loadgen-w{w}-scrape", w, scrape) for w in args.workers]
    baseline = baseline_checkout(args.baseline) if args.baseline else nullcontext(None)
    with baseline as source:
        if source is not None:
            ref = args.baseline
            clients += [Client(f"loadgen-w{w}@{ref}", w, source=source) for w in args.workers]
            if args.scrape_cost:
                clients += [
                    Client(f"loadgen-w{w}-scrape@{ref}", w, scrape, source=source)
                    for w in args.workers
                ]
        measure(args, clients)


def ratios(
    runs: dict[Key, list[Measurement]],
    args: argparse.Namespace,
    other: str,
    title: str,
    ours_suffix: str = "",
) -> list[str]:
    """Each loadgen configuration (named with the suffix ``ours_suffix``) over its variant
    named with the suffix ``other``: requests/s and steady client CPU per event, the ratio of
    the medians and, run for run (repetition i of each, run one after the other), the median
    ratio and its range: the spread an A/A pair (--aa) shows is this machine's noise."""
    lines = []
    for shape in args.shape:
        for concurrency in args.concurrency:
            for w in args.workers:
                ours = runs[(f"loadgen-w{w}{ours_suffix}", shape, concurrency)]
                theirs = runs[(f"loadgen-w{w}{other}", shape, concurrency)]
                parts = []
                for field, label in (("req_per_s", "req/s"), ("steady_us_per_event", "CPU/ev")):
                    mine = [getattr(m, field) for m in ours]
                    their = [getattr(m, field) for m in theirs]
                    pairs = sorted(a / b for a, b in zip(mine, their, strict=True))
                    parts.append(
                        f"{label} {statistics.median(mine) / statistics.median(their):.3f} "
                        f"(run for run: median {statistics.median(pairs):.3f}, "
                        f"{pairs[0]:.2f}-{pairs[-1]:.2f})"
                    )
                lines.append(f"{title}, {shape}, workers={w} c{concurrency}: {'; '.join(parts)}")
    return lines


def coordinator_per_scrape(
    runs: dict[Key, list[Measurement]], args: argparse.Namespace
) -> list[str]:
    """The coordinator's CPU with and without scraping, and the difference per scrape: the
    median of the run-for-run differences in its CPU (% of a core) times the interval."""
    lines = []
    for shape, concurrency, w in product(args.shape, args.concurrency, args.workers):
        without = [m.coordinator_cpu_pct for m in runs[(f"loadgen-w{w}", shape, concurrency)]]
        scraping = runs[(f"loadgen-w{w}-scrape", shape, concurrency)]
        with_ = [m.coordinator_cpu_pct for m in scraping]
        extra = statistics.median(b - a for a, b in zip(without, with_, strict=True))
        alone, scraped = statistics.median(without), statistics.median(with_)
        lines.append(
            f"coordinator CPU, {shape}, workers={w} c{concurrency}: {alone:.1f} % of a core "
            f"without scraping, {scraped:.1f} % scraping every "
            f"{args.scrape_interval:g} s: {10 * extra * args.scrape_interval:+.2f} ms a scrape "
            "(median of the run-for-run differences; scrape_cost.py measures one alone)"
        )
    return lines


@contextmanager
def baseline_checkout(ref: str) -> Iterator[Path]:
    """A temporary git worktree of the repository at ``ref``; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="client-ceiling-baseline-") as tmp:
        path = Path(tmp) / "src"
        git = ["git", "-C", str(REPO)]
        add = subprocess.run(
            [*git, "worktree", "add", "--detach", str(path), ref], capture_output=True, text=True
        )
        if add.returncode != 0:
            raise SystemExit(f"--baseline {ref}: {add.stderr.strip()}")
        try:
            yield path
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(path)], capture_output=True)


def measure(args: argparse.Namespace, clients: list[Client]) -> None:
    """Run every client configuration, print the medians, the summary and the ratios."""
    have_vllm = not args.no_vllm and args.vllm_python.exists()
    if have_vllm:
        clients.append(Client("vllm", 0))
    elif not args.no_vllm:
        print("vllm bench serve not installed: see scripts/bench/README.md")
    if not Path(args.nginx).exists():
        raise SystemExit("nginx not found: apt-get install -y nginx-light (or pass --nginx)")
    print(
        f"client ceiling, {datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}); nginx (1 worker) serving a static "
        f"{EVENTS}-event stream on loopback; {args.num_prompts} requests of {PROMPT_TOKENS} "
        f"prompt tokens per run, request rate inf; medians of {args.repeat} runs; loadgen at "
        f"commit {loadgen_commit()}",
        flush=True,
    )
    runs: dict[Key, list[Measurement]] = {}
    with tempfile.TemporaryDirectory(prefix="client-ceiling-") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        tokenizer = make_tokenizer_dir(out_dir / "tokenizer")
        prefix = Path(tempfile.mkdtemp(prefix="nginx-", dir=out_dir))
        for path in (out_dir, prefix):  # nginx's worker runs as `nobody` when started by root
            path.chmod(0o755)
        port = args.port or free_port()
        with nginx_server(args.nginx, prefix, port) as nginx:
            print(f"nginx on 127.0.0.1:{port}, tokenizer {tokenizer}\n{HEADER}", flush=True)
            for rep in range(args.repeat):  # repetitions outermost: noise spreads over all
                # Every other repetition runs the clients in reverse order (AB BA ...): a drift
                # along a repetition (the last run's files written back meanwhile, the rest
                # of a shared machine) falls on each client alike.
                order = clients if rep % 2 == 0 else clients[::-1]
                for shape, concurrency, client in product(args.shape, args.concurrency, order):
                    m = run_client(
                        client, shape, concurrency, rep, args, port, tokenizer, nginx, out_dir
                    )
                    runs.setdefault((client.name, shape, concurrency), []).append(m)
                    print(f"{row(client, shape, concurrency, m)}  (run {rep + 1})", flush=True)
                    if m.failed:
                        print(f"  warning: {m.failed} requests failed", flush=True)
    medians = {key: median(ms) for key, ms in runs.items()}
    print(f"\nMedians of {args.repeat} runs:\n{HEADER}")
    for shape, concurrency, client in product(args.shape, args.concurrency, clients):
        print(row(client, shape, concurrency, medians[(client.name, shape, concurrency)]))
    cpus = os.cpu_count() or 1
    notes = {"cpus": cpus, "sample_ms": 1000 * SAMPLE_S, "busy": MIN_BUSY_REQUESTS}
    print(NOTES.format(**notes, events=EVENTS, full=100 * cpus))
    print("\n".join(summary(medians, args, have_vllm)))
    if args.aa:
        print("\n".join(ratios(runs, args, "-again", "A/A (the same configuration twice)")))
    if args.records_cost:
        print("\n".join(ratios(runs, args, "-norec", "with/without the records file")))
    if args.scrape_cost:
        print("\n".join(ratios(runs, args, "-scrape", "without/with scraping")))
        print("\n".join(coordinator_per_scrape(runs, args)))
    if args.baseline:
        ref = args.baseline
        print("\n".join(ratios(runs, args, f"@{ref}", f"tree/{ref}")))
        if args.scrape_cost:
            title = f"tree/{ref}, both scraping"
            print("\n".join(ratios(runs, args, f"-scrape@{ref}", title, "-scrape")))
    if args.json:
        dump = {
            f"{name} {shape} c{c}": [asdict(m) for m in ms] for (name, shape, c), ms in runs.items()
        }
        args.json.write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()
