"""The coordinator's end of the worker channel: one ROUTER socket, and who is on it.

Local workers (spawned processes) connect over ``ipc://`` in a directory only this user can
enter. With ``--listen`` (workers that join by hand) or ``--ray`` the same socket also binds
``tcp://`` as a CurveZMQ server (workers/keys.py): a ZAP handler admits only the run's worker
key, and every connection is encrypted. Each worker says HELLO (its host, cores, pid and
versions) and is answered WELCOME with its worker id, or REFUSED with the reason: another
loadgen or protocol version, or no place left for it.

A ``Member`` is one worker as the coordinator knows it: where it was placed (local, Ray,
remote), what it said, when it was last heard from, its clock offset, and how to tell it is
gone: a local process's exit, a Ray actor's death, or a remote worker's silence (it says ALIVE
every second it has nothing else to say), or a send to it that fails (``send``: with
ROUTER_MANDATORY a peer whose connection is gone is unreachable). Before t0, ``sync_clocks``
estimates each worker's clock offset from PING/PONG exchanges (loadgen/fleet/clock_sync.py).

What peers say reaches the terminal through ``printable`` (loadgen/terminal.py), and repeated
warnings (dropped messages, refused keys and workers) through one ``CappedWarnings``: five of a
kind, then a count (``flush``, at the end of the run). The sets of refused keys and identities,
which only quiet repeats, hold at most MAX_REFUSED_KEYS entries each.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from time import perf_counter_ns
from typing import Any

import zmq
import zmq.asyncio
from zmq.auth.thread import ThreadAuthenticator

from loadgen.fleet.clock_sync import PING_ROUND_TIMEOUT_S, PING_ROUNDS, ClockOffset, estimate_offset
from loadgen.terminal import CappedWarnings, printable
from workers.keys import CoordinatorKeys, server_options
from workers.protocol import (
    LOADGEN_VERSION,
    PROTOCOL_VERSION,
    Codec,
    Kind,
    ProtocolError,
    peek,
    version_mismatch,
)

log = logging.getLogger(__name__)

LOST_AFTER_S = 5.0  # a remote worker silent this long, while the coordinator listens, is lost
# A worker process that exited cleanly sent DONE just before: its last messages may still be on
# their way through the socket when the coordinator sees the process gone. So long, it is not lost.
CLEAN_EXIT_GRACE_S = 2.0
MAX_REFUSED_KEYS = 64  # refused keys (and identities) remembered to quiet their repeats
ANY_ADDRESS = ("0.0.0.0", "::", "*", "")  # a bind address that no worker can connect to
LOCAL, RAY, REMOTE = "local", "ray", "remote"


@dataclass(frozen=True)
class Listen:
    """Where workers that join by hand connect, how many are awaited, and the run's keys."""

    host: str
    port: int
    remote_workers: int
    keys: CoordinatorKeys


@dataclass
class Member:
    """One worker of the run, as the coordinator knows it."""

    worker: int
    identity: bytes
    placement: str  # LOCAL, RAY or REMOTE
    process: BaseProcess | None = None  # a local worker's process
    # A Ray worker's death, as Ray tells it (None while it lives); set by the Ray placement.
    ray_lost: Callable[[], str | None] | None = None
    node: str = ""  # a Ray worker's node id
    hello: dict[str, Any] | None = None
    address: str = ""  # the peer address of a tcp:// worker
    last_seen: float = 0.0  # time.monotonic() of its last message
    clock: ClockOffset | None = None
    lost: str = ""  # why it was lost mid-run ("" while it was not)

    def where(self) -> str:
        """Which worker this is, and where it runs unless on this host: for messages."""
        if self.placement == LOCAL:
            return f"worker {self.worker}"
        host = printable(self.hello["host"]) if self.hello else "?"
        at = f" at {self.address}" if self.address else ""
        node = f" node {self.node[:12]}" if self.node else ""
        return f"worker {self.worker} ({self.placement}{node}, host {host}{at})"

    def describe(self) -> dict[str, Any]:
        """What the result JSON says of this worker."""
        hello = self.hello or {}
        clock = self.clock
        return {
            "worker": self.worker,
            "placement": self.placement,
            "node": self.node or None,
            "host": hello.get("host"),
            "address": self.address or None,
            "cores": hello.get("cores"),
            "pid": hello.get("pid"),
            "clock_offset_ns": clock.offset_ns if clock else None,
            "clock_uncertainty_ns": clock.uncertainty_ns if clock else None,
            "clock_round_trip_ns": clock.round_trip_ns if clock else None,
            "lost": self.lost or None,
        }


class AdmitCurveKey:
    """The ZAP handler's rule: only the run's worker key joins; a refused one is said once
    (of the first MAX_REFUSED_KEYS; the warnings are capped besides)."""

    def __init__(self, worker_public: str, warnings: CappedWarnings | None = None) -> None:
        self.worker_public = worker_public.encode()
        self.refused: set[bytes] = set()
        self.warnings = warnings if warnings is not None else CappedWarnings()

    def callback(self, domain: str, key: bytes) -> bool:
        """Whether a CurveZMQ client with public ``key`` may connect."""
        if key == self.worker_public:
            return True
        if key in self.refused:
            return False
        if len(self.refused) < MAX_REFUSED_KEYS:
            self.refused.add(key)
        self.warnings.warn(
            "refused worker keys",
            f"refused a worker whose key is not this run's (public key {key_name(key)}): its "
            "worker.key is not the one `loadgen keygen` wrote with this coordinator's key",
        )
        return False


def key_name(public: bytes | str) -> str:
    """How messages name a CurveZMQ public key: its first 8 Z85 characters (both sides print
    the same, so a refusal can be matched to its worker)."""
    text = public.decode(errors="replace") if isinstance(public, bytes) else public
    return printable(text[:8]) + "..."


def host_addresses() -> list[str]:
    """This host's addresses a worker elsewhere may connect to: the one of the default route
    (a UDP socket's connect sends nothing) and those its name resolves to, loopback last."""
    found: list[str] = []
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((probe, 9))
            found.append(sock.getsockname()[0])
    with contextlib.suppress(OSError, UnicodeError):
        for *_, address in socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM):
            found.append(str(address[0]))
    unique = list(dict.fromkeys(a.split("%")[0] for a in found))
    return sorted(unique, key=lambda a: a.startswith(("127.", "::1")))


def join_hint(
    endpoint: str, count: int, hostname: str = "", addresses: list[str] | None = None
) -> str:
    """The line that tells how ``count`` workers join ``endpoint`` (ZeroMQ's LAST_ENDPOINT).
    A wildcard bind (0.0.0.0, ::) is no address to connect to: the host's name stands in its
    place, and its addresses are listed."""
    scheme, _, rest = endpoint.partition("://")
    host, _, port = rest.rpartition(":")
    bare = host.strip("[]")
    extra = ""
    if bare in ANY_ADDRESS:
        hostname = hostname or socket.gethostname()
        addresses = host_addresses() if addresses is None else addresses
        host = printable(hostname) or (addresses[0] if addresses else "THIS_HOST")
        if addresses:
            extra = f" (this host's addresses: {', '.join(addresses)})"
    command = f"loadgen worker --connect {scheme}://{host}:{port} --key worker.key"
    return f"Waiting for {count} remote workers: {command}{extra}"


class WorkerChannel:
    """The ROUTER socket every worker connects to, and the run's members."""

    def __init__(self, ipc_endpoint: str, codec: Codec) -> None:
        self.codec = codec
        self.ctx = zmq.asyncio.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(ipc_endpoint)  # before any CurveZMQ option: local workers stay plain
        self.tcp_endpoint = ""
        self.auth: ThreadAuthenticator | None = None
        self.members: dict[int, Member] = {}
        self.by_identity: dict[bytes, int] = {}
        self.remote_slots = 0  # workers that may still join by hand
        self.refused: set[bytes] = set()  # told REFUSED: what else they say is not news
        self.listening_since = time.monotonic()
        self.warnings = CappedWarnings()
        self.unreachable: dict[int, str] = {}  # workers a send failed to: why
        self.exited_at: dict[int, float] = {}  # when a worker's process was first seen gone

    def add(self, member: Member) -> None:
        """A worker placed by this run (local or Ray), known before it says HELLO."""
        self.members[member.worker] = member
        self.by_identity[member.identity] = member.worker

    def listen_tcp(self, host: str, port: int, keys: CoordinatorKeys, remote_slots: int) -> str:
        """Also accept CurveZMQ workers on tcp://host:port (0: any free port); the endpoint."""
        self.auth = ThreadAuthenticator(zmq.Context.shadow(self.ctx.underlying))
        self.auth.start()
        self.auth.configure_curve_callback("*", AdmitCurveKey(keys.worker_public, self.warnings))
        server_options(self.sock, keys)
        self.sock.setsockopt(zmq.HEARTBEAT_IVL, 1000)
        self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)
        bracketed = f"[{host}]" if ":" in host else host
        try:
            self.sock.bind(f"tcp://{bracketed}:{port}")
        except zmq.ZMQError as exc:
            raise OSError(f"cannot listen on {host}:{port}: {exc}") from None
        self.tcp_endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.remote_slots = remote_slots
        return self.tcp_endpoint

    async def recv(self, timeout_ms: int) -> tuple[int, Kind, dict, list[bytes]] | None:
        """The next message of a worker of this run, or None after ``timeout_ms``. A HELLO is
        answered here (WELCOME or REFUSED) and handed on; a message that is not one of this
        run's is dropped with a warning, never acted on."""
        if not await self.sock.poll(timeout_ms):
            return None
        identity_frame, *frames = await self.sock.recv_multipart(copy=False)
        identity = identity_frame.bytes
        parts = [frame.bytes for frame in frames]
        worker = self.by_identity.get(identity)
        try:
            kind, fields, payload = self.codec.decode(parts, from_worker=True)
        except ProtocolError as exc:
            await self._refuse_other_version(identity, parts, frames)
            if identity not in self.refused:
                unknown = "" if worker is not None else " from an unknown peer"
                self.drop(f"a message {exc}{unknown}")
            return None
        if kind is Kind.HELLO:
            worker = await self._on_hello(identity, fields, frames)
            if worker is None:
                return None
        elif worker is None:
            if identity not in self.refused:
                self.drop("a message from an identity that is not one of this run's workers")
            return None
        self.members[worker].last_seen = time.monotonic()
        return worker, kind, fields, payload

    async def _on_hello(self, identity: bytes, hello: dict, frames: list) -> int | None:
        """WELCOME a worker of this run (numbering one that joins by hand); REFUSE another."""
        address = _peer_address(frames[0]) if frames else ""
        host = printable(hello["host"])
        if why := version_mismatch(f"the worker on {host}", PROTOCOL_VERSION, hello["loadgen"]):
            await self._refuse(identity, why, host, address)
            return None
        worker = self.by_identity.get(identity)
        if worker is None:
            if self.remote_slots <= 0:
                await self._refuse(
                    identity,
                    "this run has all the remote workers it takes (--remote-workers)",
                    host,
                    address,
                )
                return None
            self.remote_slots -= 1
            worker = next(w for w in range(len(self.members) + 1) if w not in self.members)
            self.add(Member(worker, identity, REMOTE))
        member = self.members[worker]
        member.hello = hello
        member.address = address if member.placement != LOCAL else ""
        welcome = self.codec.encode(Kind.WELCOME, worker=worker, loadgen=LOADGEN_VERSION)
        if not await self.send(worker, welcome):
            if member.placement == REMOTE:
                self.forget(worker)  # gone as it joined: it never joined
                return None
            return worker  # a local or Ray worker: the run finds it lost
        if member.placement != LOCAL:
            log.info(f"{member.where()} joined ({hello['cores']} cores)")
        return worker

    async def _refuse_other_version(
        self, identity: bytes, parts: list[bytes], frames: list
    ) -> None:
        """A HELLO of another protocol version is answered REFUSED, in words it can read."""
        with contextlib.suppress(ProtocolError):
            version, kind, header = peek(parts)
            if kind == Kind.HELLO.value:
                host = printable(header.get("host", "?"))
                why = version_mismatch(f"the worker on {host}", version, header.get("loadgen"))
                if why:
                    address = _peer_address(frames[0]) if frames else ""
                    await self._refuse(identity, why, host, address)

    async def _refuse(self, identity: bytes, why: str, host: str, address: str) -> None:
        if len(self.refused) < MAX_REFUSED_KEYS:
            self.refused.add(identity)
        at = f" ({address})" if address else ""
        self.warnings.warn("refused workers", f"refused a worker on {host}{at}: {why}")
        with contextlib.suppress(zmq.ZMQError):
            await self.sock.send_multipart(
                [identity, *self.codec.encode(Kind.REFUSED, message=why)], copy=False
            )

    def drop(self, why: str) -> None:
        """Log a message that is not acted on (the first few; then only counted)."""
        self.warnings.warn("dropped messages", f"dropped {why} on the worker channel")

    async def send(self, worker: int, parts: list) -> bool:
        """Send a message to ``worker``; whether it went. A worker whose connection is gone
        (EHOSTUNREACH with ROUTER_MANDATORY) is unreachable from then on: ``lost`` says so."""
        if worker in self.unreachable:
            return False
        try:
            await self.sock.send_multipart([self.members[worker].identity, *parts], copy=False)
        except zmq.ZMQError as exc:
            self.unreachable[worker] = (
                f"{self.members[worker].where()} cannot be reached ({exc}: its connection is gone)"
            )
            return False
        return True

    def forget(self, worker: int) -> None:
        """A worker that joined by hand and is gone before the run: it never joined, and its
        place is open to another."""
        member = self.members.pop(worker)
        self.by_identity.pop(member.identity, None)
        self.unreachable.pop(worker, None)
        self.remote_slots += 1
        self.warnings.warn(
            "workers gone before the run",
            f"{member.where()} is gone before the run; its place is open to another worker",
        )

    def listening(self) -> None:
        """The coordinator listens again (after preparing): silence before now does not count."""
        self.listening_since = time.monotonic()

    def lost(self, worker: int) -> str | None:
        """Why ``worker`` is gone (None while it lives): its process died, its Ray actor died,
        or a remote worker has been silent for LOST_AFTER_S while the coordinator listened."""
        member = self.members[worker]
        if worker in self.unreachable:
            return self.unreachable[worker]
        if member.process is not None:
            if member.process.is_alive():
                return None
            exited = self.exited_at.setdefault(worker, time.monotonic())
            if member.process.exitcode == 0 and time.monotonic() - exited < CLEAN_EXIT_GRACE_S:
                return None  # its DONE may still be in the socket
            return f"{member.where()} died (exit code {member.process.exitcode})"
        if member.ray_lost is not None and (why := member.ray_lost()):
            return f"{member.where()} was lost: {why}"
        silent = time.monotonic() - max(member.last_seen, self.listening_since)
        if member.hello is not None and silent > LOST_AFTER_S:
            return (
                f"{member.where()} was lost: nothing from it for {silent:.0f} s (its host, "
                "process or network is gone)"
            )
        return None

    async def sync_clocks(self, workers: set[int], on_other: Callable) -> None:
        """Estimate each worker's clock offset: PING_ROUNDS rounds of PING/PONG with all of
        them at once. Messages of other kinds that come meanwhile go to ``on_other``."""
        samples: dict[int, list[tuple[int, int, int]]] = {w: [] for w in workers}
        for _ in range(PING_ROUNDS):
            waiting = set()
            for w in workers:
                if await self.send(w, self.codec.encode(Kind.PING, t_ns=perf_counter_ns())):
                    waiting.add(w)  # one that cannot be reached is lost: ``lost`` says so
            deadline = time.monotonic() + PING_ROUND_TIMEOUT_S
            while waiting and time.monotonic() < deadline:
                got = await self.recv(int(PING_ROUND_TIMEOUT_S * 1000))
                received_ns = perf_counter_ns()
                if got is None:
                    continue
                worker, kind, fields, payload = got
                if kind is Kind.PONG and worker in waiting:
                    samples[worker].append((fields["t_ns"], fields["worker_ns"], received_ns))
                    waiting.discard(worker)
                elif kind is not Kind.PONG:
                    await on_other(worker, kind, fields, payload)
        for w, exchanges in samples.items():
            if not exchanges and w in self.unreachable:
                continue  # lost: the run fails its requests
            if not exchanges:
                raise OSError(f"{self.members[w].where()} answered no clock PING")
            self.members[w].clock = estimate_offset(exchanges)

    def offset_ns(self, worker: int) -> int:
        """What to add to a coordinator instant to have it in ``worker``'s clock: 0 for a local
        worker (one host, one CLOCK_MONOTONIC), else the estimated offset."""
        member = self.members[worker]
        if member.placement == LOCAL or member.clock is None:
            return 0
        return member.clock.offset_ns

    def dismiss_remote(self, stop: list) -> bool:
        """Send ``stop`` (a STOP that dismisses) to every worker that joined over tcp://, which
        serves run after run until told; whether any was told."""
        told = False
        for member in self.members.values():
            if member.placement != LOCAL and member.hello is not None:
                # Queued at once (a ROUTER never waits to send); one that is gone fails it.
                sent = self.sock.send_multipart([member.identity, *stop], copy=False)
                # pyzmq types it an Awaitable; it is an asyncio.Future.
                sent.add_done_callback(_ignore_failure)  # type: ignore[attr-defined]
                told = True
        return told

    def close(self, linger_ms: int = 0) -> None:
        """Release the socket (after ``linger_ms`` for what is queued), the authenticator and
        the context."""
        self.sock.close(linger=linger_ms)
        if self.auth is not None:
            self.auth.stop()
        self.ctx.term()


def _ignore_failure(sent: Any) -> None:
    """A dismissal to a worker that is gone fails; there is nothing to do about it."""
    if not sent.cancelled():
        sent.exception()


def _peer_address(frame: Any) -> str:
    """The address a tcp:// peer connected from ("" for ipc://)."""
    with contextlib.suppress(Exception):
        return str(frame.get("Peer-Address") or "")
    return ""
