"""Synthetic remote workers for scripts/bench/coordinator_ingest.py: processes that join a
coordinator over tcp:// as ``loadgen worker --connect`` does (a DEALER with the worker keys,
HELLO -> WELCOME -> SHARD -> READY, PING answered with PONG, START), then send RECORDS batches
built before START, as fast as the coordinator takes them or at a paced rate, then DONE. They
never send HTTP, and cost little CPU: every frame is encoded before START."""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
from dataclasses import asdict, dataclass

import numpy as np
import zmq

from workers.keys import WorkerKeys, client_options
from workers.protocol import (
    LOADGEN_VERSION,
    RECORD_DTYPE,
    Codec,
    ConnectionStats,
    Kind,
    decode_shard,
    records_message,
)

IDLE_ALIVE_MS = 1000  # a remote worker with nothing to say sends ALIVE this often


@dataclass(frozen=True)
class Load:
    """What every synthetic worker sends."""

    events_per_request: int
    batch_requests: int
    paced_events_per_s: float  # 0: as fast as the coordinator takes them


def record_rows(indices: np.ndarray, events_per_request: int) -> np.ndarray:
    """RECORD_DTYPE rows of finished, successful requests with ``events_per_request`` events."""
    rows = np.zeros(len(indices), dtype=RECORD_DTYPE)
    rows["index"] = indices
    rows["released_ns"] = 1_000
    rows["sent_ns"] = 2_000
    rows["end_ns"] = 2_000 + events_per_request * 20_000_000
    rows["n_events"] = events_per_request
    rows["status"] = 200
    rows["prompt_tokens"] = 128
    rows["completion_tokens"] = events_per_request
    rows["success"] = 1
    rows["server_queue_s"] = np.nan
    rows["server_ttft_s"] = np.nan
    return rows


def build_batches(codec: Codec, indices: np.ndarray, load: Load) -> list[list]:
    """Every RECORDS message of a shard, encoded. Request i's events are i*E .. i*E+E-1, so
    the coordinator's request-major events must come out as 0, 1, 2, ... (the check)."""
    e = load.events_per_request
    messages = []
    for start in range(0, len(indices), load.batch_requests):
        chunk = indices[start : start + load.batch_requests]
        events = (chunk[:, None] * e + np.arange(e)).astype("<i8").ravel()
        rows = [tuple(row) for row in record_rows(chunk, e)]
        messages.append(records_message(codec, rows, events.tobytes(), {}, {}))
    return messages


def synthetic_worker(endpoint: str, keys: WorkerKeys | None, token: str, load: Load) -> None:
    """Join ``endpoint`` as a remote worker does, serve one shard with pre-built RECORDS, exit."""
    codec = Codec(token)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"r" + os.urandom(8).hex().encode())
    sock.setsockopt(zmq.LINGER, 5000)
    sock.setsockopt(zmq.HEARTBEAT_IVL, 1000)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)
    if keys is not None:
        client_options(sock, keys)
    sock.connect(endpoint)
    send = sock.send_multipart
    send(
        codec.encode(
            Kind.HELLO,
            probe_port=0,
            host=socket.gethostname(),
            cores=len(os.sched_getaffinity(0)),
            pid=os.getpid(),
            loadgen=LOADGEN_VERSION,
        )
    )
    messages: list[list] = []
    while True:
        if not sock.poll(IDLE_ALIVE_MS):
            send(codec.encode(Kind.ALIVE))
            continue
        kind, fields, frames = codec.decode(sock.recv_multipart(), from_worker=False)
        if kind is Kind.PING:
            send(codec.encode(Kind.PONG, t_ns=fields["t_ns"], worker_ns=time.perf_counter_ns()))
        elif kind is Kind.SHARD:
            messages = build_batches(codec, np.array(decode_shard(fields, frames).indices), load)
            send(codec.encode(Kind.READY, connections=0, connect_error=None, preopen_short=""))
        elif kind is Kind.START:
            break
        elif kind is Kind.STOP:
            return
    cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
    interval_ns = (
        int(1e9 * load.batch_requests * load.events_per_request / load.paced_events_per_s)
        if load.paced_events_per_s
        else 0
    )
    for n, message in enumerate(messages):
        if interval_ns:
            due = wall0 + n * interval_ns
            while (now := time.perf_counter_ns()) < due:
                time.sleep((due - now) / 1e9)
        send(message, copy=False)
    send(
        codec.encode(
            Kind.DONE,
            [b""],
            cpu_ns=time.process_time_ns() - cpu0,  # ZeroMQ's I/O thread encrypts
            wall_ns=time.perf_counter_ns() - wall0,
            connections=asdict(ConnectionStats()),
            block_waits=0,
            block_wait_ns=0,
            topups=0,
        )
    )
    if sock.poll(10_000):  # the coordinator's dismissal (a STOP), or it is gone
        sock.recv_multipart()
    sock.close()
    ctx.term()


def start_workers(
    count: int, endpoint: str, keys: WorkerKeys, token: str, load: Load
) -> list[multiprocessing.Process]:
    """``count`` synthetic workers, each its own process, joining ``endpoint``."""
    spawn = multiprocessing.get_context("spawn")
    processes = [
        spawn.Process(target=synthetic_worker, args=(endpoint, keys, token, load), daemon=True)
        for _ in range(count)
    ]
    for process in processes:
        process.start()
    return processes


def join_workers(processes: list[multiprocessing.Process]) -> None:
    """Wait for the synthetic workers; one that failed fails the benchmark."""
    for process in processes:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            raise SystemExit("a synthetic worker did not exit within 30 s of its run")
        if process.exitcode != 0:
            raise SystemExit(f"a synthetic worker exited with code {process.exitcode}")
