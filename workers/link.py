"""How a worker is tied to its coordinator, and how it knows the coordinator is gone.

- ``ParentLink``: a local worker, a child process on the coordinator's ``ipc://`` channel. It
  dies with its parent (workers/lifecycle.py): the parent-death signal, and a check of its
  parent's pid.
- ``CoordinatorLink``: a remote worker (``loadgen worker --connect``, or a Ray actor) on
  ``tcp://`` with CurveZMQ (workers/keys.py). ZeroMQ's own heartbeats (on its I/O thread, so a
  busy loop on either side does not trip them) close a connection whose peer has gone quiet for
  ``HEARTBEAT_TIMEOUT_MS``; the link watches the socket's events and exits the process when the
  coordinator stays away for ``LOST_AFTER_S``, or when the coordinator refuses this worker's
  key (its ZAP handler answers the handshake with an error: both sides name the key). A
  handshake that fails without that answer proves nothing about the key: a proxy or a sidecar
  may accept the TCP connection before the coordinator is up, so the worker keeps trying until
  ``--join-timeout-sec``, then says how many handshakes failed.

``check`` is called where the worker already wakes (its 50 ms flusher during the run, its poll
while it waits), so the link arms no timer of its own.
"""

from __future__ import annotations

import os
import re
import sys
import time

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from workers.keys import WorkerKeys, client_options
from workers.lifecycle import PARENT_GONE

HEARTBEAT_IVL_MS = 1000
HEARTBEAT_TIMEOUT_MS = 3000
LOST_AFTER_S = 2.0  # after a disconnection, how long a worker waits for the coordinator
REFUSED_EXIT = 2  # exit code of a worker the coordinator refused (key or version)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")  # without ESC and BEL nothing acts on a terminal


def _exit(message: str, code: int) -> None:
    # The message may carry the coordinator's words (its refusal): one line, nothing raw.
    print(f"loadgen worker: {_CONTROLS.sub(' ', message)}", file=sys.stderr, flush=True)
    os._exit(code)  # nothing of this process is worth keeping: no coordinator will read it


class ParentLink:
    """A local worker's tie to the coordinator that spawned it."""

    remote = False

    def __init__(self, parent_pid: int) -> None:
        self.parent_pid = parent_pid

    def connect(
        self, ctx: zmq.asyncio.Context, endpoint: str, identity: bytes
    ) -> zmq.asyncio.Socket:
        """The worker's DEALER, connected to ``endpoint``."""
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.setsockopt(zmq.LINGER, 5000)
        sock.connect(endpoint)
        return sock

    def check(self) -> None:
        """Exit at once when the coordinator is gone: nobody will read what this worker says."""
        if os.getppid() != self.parent_pid:
            os._exit(PARENT_GONE)

    def close(self) -> None:
        """Nothing to release."""


class CoordinatorLink:
    """A remote worker's tie to its coordinator over an authenticated ``tcp://`` connection."""

    remote = True

    def __init__(self, keys: WorkerKeys, join_timeout_s: float) -> None:
        self.keys = keys
        self.join_deadline = time.monotonic() + join_timeout_s
        self.join_timeout_s = join_timeout_s
        self.endpoint = ""
        self.monitor: zmq.Socket[bytes] | None = None
        self.joined = False  # a handshake succeeded at least once
        self.connected = False
        self.lost_since: float | None = None
        self.failed_handshakes = 0

    def connect(
        self, ctx: zmq.asyncio.Context, endpoint: str, identity: bytes
    ) -> zmq.asyncio.Socket:
        """The worker's DEALER, a CurveZMQ client of ``endpoint`` with heartbeats, watched."""
        self.endpoint = endpoint
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.setsockopt(zmq.LINGER, 5000)
        sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        client_options(sock, self.keys)
        # A plain (not asyncio) PAIR: check() drains it without waiting.
        monitor_address = f"inproc://loadgen-link-{os.getpid()}-{id(self)}"
        sock.monitor(monitor_address, zmq.EVENT_ALL)
        self.monitor = zmq.Context.shadow(ctx.underlying).socket(zmq.PAIR)
        self.monitor.connect(monitor_address)
        sock.connect(endpoint)
        return sock

    def check(self) -> None:
        """Take the socket's events; exit when the coordinator is gone or refused the key."""
        assert self.monitor is not None
        while True:
            try:
                event = parse_monitor_message(self.monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                break
            self._on_event(event["event"])
        now = time.monotonic()
        if not self.joined and now > self.join_deadline:
            failed = (
                f"; {self.failed_handshakes} CurveZMQ handshakes failed there (what accepts the "
                "connection does not complete one: a proxy or sidecar in the way, something "
                "other than a loadgen coordinator, or one of another `loadgen keygen`)"
                if self.failed_handshakes
                else "; is it running with --listen there?"
            )
            _exit(
                f"no coordinator answered at {self.endpoint} within {self.join_timeout_s:g} s "
                f"(--join-timeout-sec){failed}",
                REFUSED_EXIT,
            )
        if self.lost_since is not None and now - self.lost_since > LOST_AFTER_S:
            _exit(f"lost the coordinator at {self.endpoint}; exiting", PARENT_GONE)

    def _on_event(self, event: int) -> None:
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.joined = self.connected = True
            self.lost_since = None
            self.failed_handshakes = 0
        elif event == zmq.EVENT_DISCONNECTED:
            if self.connected and self.lost_since is None:
                self.lost_since = time.monotonic()
            self.connected = False
        elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            _exit(
                f"the coordinator at {self.endpoint} refused this worker's key (public key "
                f"{self.keys.public[:8]}...): it is not the worker.key that `loadgen keygen` "
                "wrote with the coordinator's key",
                REFUSED_EXIT,
            )
        elif event in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
            self.failed_handshakes += 1  # ZeroMQ reconnects; the join deadline bounds the tries

    def close(self) -> None:
        """Release the monitor socket."""
        if self.monitor is not None:
            self.monitor.close(linger=0)
            self.monitor = None


Link = ParentLink | CoordinatorLink
