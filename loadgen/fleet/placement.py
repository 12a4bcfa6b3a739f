"""Where a run's workers come from: local processes, workers that join by hand, or Ray actors.

``worker_pool`` reads the flags (--workers, --listen/--remote-workers/--key, --ray,
--workers-per-node) and the coordinator's key file, and builds the run's ``WorkerPool``; a key
file or an address that cannot be used is an InputError naming it, before anything starts.
"""

from __future__ import annotations

from loadgen.config import InputError
from loadgen.config.sections import Traffic
from loadgen.fleet.fanout import WorkerPool
from loadgen.fleet.ray_placement import RayPlacement, RayPlacementError
from loadgen.fleet.worker_channel import Listen
from workers.keys import CoordinatorKeys, KeyFileError, read_keys


def planned_workers(config: Traffic) -> int:
    """Worker processes to start before the dataset is known: --workers, no more than the
    requests asked for or --max-concurrency."""
    # --num-prompts 0 (every line of a custom file) is not known until the file is read.
    planned = config.num_prompts if config.num_prompts > 0 else config.workers
    return min(config.workers, planned, config.concurrency or config.workers)


def worker_pool(config: Traffic, size: int | None = None, reusable: bool = False) -> WorkerPool:
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
