"""Workers placed by Ray (``--ray auto|ADDRESS``): one actor per worker, spread over the nodes.

Ray carries placement, start, liveness and teardown; the hot path does not go through it.
Each actor runs the same worker code as a local run (workers/remote.py), which connects back
to the coordinator over CurveZMQ ``tcp://`` with keys made for this run alone and handed to the
actors with their start. Shards, credits and records travel over ZeroMQ as in a local run.

Placement: the cluster's alive nodes in a fixed order (the coordinator's own node first, then by
node id); with ``--workers-per-node M`` worker i goes to node i // M, else the workers go round
the nodes. Each actor asks for one CPU (a worker is one event loop) and is pinned to its node
(NodeAffinitySchedulingStrategy, not soft), so a node without a free CPU fails the run before
it starts, by name, rather than leaving a worker pending.

``ray`` is an optional extra (``pip install 'loadgen[ray]'``) and is imported only here.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import asdict
from typing import Any

from loadgen.fleet.worker_channel import RAY, Member
from workers.keys import WorkerKeys
from workers.protocol import worker_identity

REFRESH_S = 0.25  # how often Ray is asked which actors have died


class RayPlacementError(Exception):
    """The Ray cluster cannot take the run's workers; the message says why."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayPlacementError("--ray needs Ray: pip install 'loadgen[ray]'") from None
    return ray


class WorkerActor:
    """A Ray actor that runs one remote worker until its runs end."""

    def node(self) -> tuple[str, str]:
        """This actor's Ray node id and host name."""
        import socket

        import ray

        return ray.get_runtime_context().get_node_id(), socket.gethostname()

    def serve(self, endpoint: str, keys: dict[str, str], identity: bytes) -> int:
        """Join the coordinator at ``endpoint`` and serve its shards; the process's pid."""
        from workers.remote import serve_remote

        serve_remote(endpoint, WorkerKeys(**keys), identity=identity)
        return os.getpid()


def plan_nodes(nodes: list[dict[str, Any]], workers: int, per_node: int | None) -> list[str]:
    """The node id of each worker (pure): ``per_node`` to a node in order, else round the
    nodes; RayPlacementError when the nodes are too few or short of CPUs."""
    if not nodes:
        raise RayPlacementError("the Ray cluster has no alive node")
    if per_node is not None:
        needed = math.ceil(workers / per_node)
        if needed > len(nodes):
            raise RayPlacementError(
                f"--workers {workers} at --workers-per-node {per_node} needs {needed} Ray "
                f"nodes; the cluster has {len(nodes)}"
            )
        placement = [nodes[i // per_node]["NodeID"] for i in range(workers)]
    else:
        placement = [nodes[i % len(nodes)]["NodeID"] for i in range(workers)]
    for node in nodes:
        wanted = placement.count(node["NodeID"])
        cpus = node.get("Resources", {}).get("CPU", 0)
        if wanted > cpus:
            raise RayPlacementError(
                f"Ray node {node['NodeID'][:12]} ({node.get('NodeManagerAddress')}) has "
                f"{cpus:g} CPUs for {wanted} workers; add nodes or lower --workers-per-node"
            )
    return placement


class RayPlacement:
    """The run's workers as Ray actors: connect, start them, watch them, stop them."""

    def __init__(self, address: str, workers: int, per_node: int | None) -> None:
        self.address = address
        self.workers = workers
        self.per_node = per_node
        self.ray: Any = None
        self.actors: list[Any] = []
        self.serving: list[Any] = []  # each actor's ``serve`` call: it ends when the actor does
        self.nodes: list[str] = []
        self.ended: dict[int, str] = {}  # actors whose ``serve`` ended, and how
        self.next_refresh = 0.0

    def connect(self) -> str:
        """Join the Ray cluster; the address this node's workers reach the coordinator at."""
        ray = self.ray = _import_ray()
        try:
            ray.init(
                address=self.address,
                logging_level="WARNING",
                log_to_driver=True,
                configure_logging=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            # Ray's message goes on to its own flags (--address): the first sentence says it.
            why = str(exc).split(". ")[0].rstrip(".")
            raise RayPlacementError(
                f"cannot join the Ray cluster at {self.address} (--ray): {why}"
            ) from None
        return ray.util.get_node_ip_address()

    def start(self, endpoint: str, keys: WorkerKeys, first_worker: int) -> list[Member]:
        """Start one actor per worker, pinned to its node; their members (numbered from
        ``first_worker``)."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        own = ray.get_runtime_context().get_node_id()
        alive = [node for node in ray.nodes() if node.get("Alive")]
        alive.sort(key=lambda node: (node["NodeID"] != own, node["NodeID"]))
        self.nodes = plan_nodes(alive, self.workers, self.per_node)
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(WorkerActor)
        members = []
        for i, node_id in enumerate(self.nodes):
            worker = first_worker + i
            identity = worker_identity(worker)
            actor = actor_class.options(
                name=None,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            self.actors.append(actor)
            self.serving.append(actor.serve.remote(endpoint, asdict(keys), identity))
            members.append(
                Member(
                    worker,
                    identity,
                    RAY,
                    node=node_id,
                    ray_lost=self._watch(len(self.serving) - 1),
                )
            )
        return members

    def _watch(self, i: int) -> Any:
        def lost() -> str | None:
            self._refresh()
            return self.ended.get(i)

        return lost

    def _refresh(self) -> None:
        """Ask Ray which actors' ``serve`` calls have ended, at most every REFRESH_S, in one
        call for all of them: the fan-out asks for each worker as often as every 10 ms."""
        now = time.monotonic()
        if now < self.next_refresh:
            return
        self.next_refresh = now + REFRESH_S
        running = [i for i in range(len(self.serving)) if i not in self.ended]
        if not running:
            return
        refs = [self.serving[i] for i in running]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        ended = set(ready)  # an ObjectRef hashes by its id
        for i in running:
            if self.serving[i] not in ended:
                continue
            try:
                self.ray.get(self.serving[i], timeout=0)
            except Exception as exc:  # ActorDiedError, a node's loss, a worker's crash
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                self.ended[i] = f"its Ray actor died ({type(exc).__name__}: {first})"
            else:
                self.ended[i] = "its Ray actor ended"

    def stop(self) -> None:
        """Kill the actors and leave the cluster."""
        if self.ray is None:
            return
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        with contextlib.suppress(Exception):
            self.ray.shutdown()
