"""How many token events a second one coordinator takes in from many remote workers.

The coordinator is loadgen's own: ``WorkerPool(0, listen=Listen(127.0.0.1, 0, K, keys))``,
``pool.run(plans, ...)`` over tcp:// with CurveZMQ, as a multi-host run has it. The K workers
are synthetic: separate processes that join as ``loadgen worker --connect`` does (a DEALER with
the worker keys, HELLO -> WELCOME -> SHARD -> READY, PING answered with PONG, START), then send
RECORDS batches they built before START (E token events a request, batches of R requests: a
real worker's 50 ms flush at ``--worker-events-per-s``) as fast as the coordinator takes them
(or at that rate with ``--paced``), then DONE. They never send HTTP, so the coordinator's
ingest is all that is measured. Three modes, interleaved, ``--repeat`` times:

- **floor**: a bare ROUTER with the same CurveZMQ that only counts frames (no decode, no
  aggregation): the transport's ceiling on this machine, measured in the same run;
- **bare**: ``pool.run`` with no records file and no live view;
- **full**: as a run has it: the records file (``RecordsWriter``, a second's batches written
  as one) and the live view (plain mode to a string buffer, so it folds every batch and draws
  every 5 s).

From START to the run's return: token events and requests per second of wall time, the
coordinator's CPU split into its main thread (``time.thread_time_ns``: decoding, accounting,
the file, the view) and the whole process (ZeroMQ's I/O thread decrypts), and token events per
main-thread CPU-second, the figure for "2 M token events/s on one core". Every run's records
are checked: one row per request, every event there and in its place. Medians; run it under
the shared lock:

    flock /tmp/loadgen-bench.lock .venv/bin/python scripts/bench/coordinator_ingest.py
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import zmq

# loadgen's coordinator is imported where it is used: spawn re-imports this module in each of
# the K synthetic workers, and those imports would cost each of them a second.
from synthetic_worker import Load, join_workers, start_workers

from workers.keys import new_keys, server_options
from workers.protocol import LOADGEN_VERSION, Codec, Kind, WorkerConfig, shard_message

if TYPE_CHECKING:
    from loadgen.records.collected import Collected

MODES = ("floor", "bare", "full")
FLUSH_S = 0.05  # a real worker's flush interval (WorkerConfig.flush_interval_s)


@dataclass
class Measured:
    """One run's collect phase: from START to the last DONE."""

    wall_s: float
    main_cpu_s: float
    process_cpu_s: float
    worker_cpu_s: float  # the synthetic workers' own CPU, all of them
    events: int
    requests: int

    @property
    def events_per_s(self) -> float:
        """Token events taken in per second of wall time."""
        return self.events / self.wall_s

    @property
    def events_per_main_cpu_s(self) -> float:
        """Token events per CPU-second of the coordinator's main thread."""
        return self.events / self.main_cpu_s


# ---- the floor: a bare ROUTER that counts frames ----


def floor_run(workers: int, per_worker: int, load: Load) -> Measured:
    """The same workers and messages into a ROUTER with the same CurveZMQ (and ZAP handler)
    that only counts what arrives: the transport's ceiling."""
    from zmq.auth.thread import ThreadAuthenticator

    coordinator_keys, worker_keys = new_keys()
    codec = Codec(coordinator_keys.token)
    ctx = zmq.Context()
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
    sock = ctx.socket(zmq.ROUTER)
    server_options(sock, coordinator_keys)
    sock.bind("tcp://127.0.0.1:0")
    endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    processes = start_workers(workers, endpoint, worker_keys, coordinator_keys.token, load)
    identities: list[bytes] = []
    while len(identities) < workers:
        identity, *parts = sock.recv_multipart()
        if codec.decode(parts, from_worker=True)[0] is Kind.HELLO:
            identities.append(identity)
    config = synthetic_config()
    for w, identity in enumerate(identities):
        sock.send_multipart([identity, *codec.encode(Kind.WELCOME, worker=w, loadgen="")])
        indices = np.arange(w * per_worker, (w + 1) * per_worker)
        parts = shard_message(codec, config, [b"{}"] * per_worker, indices, np.zeros(per_worker))
        sock.send_multipart([identity, *parts])
    ready = 0
    while ready < workers:
        _, *parts = sock.recv_multipart()
        ready += codec.decode(parts, from_worker=True)[0] is Kind.READY
    cpu0, process0, wall0 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
    for identity in identities:
        sock.send_multipart([identity, *codec.encode(Kind.START, t0_ns=0, credits=0)])
    done = received = payload = 0
    while done < workers:
        frames = sock.recv_multipart(copy=False)
        received += 1
        payload += sum(len(frame) for frame in frames)
        done += len(frames) == 3  # DONE: identity, header, an empty loop-lag frame
    wall, cpu = time.perf_counter_ns() - wall0, time.thread_time_ns() - cpu0
    process_cpu = time.process_time_ns() - process0
    stop = codec.encode(Kind.STOP, reason="dismissed")
    for identity in identities:
        sock.send_multipart([identity, *stop])
    join_workers(processes)
    sock.close(linger=1000)
    auth.stop()
    ctx.term()
    requests = workers * per_worker
    expected = workers * (-(-per_worker // load.batch_requests) + 1)
    if received != expected:
        raise SystemExit(f"floor: {received} messages arrived, {expected} were sent")
    return Measured(
        wall / 1e9,
        cpu / 1e9,
        process_cpu / 1e9,
        float("nan"),
        requests * load.events_per_request,
        requests,
    )


# ---- loadgen's coordinator ----


def synthetic_config() -> WorkerConfig:
    """A worker config pointing nowhere: synthetic workers send no HTTP."""
    return WorkerConfig(
        url="http://127.0.0.1:9/v1/completions",
        headers={},
        request_id_prefix=None,
        max_concurrency=0,
        preopen_url="http://127.0.0.1:9/v1/models",
        preopen_connections=0,
    )


async def pool_run(
    workers: int, per_worker: int, load: Load, full: bool, directory: Path, profile: bool
) -> tuple[Measured, str]:
    """One run of loadgen's coordinator: the real WorkerPool over CurveZMQ tcp://, bare or
    with the records file and the live view; the measurement and a profile (or "")."""
    from loadgen.console import collect_notes
    from loadgen.fleet.collector import BatchObserver
    from loadgen.fleet.fanout import ShardPlan, WorkerPool
    from loadgen.fleet.worker_channel import Listen
    from loadgen.records.arrow_file import RecordsWriter
    from loadgen.records.model import RunStart
    from loadgen.session.live_view import LiveView
    from loadgen.session.records import WRITE_EVERY_S, ToRecordsFile

    coordinator_keys, worker_keys = new_keys()
    pool = WorkerPool(0, listen=Listen("127.0.0.1", 0, workers, coordinator_keys))
    with collect_notes():  # "Waiting for K remote workers: ..."
        pool.start()
    requests = workers * per_worker
    scheduled = np.zeros(requests, dtype=np.int64)
    config = synthetic_config()
    plans = [
        ShardPlan(
            config,
            [b"{}"] * per_worker,
            np.arange(w * per_worker, (w + 1) * per_worker),
            scheduled[:per_worker],
        )
        for w in range(workers)
    ]
    sink = view = None
    if full:
        start = RunStart(
            loadgen_version=LOADGEN_VERSION,
            command_line=["coordinator_ingest.py"],
            config={},
            model_id="synthetic",
            tokenizer_id=None,
            num_requests=requests,
            num_workers=workers,
            connections=0,
            schedule_sha256="",
            t0_ns=0,
            t0_wall="",
            counters_before=None,
        )
        path = directory / "ingest.records.arrow"
        ones = np.ones(requests, dtype=np.int64)
        sink = RecordsWriter(
            str(path), start, scheduled, ones * 128, ones, None, write_every_s=WRITE_EVERY_S
        )
        view = LiveView(requests, scheduled, None, disabled=False, stream=io.StringIO())
        assert view.mode == "plain"
    marks: dict[str, int] = {}
    profiler = cProfile.Profile() if profile else None

    class Marks(BatchObserver):
        """The measurement starts at t0, after the records file and the view have."""

        def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
            if profiler is not None:
                profiler.enable()
            marks.update(cpu=time.thread_time_ns(), process=time.process_time_ns())
            marks["wall"] = time.perf_counter_ns()

    observers = [ToRecordsFile(sink), view] if sink is not None and view is not None else []

    processes = start_workers(workers, pool.tcp_endpoint, worker_keys, coordinator_keys.token, load)
    try:  # the pool's notes: "worker N joined", K of them a run, and any warning
        with collect_notes() as said:
            collected = await pool.run(plans, requests, observers=[*observers, Marks()])
        wall = time.perf_counter_ns() - marks["wall"]
        cpu = time.thread_time_ns() - marks["cpu"]
        process_cpu = time.process_time_ns() - marks["process"]
        if profiler is not None:
            profiler.disable()
    finally:
        if view is not None:
            view.close()
        if sink is not None:
            sink.close()
        pool.close()
        for note in said:
            if "joined" not in note.text:
                print(f"loadgen said: {note.text}")
    join_workers(processes)
    check(collected, requests, load.events_per_request)
    if sink is not None and sink.failure:
        raise SystemExit(sink.failure)
    report = ""
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        report = out.getvalue()
    measured = Measured(
        wall / 1e9,
        cpu / 1e9,
        process_cpu / 1e9,
        sum(collected.worker_cpu_ns) / 1e9,
        requests * load.events_per_request,
        requests,
    )
    return measured, report


def check(collected: Collected, requests: int, events_per_request: int) -> None:
    """Every request reported once, by a worker, with all its events in their place."""
    records = collected.records
    problems = []
    if len(records) != requests:
        problems.append(f"{len(records)} rows for {requests} requests")
    if collected.worker_problems:
        problems.append("; ".join(collected.worker_problems))
    if (unreported := int((collected.worker < 0).sum())) > 0:
        problems.append(f"{unreported} requests unreported")
    if not (records["index"] == np.arange(len(records))).all():
        problems.append("rows out of place")
    total = int(records["n_events"].sum())
    if total != requests * events_per_request:
        problems.append(f"{total} events counted, {requests * events_per_request} sent")
    event_ns, chunk = collected.event_ns, 1 << 20  # in chunks: the check adds no peak RSS
    if len(event_ns) != requests * events_per_request or any(
        not np.array_equal(event_ns[at : at + chunk], np.arange(at, min(at + chunk, len(event_ns))))
        for at in range(0, len(event_ns), chunk)
    ):
        problems.append("token events missing or out of place")
    if problems:
        raise SystemExit("records check failed: " + "; ".join(problems))


# ---- the table ----


def table(results: dict[str, list[Measured]]) -> str:
    """Medians per mode, and each mode's events/s against the floor's."""
    floor = statistics.median(m.events_per_s for m in results["floor"]) if results["floor"] else 0
    head = (
        f"{'mode':<6} {'events/s':>11} {'requests/s':>10} {'wall s':>7} {'main CPU s':>10} "
        f"{'proc CPU s':>10} {'events/main CPU-s':>17} {'events/proc CPU-s':>17} "
        f"{'workers CPU s':>13} {'of floor':>8}"
    )
    lines = [head]
    for mode in MODES:
        runs = results[mode]
        if not runs:
            continue

        def med(values: list[float]) -> float:
            return statistics.median(values)

        events_s = med([m.events_per_s for m in runs])
        worker_cpu = med([m.worker_cpu_s for m in runs])
        lines.append(
            f"{mode:<6} {events_s:>11,.0f} {med([m.requests / m.wall_s for m in runs]):>10,.0f} "
            f"{med([m.wall_s for m in runs]):>7.2f} {med([m.main_cpu_s for m in runs]):>10.2f} "
            f"{med([m.process_cpu_s for m in runs]):>10.2f} "
            f"{med([m.events_per_main_cpu_s for m in runs]):>17,.0f} "
            f"{med([m.events / m.process_cpu_s for m in runs]):>17,.0f} "
            f"{'-' if np.isnan(worker_cpu) else f'{worker_cpu:.2f}':>13} "
            f"{f'{events_s / floor:.2f}' if floor else '-':>8}"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse the flags, run floor, bare and full interleaved, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=64, help="synthetic workers (K)")
    parser.add_argument("--requests-per-worker", type=int, default=1000)
    parser.add_argument("--events-per-request", type=int, default=128, help="E")
    parser.add_argument(
        "--worker-events-per-s",
        type=float,
        default=30_000,
        help="a worker's rate, which sizes its 50 ms batches (R requests)",
    )
    parser.add_argument(
        "--paced", action="store_true", help="send at --worker-events-per-s, not flat out"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES), help="of floor,bare,full")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the main thread of the last full run"
    )
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"--modes: unknown {', '.join(sorted(unknown))} (of {', '.join(MODES)})")
    for name in ("workers", "requests_per_worker", "events_per_request", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.worker_events_per_s <= 0:
        parser.error("--worker-events-per-s must be above 0")
    batch = max(1, round(args.worker_events_per_s * FLUSH_S / args.events_per_request))
    load = Load(args.events_per_request, batch, args.worker_events_per_s if args.paced else 0)

    from common import machine_line

    print(machine_line("coordinator_ingest.py"))
    print(
        f"{args.workers} synthetic workers over tcp:// with CurveZMQ, "
        f"{args.requests_per_worker:,} requests each of {load.events_per_request} token events, "
        f"RECORDS batches of {batch} requests ({batch * load.events_per_request:,} events: "
        f"50 ms at {args.worker_events_per_s:,.0f} events/s), "
        + ("paced" if load.paced_events_per_s else "flat out")
        + f"; medians of {args.repeat}",
        flush=True,
    )
    results: dict[str, list[Measured]] = {mode: [] for mode in MODES}
    profile = ""
    rss_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory(prefix="loadgen-ingest-") as tmp:
        for repeat in range(args.repeat):
            for mode in modes:
                if mode == "floor":
                    measured = floor_run(args.workers, args.requests_per_worker, load)
                else:
                    last = args.profile and repeat == args.repeat - 1 and mode == "full"
                    measured, report = asyncio.run(
                        pool_run(
                            args.workers,
                            args.requests_per_worker,
                            load,
                            mode == "full",
                            Path(tmp),
                            last,
                        )
                    )
                    profile = report or profile
                results[mode].append(measured)
                print(
                    f"  {mode:<5} run {repeat + 1}: {measured.events_per_s:,.0f} events/s, "
                    f"{measured.events_per_main_cpu_s:,.0f} per main-thread CPU-s",
                    flush=True,
                )
    print()
    print(table(results))
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    events = args.workers * args.requests_per_worker * load.events_per_request
    print(
        f"\ncoordinator peak RSS {rss_kb / 1024:,.0f} MB, {(rss_kb - rss_before_kb) / 1024:,.0f} "
        f"MB above its {rss_before_kb / 1024:,.0f} MB before the first run, for runs of "
        f"{events:,} token events: {(rss_kb - rss_before_kb) * 1024 / events:.1f} bytes per event"
    )
    print(
        "\nfloor: a bare CurveZMQ ROUTER counting frames; bare: WorkerPool.run, no records "
        "file, no live view; full: with the records file and the live view (as a run). "
        "main CPU: the coordinator's main thread; proc CPU: its whole process (ZeroMQ's I/O "
        "thread decrypts). Target: >= 2,000,000 token events per main-thread CPU-second."
    )
    if profile:
        print("\ncProfile of the last full run's collect phase (main thread, by own time):")
        print(profile)


if __name__ == "__main__":
    main()
