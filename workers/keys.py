"""The CurveZMQ keys of a multi-host run: one pair for the coordinator, one for its workers.

``loadgen keygen DIR`` writes two files (mode 0600), one per side, so that a worker's file
cannot pass for the coordinator:

- ``coordinator.key``: the coordinator's key pair, the workers' public key and the run token;
- ``worker.key``: the coordinator's public key, the workers' key pair and the run token.

A Ray run makes the same keys in memory for that run alone and hands the workers' half to its
actors. Each file is a small JSON object of Z85 keys (CurveZMQ's text form), tagged with its
``role``, so that a file given to the wrong side is refused by name.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import zmq

COORDINATOR_FILE = "coordinator.key"
WORKER_FILE = "worker.key"
TOKEN_BYTES = 16


class KeyFileError(ValueError):
    """A key file that cannot be used; the message names it and says why."""


@dataclass(frozen=True)
class CoordinatorKeys:
    """What the coordinator's side holds: its pair, the one worker public key it accepts."""

    secret: str
    public: str
    worker_public: str
    token: str
    role: str = "coordinator"


@dataclass(frozen=True)
class WorkerKeys:
    """What a worker holds: the coordinator's public key and the workers' pair."""

    coordinator_public: str
    secret: str
    public: str
    token: str
    role: str = "worker"


def _pair() -> tuple[str, str]:
    public, secret = zmq.curve_keypair()
    return secret.decode(), public.decode()


def new_keys() -> tuple[CoordinatorKeys, WorkerKeys]:
    """A fresh coordinator pair, worker pair and run token."""
    coordinator_secret, coordinator_public = _pair()
    worker_secret, worker_public = _pair()
    token = secrets.token_hex(TOKEN_BYTES)
    return (
        CoordinatorKeys(coordinator_secret, coordinator_public, worker_public, token),
        WorkerKeys(coordinator_public, worker_secret, worker_public, token),
    )


def write_keys(directory: str | Path) -> tuple[Path, Path]:
    """Write a new ``coordinator.key`` and ``worker.key`` into ``directory`` (0600, never over
    existing files); return their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / COORDINATOR_FILE, directory / WORKER_FILE
    if existing := [str(path) for path in paths if path.exists()]:
        raise KeyFileError(f"{', '.join(existing)} exists already; remove it or choose another DIR")
    both: tuple[CoordinatorKeys | WorkerKeys, ...] = new_keys()
    for path, keys in zip(paths, both, strict=True):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump(asdict(keys), file, indent=1)
            file.write("\n")
    return paths


def read_keys(path: str | Path, role: str) -> CoordinatorKeys | WorkerKeys:
    """The keys in ``path`` for ``role`` ("coordinator" or "worker"); KeyFileError names the file
    and what is wrong with it."""
    kind: type[CoordinatorKeys | WorkerKeys] = (
        CoordinatorKeys if role == "coordinator" else WorkerKeys
    )
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise KeyFileError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise KeyFileError(f"{path} is not a loadgen key file (not JSON)") from None
    if not isinstance(data, dict) or "role" not in data:
        raise KeyFileError(f"{path} is not a loadgen key file (loadgen keygen writes them)")
    if data["role"] != role:
        wanted = COORDINATOR_FILE if role == "coordinator" else WORKER_FILE
        raise KeyFileError(f"{path} is the {data['role']}'s key file; this side takes {wanted}")
    try:
        keys = kind(**data)
    except TypeError:
        raise KeyFileError(
            f"{path} is not a loadgen key file (its fields are not a key's)"
        ) from None
    for name, value in asdict(keys).items():
        if not isinstance(value, str) or (name != "role" and name != "token" and len(value) != 40):
            raise KeyFileError(f"{path}: {name} is not a Z85 CurveZMQ key")
    # Group-readable is how Kubernetes mounts a Secret for a non-root pod: only others count.
    if os.name == "posix" and Path(path).stat().st_mode & 0o007 and "secret" in data:
        print(
            f"warning: {path} can be read by every user; chmod 600 it (it holds a secret key)",
            flush=True,
        )
    return keys


def server_options(socket: zmq.Socket[Any], keys: CoordinatorKeys) -> None:
    """Make ``socket``'s next bind a CurveZMQ server with the coordinator's keys."""
    socket.curve_secretkey = keys.secret.encode()
    socket.curve_publickey = keys.public.encode()
    socket.curve_server = True


def client_options(socket: zmq.Socket[Any], keys: WorkerKeys) -> None:
    """Make ``socket``'s next connect a CurveZMQ client that trusts only the coordinator's key."""
    socket.curve_secretkey = keys.secret.encode()
    socket.curve_publickey = keys.public.encode()
    socket.curve_serverkey = keys.coordinator_public.encode()
