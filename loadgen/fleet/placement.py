"""Where a run's workers come from: local processes, workers that join by hand, or Ray actors.

``worker_pool`` reads the flags (--workers, --listen/--remote-workers/--key, --ray,
--workers-per-node) and the coordinator's key file, and builds the run's ``WorkerPool``; a key
file or an address that cannot be used is an InputError naming it, before anything starts.
"""

from __future__ import annotations

from loadgen.config import InputError, RunConfig
from loadgen.run.fanout import WorkerPool
from loadgen.run.ray_placement import RayPlacement, RayPlacementError
from loadgen.run.shards import planned_workers
from loadgen.run.worker_channel import Listen
from workers.keys import CoordinatorKeys, KeyFileError, read_keys


def worker_pool(config: RunConfig, size: int | None = None, reusable: bool = False) -> WorkerPool:
    """The run's workers as the flags place them (``size`` local or Ray workers, or as many as
    the run plans), not yet started."""
    placed = planned_workers(config) if size is None else size
    listen = None
    if config.listen is not None:
        host, port = config.listen
        assert config.key is not None  # validate(): --listen needs --key
        try:
            keys = read_keys(config.key, "coordinator")
        except KeyFileError as exc:
            raise InputError(f"--key: {exc}") from None
        assert isinstance(keys, CoordinatorKeys)
        listen = Listen(host, port, config.remote_workers, keys)
    ray = RayPlacement(config.ray, placed, config.workers_per_node) if config.ray else None
    try:
        return WorkerPool(placed, reusable, listen=listen, ray=ray)
    except (OSError, RayPlacementError) as exc:
        raise InputError(str(exc)) from None
