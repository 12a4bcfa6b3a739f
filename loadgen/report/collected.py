"""What a run collected: the workers' per-request records and what they said besides."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workers.protocol import ConnectionStats


@dataclass
class Collected:
    """Everything the workers reported, one RECORD_DTYPE row per request (row i = request i)."""

    records: np.ndarray
    event_ns: np.ndarray  # request-major token-event instants (ns after t0)
    event_offsets: np.ndarray  # [N+1]
    errors: dict[int, str]
    texts: dict[int, str]
    t0_ns: int
    connections: int
    worker_problems: list[str] = field(default_factory=list)
    interrupted: bool = False
    loop_lag_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    worker_cpu_ns: list[int] = field(default_factory=list)  # CPU time of each worker's run
    worker_wall_ns: list[int] = field(default_factory=list)
    # What the workers saw of the server's connections, summed (ConnectionStats' fields).
    connection_stats: ConnectionStats = field(default_factory=ConnectionStats)
