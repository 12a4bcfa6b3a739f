"""A remote worker's entry point: `loadgen worker --connect` and each Ray actor run this.

The same ``Worker`` as a local run's, joined over ``tcp://`` with CurveZMQ keys rather than
spawned on the coordinator's ``ipc://`` channel; it serves the coordinator's runs (a campaign
has several) until it is dismissed, and exits early when the coordinator refuses it or goes
away (workers/link.py).
"""

from __future__ import annotations

import secrets

import uvloop

from workers.keys import WorkerKeys
from workers.lifecycle import raise_open_file_limit
from workers.link import CoordinatorLink
from workers.protocol import Codec
from workers.worker import Worker

JOIN_TIMEOUT_S = 300.0  # how long a worker keeps trying to reach its coordinator


def remote_identity() -> bytes:
    """A fresh routing identity for a worker that joins by hand (the coordinator numbers it)."""
    return b"r" + secrets.token_hex(8).encode()


def serve_remote(
    endpoint: str,
    keys: WorkerKeys,
    join_timeout_s: float = JOIN_TIMEOUT_S,
    identity: bytes | None = None,
) -> None:
    """Join the coordinator at ``endpoint`` (``tcp://HOST:PORT``), serve its runs until it
    dismisses this worker, and return."""
    raise_open_file_limit()
    link = CoordinatorLink(keys, join_timeout_s)
    worker = Worker(endpoint, identity or remote_identity(), Codec(keys.token), link)
    worker.reusable = True  # one run after another, until dismissed or the coordinator is gone
    uvloop.run(worker.run())
