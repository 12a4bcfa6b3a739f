"""`loadgen worker` and `loadgen keygen`: workers that join a run from another host, by hand.

A coordinator started with ``loadgen run --listen HOST:PORT --remote-workers K --key
coordinator.key`` waits for K workers; each is ``loadgen worker --connect tcp://HOST:PORT --key
worker.key`` on its own host. ``loadgen keygen DIR`` writes the pair of key files. The worker
imports only ``workers`` (no dataset, tokenizer or report code).
"""

from __future__ import annotations

import sys

import click

from workers.keys import KeyFileError, WorkerKeys, read_keys, write_keys

JOIN_TIMEOUT_S = 300.0


def _endpoint(value: str) -> str:
    """``tcp://HOST:PORT``, checked (click.BadParameter names what is wrong)."""
    rest = value.removeprefix("tcp://")
    host, sep, port = rest.rpartition(":")
    if not value.startswith("tcp://") or not sep or not host or not port.isdigit():
        raise click.BadParameter(f"'{value}': give tcp://HOST:PORT, as the coordinator printed it")
    return value


@click.command("worker")
@click.option(
    "--connect",
    required=True,
    metavar="tcp://HOST:PORT",
    callback=lambda ctx, param, value: _endpoint(value),
    help="The coordinator's --listen address.",
)
@click.option(
    "--key",
    required=True,
    metavar="FILE",
    help="worker.key from `loadgen keygen`, written with the coordinator's key.",
)
@click.option(
    "--join-timeout-sec",
    type=click.FloatRange(min=0, min_open=True),
    default=JOIN_TIMEOUT_S,
    show_default=True,
    help="How long to keep trying to reach the coordinator before exiting 2.",
)
def worker_command(connect: str, key: str, join_timeout_sec: float) -> None:
    """Join a run started with `loadgen run --listen` and serve its requests from this host.

    Exits 0 once the coordinator dismisses it after its runs, 2 when refused (a key or loadgen
    version that is not the coordinator's) or when no coordinator answers in time, 3 when the
    coordinator goes away mid-run."""
    from workers.remote import serve_remote

    try:
        keys = read_keys(key, "worker")
    except KeyFileError as exc:
        print(f"loadgen worker: --key: {exc}", file=sys.stderr)
        sys.exit(2)
    assert isinstance(keys, WorkerKeys)
    print(f"loadgen worker: joining {connect}", flush=True)
    serve_remote(connect, keys, join_timeout_sec)


@click.command("keygen")
@click.argument("directory", metavar="DIR")
def keygen_command(directory: str) -> None:
    """Write DIR/coordinator.key and DIR/worker.key: CurveZMQ keys for runs across hosts.

    The coordinator takes coordinator.key (`loadgen run --listen ... --key`), each worker
    worker.key (`loadgen worker --key`); a worker's file cannot stand in for the coordinator.
    Both are 0600 and never overwritten: make new ones for each deployment."""
    try:
        coordinator, worker = write_keys(directory)
    except (KeyFileError, OSError) as exc:
        print(f"loadgen keygen: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"{coordinator}: for `loadgen run --listen HOST:PORT --key {coordinator}`")
    print(f"{worker}: for `loadgen worker --connect tcp://HOST:PORT --key {worker}`")
