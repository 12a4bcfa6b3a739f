"""The wire format between the coordinator and its workers: every message kind, in one place.

Transport: the coordinator binds one ZeroMQ ROUTER socket; each worker connects a DEALER whose
identity is ``worker_identity(worker_id)``. A message is a multipart ZeroMQ message:
frame 0 is a small JSON header ``{"v": PROTOCOL_VERSION, "kind": <Kind>, ...fields}``, and the
frames after it are raw little-endian numpy buffers, so bulk data is never JSON-encoded.

| kind    | dir    | header fields                           | payload frames                 |
|---------|--------|-----------------------------------------|--------------------------------|
| HELLO   | w -> c | probe_port                              | -                              |
| SHARD   | c -> w | config (WorkerConfig as a dict)         | bodies, body_offsets, indices, |
|         |        |                                         | scheduled_ns                   |
| READY   | w -> c | connections, connect_error              | -                              |
| START   | c -> w | t0_ns (perf_counter_ns of offset 0),    | -                              |
|         |        | credits (initial share of the cap)      |                                |
| CREDITS | c -> w | grant (credits added), lend (bool)      | -                              |
| DEMAND  | w -> c | returned (credits handed back),         | -                              |
|         |        | waiting (due requests without a credit) |                                |
| RECORDS | w -> c | errors {index: str}, texts {index: str} | records (RECORD_DTYPE),        |
|         |        |                                         | event_ns (int64)               |
| DONE    | w -> c | cpu_ns, wall_ns (of the run),           | loop_lag_ns (int64)            |
|         |        | connections (``ConnectionStats``)       |                                |
| STOP    | c -> w | reason                                  | -                              |
| FATAL   | w -> c | message                                 | -                              |

CREDITS and DEMAND exist only with ``--max-concurrency``: the cap is C credits that the
coordinator lends out and moves between workers (workers/credits.py), in batches, never one
message per request.

Loop-lag probes do not go through ZeroMQ (whose I/O threads would add their own delays):
during the run the coordinator sends each worker's UDP ``probe_port`` a datagram every 10 ms
holding its ``perf_counter_ns`` as 8 little-endian bytes (``encode_probe``), and the worker's
event loop reads it the way it reads a response socket.

Every time in a record is ``perf_counter_ns() - t0_ns``: CLOCK_MONOTONIC, which all processes on
one host share, so worker and coordinator instants are directly comparable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np
import orjson

PROTOCOL_VERSION = 5


class Kind(str, Enum):
    """Message kinds; see the module docstring for fields and direction."""

    HELLO = "hello"
    SHARD = "shard"
    READY = "ready"
    START = "start"
    CREDITS = "credits"
    DEMAND = "demand"
    RECORDS = "records"
    DONE = "done"
    STOP = "stop"
    FATAL = "fatal"


# One row per finished request. Times are ns after t0; the token-event
# instants of a request travel separately in ``event_ns`` (n_events of them, in order).
RECORD_DTYPE = np.dtype(
    [
        ("index", "<i8"),  # global request index
        ("arrival_ns", "<i8"),  # when the worker released it (scheduled instant, as late as it ran)
        ("send_ns", "<i8"),  # right before the request was written (after any client queue)
        ("end_ns", "<i8"),  # response finished, or the failure was seen
        ("n_events", "<i4"),  # token events (workers/sse.py says which events count)
        ("status", "<i4"),  # HTTP status; 0 when no response arrived
        ("prompt_tokens", "<i4"),  # usage.prompt_tokens, -1 when not reported
        ("completion_tokens", "<i4"),  # usage.completion_tokens, -1 when not reported
        ("connect_ns", "<i8"),  # time spent opening a new connection for it; 0 if one was reused
        ("success", "u1"),  # HTTP 200 and at least one token event
        ("resent", "u1"),  # 1: re-sent on a fresh connection after a stale pooled one failed
        ("server_queue_s", "<f8"),  # the server's metrics.queue_time_ms / 1000, NaN if none
        ("server_ttft_s", "<f8"),  # the server's metrics.time_to_first_token_ms / 1000, or NaN
    ]
)
# What a row holds for a request that was never sent or never reported.
UNSENT_ROW = (-1, -1, -1, -1, 0, 0, -1, -1, 0, False, False, float("nan"), float("nan"))


@dataclass
class ConnectionStats:
    """What one worker saw of the server's connection habits (DONE's ``connections``)."""

    preopened_at_t0: int = 0  # pre-opened connections still open when the run started
    closed_before_use: int = 0  # of those, closed by the server before a request used one
    resent: int = 0  # requests re-sent once after a pooled connection failed before answering
    reuse_stopped: bool = False  # the server closes after every response: pooling was stopped


@dataclass
class WorkerConfig:
    """What a worker needs besides its requests: where to send them and how."""

    url: str
    headers: dict[str, str]
    request_id_prefix: str | None
    max_concurrency: int  # the global cap (credits come with START); 0 means no cap
    preopen_url: str  # a cheap GET used to open connections before t0
    preopen_connections: int
    keep_text: str = "when_no_usage"  # "always" | "when_no_usage"
    chat: bool = False  # text lives in choices[0].delta.content rather than choices[0].text
    # "sse": a streamed generation; else a pooling answer read whole (workers/pooling.py forms)
    response_form: str = "sse"
    proxy: str | None = None  # resolved once by the coordinator from the environment
    insecure: bool = False  # --insecure: no TLS certificate checks
    read_bufsize: int = 4 * 1024 * 1024
    flush_interval_s: float = 0.05


def encode_probe(t_ns: int) -> bytes:
    """A loop-lag probe datagram: the sender's perf_counter_ns."""
    return t_ns.to_bytes(8, "little")


def decode_probe(datagram: bytes) -> int | None:
    """The instant a probe was sent, or None for a datagram that is not a probe."""
    return int.from_bytes(datagram, "little") if len(datagram) == 8 else None


def worker_identity(worker_id: int) -> bytes:
    """The ZeroMQ routing identity of worker ``worker_id``."""
    return f"w{worker_id}".encode()


def encode(kind: Kind, frames: list[bytes | memoryview] | None = None, **fields: Any) -> list:
    """Build the multipart frames of one message."""
    header = orjson.dumps({"v": PROTOCOL_VERSION, "kind": kind.value, **fields})
    return [header, *(frames or [])]


def decode(parts: list[bytes]) -> tuple[Kind, dict[str, Any], list[bytes]]:
    """Split a multipart message into its kind, header fields and payload frames."""
    header = orjson.loads(parts[0])
    version = header.pop("v", None)
    if version != PROTOCOL_VERSION:
        raise ValueError(f"wire protocol version {version} received, {PROTOCOL_VERSION} expected")
    return Kind(header.pop("kind")), header, parts[1:]


def shard_message(
    config: WorkerConfig, bodies: list[bytes], indices: np.ndarray, scheduled_ns: np.ndarray
) -> list:
    """Frames of a SHARD: request bodies ready to send, their indices and scheduled offsets."""
    lengths = np.fromiter((len(b) for b in bodies), dtype=np.int64, count=len(bodies))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype("<i8")
    frames = [
        b"".join(bodies),
        offsets.tobytes(),
        np.ascontiguousarray(indices, dtype="<i8").tobytes(),
        np.ascontiguousarray(scheduled_ns, dtype="<i8").tobytes(),
    ]
    return encode(Kind.SHARD, frames, config=asdict(config))


@dataclass
class Shard:
    """A decoded SHARD: request ``k`` has body ``bodies[offsets[k]:offsets[k+1]]``."""

    config: WorkerConfig
    bodies: bytes
    offsets: np.ndarray
    indices: np.ndarray
    scheduled_ns: np.ndarray

    def body(self, k: int) -> bytes:
        """The ready-to-send body of the shard's k-th request."""
        return self.bodies[self.offsets[k] : self.offsets[k + 1]]


def decode_shard(fields: dict[str, Any], frames: list[bytes]) -> Shard:
    """Rebuild a Shard from a SHARD message's header fields and frames."""
    bodies, offsets, indices, scheduled = frames
    return Shard(
        config=WorkerConfig(**fields["config"]),
        bodies=bytes(bodies),
        offsets=np.frombuffer(offsets, dtype="<i8"),
        indices=np.frombuffer(indices, dtype="<i8"),
        scheduled_ns=np.frombuffer(scheduled, dtype="<i8"),
    )


def records_message(
    rows: list[tuple], event_ns: bytes, errors: dict[int, str], texts: dict[int, str]
) -> list:
    """Frames of a RECORDS batch: one RECORD_DTYPE row per request plus their event instants."""
    records = np.array(rows, dtype=RECORD_DTYPE)
    return encode(
        Kind.RECORDS,
        [records.tobytes(), event_ns],
        errors={str(k): v for k, v in errors.items()},
        texts={str(k): v for k, v in texts.items()},
    )


def decode_records(
    fields: dict[str, Any], frames: list[bytes]
) -> tuple[np.ndarray, np.ndarray, dict[int, str], dict[int, str]]:
    """Rebuild (records, event_ns, errors, texts) from a RECORDS message."""
    records = np.frombuffer(frames[0], dtype=RECORD_DTYPE)
    event_ns = np.frombuffer(frames[1], dtype="<i8")
    if int(records["n_events"].sum()) != len(event_ns):
        raise ValueError("RECORDS batch is inconsistent: event count differs from n_events")
    errors = {int(k): v for k, v in fields.get("errors", {}).items()}
    texts = {int(k): v for k, v in fields.get("texts", {}).items()}
    return records, event_ns, errors, texts
