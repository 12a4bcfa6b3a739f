"""The wire format between the coordinator and its workers: every message kind, in one place.

Transport: the coordinator binds one ZeroMQ ROUTER socket; each worker connects a DEALER whose
identity is ``worker_identity(worker_id)``. A local run binds ``ipc://`` in a fresh directory
only its user can enter (mode 0700), so no other local user can connect. A message is a
multipart ZeroMQ message: frame 0 is a small JSON header
``{"v": PROTOCOL_VERSION, "t": <run token>, "kind": <Kind>, ...fields}``, and the frames after it
are raw little-endian numpy buffers, so bulk data is never JSON-encoded. The run token is a
secret the coordinator gives its workers when it spawns them; ``Codec.decode`` checks it and
each kind's direction, fields and frame count (``SCHEMA``), and a message that fails is logged
and dropped by whoever received it, never acted on.

| kind    | dir    | header fields                           | payload frames                 |
|---------|--------|-----------------------------------------|--------------------------------|
| HELLO   | w -> c | probe_port (0: none), host, cores, pid, | -                              |
|         |        | loadgen (its version)                   |                                |
| WELCOME | c -> w | worker (its id), loadgen                | -                              |
| REFUSED | c -> w | message (why it may not join)           | -                              |
| PING    | c -> w | t_ns (the coordinator's clock)          | -                              |
| PONG    | w -> c | t_ns (PING's), worker_ns (its clock)    | -                              |
| ALIVE   | w -> c | -                                       | -                              |
| SHARD   | c -> w | config (WorkerConfig as a dict)         | bodies, body_offsets, indices, |
|         |        |                                         | scheduled_ns, max_events,      |
|         |        |                                         | turns (--multi-turn, else b"") |
| READY   | w -> c | connections, connect_error,             | -                              |
|         |        | preopen_short (why fewer than planned)  |                                |
| START   | c -> w | t0_ns (perf_counter_ns of offset 0),    | -                              |
|         |        | credits (initial share of the cap)      |                                |
| CREDITS | c -> w | grant (credits added), lend (bool)      | -                              |
| DEMAND  | w -> c | returned (credits handed back),         | -                              |
|         |        | waiting (due requests without a credit) |                                |
| RECORDS | w -> c | errors {index: str}, texts {index: str} | records (RECORD_DTYPE),        |
|         |        | (each text at most its cap)             |                                |
|         |        |                                         | event_ns (int64)               |
| TOPUP   | c -> w | last (no block follows)                 | bodies, body_offsets, indices, |
|         |        |                                         | scheduled_ns, max_events, b""  |
| PROGRESS| w -> c | events (token events its requests in    | -                              |
|         |        | flight have received so far), released  |                                |
|         |        | (requests of its shard released so far) |                                |
| DONE    | w -> c | cpu_ns, wall_ns (of the run),           | loop_lag_ns (int64)            |
|         |        | connections (``ConnectionStats``),      |                                |
|         |        | block_waits, block_wait_ns (--duration: |                                |
|         |        | its dispatcher waited for a TOPUP),     |                                |
|         |        | topups (TOPUPs it took: each one's      |                                |
|         |        | requests are in its RECORDS)            |                                |
| STOP    | c -> w | reason                                  | -                              |
| FATAL   | w -> c | message                                 | -                              |

A worker's HELLO is answered with WELCOME (its worker id) or REFUSED: a worker of another
protocol or loadgen version is refused by name, whatever its version, and checks the
coordinator's version in WELCOME in turn. PING and PONG estimate each worker's clock offset
before START (loadgen/fleet/clock_sync.py); a remote worker that has sent nothing for a second
sends ALIVE, so that silence means it is lost.

PROGRESS goes with a worker's periodic flush when the count changed: the live view counts the
tokens of answers still streaming, so a run of long answers shows its output rate before the
first one ends. It is one sum over the requests in flight per flush, nothing per read.

TOPUP exists only with ``--duration`` (``WorkerConfig.topup``): the coordinator prepares the
run's requests in blocks and sends each worker its part of the next block before it runs out
(from PROGRESS's ``released``), one message per block; the worker appends it to its shard.

CREDITS and DEMAND exist only with ``--max-concurrency``: the cap is C credits that the
coordinator lends out and moves between workers (workers/credits.py), in batches, never one
message per request.

Loop-lag probes do not go through ZeroMQ (whose I/O threads would add their own delays):
during the run the coordinator sends each worker's UDP ``probe_port`` a datagram every 10 ms
holding its ``perf_counter_ns`` as 8 little-endian bytes and the run's probe token
(``encode_probe``), and the worker's event loop reads it the way it reads a response socket;
a datagram without the token is ignored, so nobody else can feed the verdict.

Remote workers (``tcp://``, CurveZMQ: workers/keys.py) have no probe port: each measures its
loop lag against a timer of its own instead (workers/loop_probe.py).

Every time in a record is ``perf_counter_ns() - t0_ns`` in the worker's own clock
(CLOCK_MONOTONIC), where START's ``t0_ns`` is the coordinator's t0 moved into that clock by the
worker's estimated offset: every figure is a duration on one clock.

Over 500 lines because it is the wire format, which the coordinator and the workers both import
and which the project keeps in one module: the message table above, the record's dtype, the
schema each message is checked against and its codec. Split, a change to a message would have
to be made in step across files that no import contract ties together.
"""

from __future__ import annotations

import hmac
import importlib.metadata
import inspect
import math
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Annotated, Any, get_type_hints

import numpy as np
import orjson

# 12 PROGRESS, 13 --duration deadline fields or cached_tokens, 14 both, 15 TOPUP and released
PROTOCOL_VERSION = 15


def _loadgen_version() -> str:
    try:
        return importlib.metadata.version("loadgen")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree not installed
        return "unknown"


LOADGEN_VERSION = _loadgen_version()


class Kind(str, Enum):
    """Message kinds; see the module docstring for fields and direction."""

    HELLO = "hello"
    WELCOME = "welcome"
    REFUSED = "refused"
    PING = "ping"
    PONG = "pong"
    ALIVE = "alive"
    SHARD = "shard"
    READY = "ready"
    START = "start"
    CREDITS = "credits"
    DEMAND = "demand"
    RECORDS = "records"
    PROGRESS = "progress"
    DONE = "done"
    STOP = "stop"
    FATAL = "fatal"
    TOPUP = "topup"


# A request's row as a worker builds it (``record``), in RECORD_DTYPE's field order.
Record = tuple[
    int, int, int, int, int, int, int, int, int, bool, bool, bool, float, float, bool, int
]


def record(
    *,
    index: Annotated[int, "<i8"],  # global request index
    # when the worker released it (the scheduled instant, or later if the worker was late)
    released_ns: Annotated[int, "<i8"] = -1,
    sent_ns: Annotated[int, "<i8"] = -1,  # right before it was written (after any client queue)
    end_ns: Annotated[int, "<i8"] = -1,  # response finished, or the failure was seen
    n_events: Annotated[int, "<i4"] = 0,  # token events (workers/sse.py says which count)
    status: Annotated[int, "<i4"] = 0,  # HTTP status; 0 when no response arrived
    prompt_tokens: Annotated[int, "<i4"] = -1,  # usage.prompt_tokens, -1 when not reported
    completion_tokens: Annotated[int, "<i4"] = -1,  # usage.completion_tokens, or -1
    connect_ns: Annotated[int, "<i8"] = 0,  # opening a new connection for it; 0 if reused
    success: Annotated[bool, "u1"] = False,  # HTTP 200 and at least one token event
    resent: Annotated[bool, "u1"] = False,  # re-sent on a fresh connection (stale pooled one)
    truncated: Annotated[bool, "u1"] = False,  # a 200 stream that ended without [DONE]
    server_queue_s: Annotated[float, "<f8"] = math.nan,  # metrics.queue_time_ms / 1000, or NaN
    server_ttft_s: Annotated[float, "<f8"] = math.nan,  # time_to_first_token_ms / 1000, or NaN
    text_capped: Annotated[bool, "u1"] = False,  # its kept text was cut to the cap
    # prompt tokens the server served from its prefix cache (workers/sse.py), or -1
    cached_tokens: Annotated[int, "<i4"] = -1,
) -> Record:
    """One finished request's row, built by field name: RECORD_DTYPE is made from these
    parameters (name, and numpy type in the annotation), in this order. Times are ns after t0;
    the request's token-event instants travel separately in ``event_ns`` (n_events of them, in
    order). Every field but ``index`` defaults to what a request never sent or never reported
    has. A plain tuple, not a NamedTuple: built by name it costs a request about 100 ns more
    than a bare tuple does, a NamedTuple built by name 700 ns more."""
    return (
        index, released_ns, sent_ns, end_ns, n_events, status, prompt_tokens, completion_tokens,
        connect_ns, success, resent, truncated, server_queue_s, server_ttft_s, text_capped,
        cached_tokens,
    )  # fmt: skip


def _record_dtype() -> np.dtype[np.void]:
    """The wire layout of a row: ``record``'s parameters in order, each its annotation's numpy
    type. Checked here that ``record`` puts each one at its own place in the row."""
    hints = get_type_hints(record, include_extras=True)
    names = list(inspect.signature(record).parameters)
    numbered: dict[str, Any] = {name: place for place, name in enumerate(names)}
    if record(**numbered) != tuple(range(len(names))):
        raise AssertionError(f"record() builds its row in another order than {names}")
    return np.dtype([(name, hints[name].__metadata__[0]) for name in names])


RECORD_DTYPE = _record_dtype()
# What a row holds for a request that was never sent or never reported (its index aside).
UNSENT_ROW = record(index=-1)
# How a request's error begins when the run's stop, not the server, ended it: it never left the
# client (not sent), or it was in flight when the run stopped (cancelled). The report counts
# these apart from the failures (loadgen/report/failures.py); the texts date from the first
# records files, so older files are counted alike.
NOT_SENT_PREFIX = "not sent:"
CANCELLED_PREFIX = "cancelled:"
NOT_SENT_AT_STOP = f"{NOT_SENT_PREFIX} the run was stopped before this request's turn"
# The errors of --duration's deadline (workers/worker.py records them; the report reads them).
NOT_SENT_AT_DEADLINE = "not sent: --duration was up before this request's turn"
CANCELLED_AT_DEADLINE = "cancelled: still in flight when --duration-grace-s ran out"


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
    request_timeout_s: float | None = None  # --request-timeout: sent to last byte
    idle_timeout_s: float | None = None  # --idle-timeout: no byte on an open request
    connect_timeout_s: float | None = None  # --connect-timeout: opening a connection
    # The first this many finished requests, while they fail, are reported one by one rather
    # than with the next flush: the coordinator's fail fast judges the run on them (0: off).
    report_first: int = 0
    # --multi-turn: the shard's requests are conversations' turns (workers/conversations.py),
    # each conversation's X-Session-ID this prefix + "conv-" + its number.
    multi_turn: bool = False
    session_prefix: str = ""
    # The bodies' Content-Type: openai-audio's are multipart/form-data with the run's boundary.
    content_type: str = "application/json"
    # --duration: no request is released after t0 + deadline_ns (0: no deadline); those in
    # flight then have grace_ns to finish before they are cancelled.
    deadline_ns: int = 0
    grace_ns: int = 0
    # --duration's top-ups: TOPUP blocks may follow the shard, until one says it is the last.
    topup: bool = False


PROBE_TOKEN_BYTES = 16


def encode_probe(t_ns: int, token: bytes) -> bytes:
    """A loop-lag probe datagram: the sender's perf_counter_ns, then the run's probe token."""
    return t_ns.to_bytes(8, "little") + token


def decode_probe(datagram: bytes, token: bytes) -> int | None:
    """The instant a probe was sent, or None for a datagram that is not this run's probe."""
    if len(datagram) != 8 + len(token) or not hmac.compare_digest(datagram[8:], token):
        return None
    return int.from_bytes(datagram[:8], "little")


def worker_identity(worker_id: int) -> bytes:
    """The ZeroMQ routing identity of worker ``worker_id``."""
    return f"w{worker_id}".encode()


class ProtocolError(ValueError):
    """A message that is not one of this run's: it is logged and dropped, never acted on."""


# Per kind: the header fields it must carry (name: type) and how many payload frames follow.
_NONE = type(None)
SCHEMA: dict[Kind, tuple[dict[str, type | tuple[type, ...]], int]] = {
    Kind.HELLO: ({"probe_port": int, "host": str, "cores": int, "pid": int, "loadgen": str}, 0),
    Kind.WELCOME: ({"worker": int, "loadgen": str}, 0),
    Kind.REFUSED: ({"message": str}, 0),
    Kind.PING: ({"t_ns": int}, 0),
    Kind.PONG: ({"t_ns": int, "worker_ns": int}, 0),
    Kind.ALIVE: ({}, 0),
    Kind.SHARD: ({"config": dict}, 6),
    Kind.READY: ({"connections": int, "connect_error": (str, _NONE), "preopen_short": str}, 0),
    Kind.START: ({"t0_ns": int, "credits": int}, 0),
    Kind.CREDITS: ({"grant": int, "lend": bool}, 0),
    Kind.DEMAND: ({"returned": int, "waiting": int}, 0),
    Kind.RECORDS: ({"errors": dict, "texts": dict}, 2),
    Kind.PROGRESS: ({"events": int, "released": int}, 0),
    Kind.DONE: (
        {
            "cpu_ns": int,
            "wall_ns": int,
            "connections": dict,
            "block_waits": int,
            "block_wait_ns": int,
            "topups": int,
        },
        1,
    ),
    Kind.STOP: ({"reason": str}, 0),
    Kind.FATAL: ({"message": str}, 0),
    Kind.TOPUP: ({"last": bool}, 6),
}
FROM_WORKER = frozenset(
    {
        Kind.HELLO,
        Kind.PONG,
        Kind.ALIVE,
        Kind.READY,
        Kind.DEMAND,
        Kind.RECORDS,
        Kind.PROGRESS,
        Kind.DONE,
        Kind.FATAL,
    }
)


@dataclass(frozen=True)
class Codec:
    """Encodes and checks the messages of one run. Every header carries the run's token, a
    secret the coordinator hands its workers at spawn; a message without it, or of a kind,
    direction, field type or frame count other than SCHEMA's, is a ProtocolError."""

    token: str  # 32 hex digits

    @classmethod
    def new(cls) -> Codec:
        """The codec of a new run, with a fresh random token."""
        return cls(secrets.token_hex(PROBE_TOKEN_BYTES))

    @property
    def probe_token(self) -> bytes:
        """What each loop-lag probe datagram of this run carries after its timestamp."""
        return bytes.fromhex(self.token)[:PROBE_TOKEN_BYTES]

    def encode(
        self, kind: Kind, frames: Sequence[bytes | memoryview] | None = None, **fields: Any
    ) -> list[bytes | memoryview]:
        """Build the multipart frames of one message."""
        header = orjson.dumps(
            {"v": PROTOCOL_VERSION, "t": self.token, "kind": kind.value, **fields}
        )
        return [header, *(frames or [])]

    def decode(
        self, parts: list[bytes], from_worker: bool
    ) -> tuple[Kind, dict[str, Any], list[bytes]]:
        """Check a multipart message and split it into its kind, header fields and frames."""
        header = _header(parts)
        if header.pop("v", None) != PROTOCOL_VERSION:
            raise ProtocolError(f"not wire protocol version {PROTOCOL_VERSION}")
        token = header.pop("t", None)
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode(), self.token.encode()
        ):
            raise ProtocolError("not this run's token")
        try:
            kind = Kind(header.pop("kind", None))
        except ValueError:
            raise ProtocolError("an unknown kind") from None
        if (kind in FROM_WORKER) != from_worker:
            raise ProtocolError(f"{kind.value} sent the wrong way")
        fields, frame_count = SCHEMA[kind]
        if set(header) != set(fields):
            raise ProtocolError(f"{kind.value} with fields {sorted(header)}")
        for name, expected in fields.items():
            value = header[name]
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ProtocolError(f"{kind.value}.{name} of type {type(value).__name__}")
        if len(parts) - 1 != frame_count:
            raise ProtocolError(f"{kind.value} with {len(parts) - 1} frames")
        return kind, header, parts[1:]


def peek(parts: list[bytes]) -> tuple[object, str, dict[str, Any]]:
    """A message's version, kind and fields read without any check, to answer a peer of
    another version in words it can read (REFUSED); ProtocolError when it is not JSON."""
    header = _header(parts)
    return header.get("v"), str(header.get("kind")), header


def _header(parts: list[bytes]) -> dict[str, Any]:
    """The message's first frame as a JSON object; ProtocolError when it is not one."""
    try:
        header = orjson.loads(parts[0]) if parts else None
    except orjson.JSONDecodeError:
        raise ProtocolError("a header that is not JSON") from None
    if not isinstance(header, dict):
        raise ProtocolError("a header that is not a JSON object")
    return header


def version_mismatch(peer: str, peer_protocol: object, peer_loadgen: object) -> str | None:
    """Why a peer of protocol ``peer_protocol`` and loadgen ``peer_loadgen`` cannot work with
    this one (None when it can)."""
    if peer_protocol == PROTOCOL_VERSION and peer_loadgen == LOADGEN_VERSION:
        return None
    return (
        f"{peer} runs loadgen {peer_loadgen} (wire protocol {peer_protocol}) and this one "
        f"loadgen {LOADGEN_VERSION} (wire protocol {PROTOCOL_VERSION}): install the same "
        "loadgen version on every host"
    )


def shard_message(
    codec: Codec,
    config: WorkerConfig,
    bodies: list[bytes],
    indices: np.ndarray,
    scheduled_ns: np.ndarray,
    max_events: np.ndarray | None = None,
    turns: np.ndarray | None = None,
) -> list[bytes | memoryview]:
    """Frames of a SHARD: request bodies ready to send, their indices, scheduled offsets,
    output guards (the most token events each may stream; 0: no guard) and, for conversations,
    each turn's (conversation, turn index, think time in ns) as an [N, 3] int64 array."""
    frames = _request_frames(bodies, indices, scheduled_ns, max_events, turns)
    return codec.encode(Kind.SHARD, frames, config=asdict(config))


def topup_message(
    codec: Codec,
    bodies: list[bytes],
    indices: np.ndarray,
    scheduled_ns: np.ndarray,
    max_events: np.ndarray,
    last: bool,
) -> list[bytes | memoryview]:
    """Frames of a TOPUP: a worker's part of the next block, as a SHARD's requests."""
    frames = _request_frames(bodies, indices, scheduled_ns, max_events, None)
    return codec.encode(Kind.TOPUP, frames, last=last)


def _request_frames(
    bodies: list[bytes],
    indices: np.ndarray,
    scheduled_ns: np.ndarray,
    max_events: np.ndarray | None,
    turns: np.ndarray | None,
) -> list[bytes]:
    lengths = np.fromiter((len(b) for b in bodies), dtype=np.int64, count=len(bodies))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype("<i8")
    return [
        b"".join(bodies),
        offsets.tobytes(),
        np.ascontiguousarray(indices, dtype="<i8").tobytes(),
        np.ascontiguousarray(scheduled_ns, dtype="<i8").tobytes(),
        np.ascontiguousarray(
            max_events if max_events is not None else np.zeros(len(bodies)), dtype="<i8"
        ).tobytes(),
        b"" if turns is None else np.ascontiguousarray(turns, dtype="<i8").tobytes(),
    ]


@dataclass
class Shard:
    """A decoded SHARD: request ``k`` has body ``bodies[offsets[k]:offsets[k+1]]``."""

    config: WorkerConfig
    bodies: bytes
    offsets: np.ndarray
    indices: np.ndarray
    scheduled_ns: np.ndarray
    max_events: np.ndarray  # the output guard of each request; 0: none
    turns: np.ndarray | None = None  # [N, 3]: conversation, turn index, think ns (--multi-turn)

    def body(self, k: int) -> bytes:
        """The ready-to-send body of the shard's k-th request."""
        return self.bodies[self.offsets[k] : self.offsets[k + 1]]


def decode_shard(fields: dict[str, Any], frames: list[bytes]) -> Shard:
    """Rebuild a Shard from a SHARD message's header fields and frames (ProtocolError when its
    config is not a WorkerConfig or its frames do not add up)."""
    try:
        config = WorkerConfig(**fields["config"])
    except TypeError as exc:
        raise ProtocolError(f"SHARD of another layout: {exc}") from None
    return decode_requests(config, frames)


def decode_requests(config: WorkerConfig, frames: list[bytes]) -> Shard:
    """A SHARD's or TOPUP's requests as a Shard of ``config`` (ProtocolError when its frames do
    not add up)."""
    bodies, offsets, indices, scheduled, max_events, turns = frames
    try:
        shard = Shard(
            config=config,
            bodies=bytes(bodies),
            offsets=np.frombuffer(offsets, dtype="<i8"),
            indices=np.frombuffer(indices, dtype="<i8"),
            scheduled_ns=np.frombuffer(scheduled, dtype="<i8"),
            max_events=np.frombuffer(max_events, dtype="<i8"),
            turns=np.frombuffer(turns, dtype="<i8").reshape(-1, 3) if len(turns) else None,
        )
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"SHARD of another layout: {exc}") from None
    n = len(shard.indices)
    offsets_ok = len(shard.offsets) == n + 1 and shard.offsets[0] == 0
    if not (
        offsets_ok
        and (np.diff(shard.offsets) >= 0).all()
        and shard.offsets[-1] == len(shard.bodies)
        and len(shard.scheduled_ns) == len(shard.max_events) == n
        and (shard.turns is None or len(shard.turns) == n)
    ):
        raise ProtocolError("SHARD frames that do not add up: offsets, indices or schedule")
    return shard


def records_message(
    codec: Codec,
    rows: list[Record],
    event_ns: bytes,
    errors: dict[int, str],
    texts: dict[int, str],
) -> list[bytes | memoryview]:
    """Frames of a RECORDS batch: one RECORD_DTYPE row per request plus their event instants."""
    records = np.array(rows, dtype=RECORD_DTYPE)
    return codec.encode(
        Kind.RECORDS,
        [records.tobytes(), event_ns],
        errors={str(k): v for k, v in errors.items()},
        texts={str(k): v for k, v in texts.items()},
    )


def decode_records(
    fields: dict[str, Any], frames: list[bytes]
) -> tuple[np.ndarray, np.ndarray, dict[int, str], dict[int, str]]:
    """Rebuild (records, event_ns, errors, texts) from a checked RECORDS message
    (ProtocolError when its frames or texts do not add up)."""
    if len(frames[0]) % RECORD_DTYPE.itemsize or len(frames[1]) % 8:
        raise ProtocolError("RECORDS frames of a size that is not whole rows")
    records = np.frombuffer(frames[0], dtype=RECORD_DTYPE)
    event_ns = np.frombuffer(frames[1], dtype="<i8")
    if (records["n_events"] < 0).any() or int(records["n_events"].sum()) != len(event_ns):
        raise ProtocolError("RECORDS batch is inconsistent: event count differs from n_events")
    try:
        errors = {int(k): str(v) for k, v in fields["errors"].items() if isinstance(v, str)}
        texts = {int(k): str(v) for k, v in fields["texts"].items() if isinstance(v, str)}
    except ValueError:
        raise ProtocolError(
            "RECORDS errors or texts keyed by something other than an index"
        ) from None
    return records, event_ns, errors, texts
