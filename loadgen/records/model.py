"""A whole run as its report reads it: what it knew at t0, every request's row, and its end.

The live run builds a ``RunRecords`` from what it collected and the records file holds the same
thing (``arrow_file``), so a report rebuilt from the file is the live run's report. Every field
is plain data: numbers, strings and numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.records.event_source import ArrayEvents, EventSource
from loadgen.records.server_series import MetricSeries
from workers.protocol import ConnectionStats


@dataclass
class RunStart:
    """What the run knew when its timed part began (t0)."""

    loadgen_version: str
    command_line: list[str]  # sys.argv, secrets redacted
    config: dict[str, Any]  # RunConfig's fields, secrets redacted
    model_id: str  # tokenizer / model identity, as upstream's model_id
    tokenizer_id: str | None  # None with --skip-tokenizer-init
    num_requests: int
    num_workers: int
    connections: int  # connections the workers had open at t0
    schedule_sha256: str
    t0_ns: int  # perf_counter_ns of t0 (every instant in a row is ns after it)
    t0_wall: str  # t0 as local wall-clock time, ISO 8601
    counters_before: str | None  # the server's /metrics page before the run
    # loadgen_version, python, platform, cpu_count... (records/environment.py); None in
    # files written before it was recorded
    environment: dict[str, Any] | None = None


@dataclass
class HostUsage:
    """Where the host's CPUs went during the timed run (loadgen/session/host_cpu.py). Shares are
    percentages of all CPUs' time over the run; worker figures are of each worker's loop thread,
    in worker order."""

    cpus: int
    wall_s: float
    loadgen_pct: float  # the coordinator and the workers
    started_pct: float  # other processes loadgen started: the --mock server
    other_pct: float  # every other process, the kernel's threads included
    steal_pct: float  # taken by the hypervisor
    idle_pct: float
    busiest_name: str  # the process outside loadgen that used the most CPU ("" if none did)
    busiest_pid: int
    busiest_pct: float
    busiest_started: bool  # it is one loadgen started (the --mock server)
    worker_demand_pct: list[float]  # on a CPU or waiting for one, % of the run
    worker_wait_pct: list[float]  # runnable but waiting for a CPU, % of the run
    worker_peak_demand_pct: list[float]  # the demand of the busiest 100 ms
    worker_peak_cpu_pct: list[float]  # the part of it on a CPU
    # It, or a process it descends from, listens on the server's port on this host: the server
    # under test (False in records written before it was measured).
    busiest_serves: bool = False


@dataclass
class RunEnd:
    """What the run knew when it ended: the client's own figures and the output counts."""

    interrupted: bool
    worker_problems: list[str]
    worker_cpu_ns: list[int]  # CPU time of each worker's run
    worker_wall_ns: list[int]
    connection_stats: ConnectionStats
    loop_lag_ns: np.ndarray  # every loop-lag probe's delay, all workers
    output_lens: np.ndarray  # each request's output tokens as the report counts them
    counters_after: str | None  # the server's /metrics page after the run
    probe_latencies_s: list[float] | None  # --probe-request-rate: each successful probe's E2EL
    probe_failures: int = 0
    host: HostUsage | None = None  # None where it was not measured (not Linux, older records)
    # Each worker's placement, host and clock offset (loadgen/fleet/worker_channel.py's
    # Member.describe), in worker order; None in older records
    hosts: list[dict[str, Any]] | None = None
    # --duration's blocks: the run's requests and its schedule's hash, known at its end (the
    # start's are block 0's); None where the start's hold
    num_requests: int | None = None
    schedule_sha256: str | None = None


@dataclass
class RunRecords:
    """One run: its start, one row per request (row i = request i), and its end.

    ``end`` is None when the run never ended (the records file of a run that crashed).
    """

    start: RunStart
    end: RunEnd | None
    records: np.ndarray  # RECORD_DTYPE (workers/protocol.py), row i = request i
    worker: np.ndarray  # the worker that reported each request; -1 when none did
    scheduled_ns: np.ndarray  # each request's scheduled instant, ns after t0
    input_tokens: np.ndarray  # the dataset's input token count of each request
    input_sequences: np.ndarray  # inputs each request embeds (pooling); 1 for generation
    # The token events where the run holds none (``events`` given): empty, and the offsets
    # of request i's events in the request-major layout, [N+1]. Built from arrays (tests),
    # they are ``events``' (request i's are event_ns[offsets[i]:offsets[i+1]], ns after t0).
    event_ns: np.ndarray
    event_offsets: np.ndarray
    errors: dict[int, str]
    texts: dict[int, str]  # generated text, kept when the server reported no usage
    # --multi-turn: each request's conversation and its turn in it (None without); a later
    # turn's scheduled_ns is its intended instant (loadgen/records/turns.py)
    conversation: np.ndarray | None = None
    turn: np.ndarray | None = None
    # openai-audio: each request's input_audio_duration in seconds, for RTFx (None without)
    input_audio_s: np.ndarray | None = None
    # The series scraped from the server's /metrics and --telemetry-url during the run
    # (loadgen/records/server_series.py); None when none was (and in older records)
    server_metrics: list[MetricSeries] | None = None
    # Where every report reads the token events from, a bounded chunk at a time: the records
    # file (loadgen/records/events.py), or ``event_ns`` when none is given
    events: EventSource | None = None

    def __post_init__(self) -> None:
        if self.events is None:
            self.events = ArrayEvents(self.event_ns, self.event_offsets)

    @property
    def event_source(self) -> EventSource:
        """The run's token events, ns after t0, in request order a chunk at a time."""
        assert self.events is not None  # __post_init__ sets it
        return self.events

    @property
    def num_requests(self) -> int:
        """How many requests the run had, sent or not."""
        return len(self.scheduled_ns)


def per_request(values: dict[int, str], n: int) -> list[str]:
    """Each of ``n`` requests' value ("" where it has none) from a dict of those that have one
    (``RunRecords.errors``, ``texts``)."""
    out = [""] * n
    for i, value in values.items():
        if 0 <= i < n:
            out[i] = value
    return out
