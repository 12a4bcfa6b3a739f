"""The global arrival schedule: when each request should be sent, as an offset from t0.

One schedule is built in the coordinator from the seed and sharded over the workers, so the
same seed gives the same arrival instants at any worker count. It follows ``vllm bench serve``
(reference §3.3):

    gap_i ~ Gamma(shape=k, scale=1 / (rate * k))   (k = burstiness; k = 1 is Poisson)
    gap_i = 1 / rate                                when k = inf
    gap_i = 0                                       when rate = inf
    t_i   = sum_{j <= i} gap_j,  then rescaled so that t_{N-1} = N / rate exactly

The gamma draws come from ``numpy.random.RandomState(seed)``, the legacy generator that
``np.random.seed(seed)`` seeds upstream, drawn in request order, so the instants match
upstream's for the same seed.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np


def arrival_offsets_s(num_requests: int, request_rate: float, burstiness: float, seed: int):
    """Arrival offsets in seconds (float64 [N]) of a run at ``request_rate`` with ``burstiness``."""
    if num_requests < 1:
        raise ValueError("--num-prompts must be at least 1")
    if not burstiness > 0:
        raise ValueError(f"--burstiness must be > 0, got {burstiness}")
    if not request_rate > 0:
        raise ValueError(f"--request-rate must be > 0, got {request_rate}")
    if math.isinf(request_rate):
        return np.zeros(num_requests)
    if math.isinf(burstiness):
        gaps = np.full(num_requests, 1.0 / request_rate)
    else:
        theta = 1.0 / (request_rate * burstiness)
        gaps = np.random.RandomState(seed).gamma(shape=burstiness, scale=theta, size=num_requests)
    offsets = np.cumsum(gaps)
    if offsets[-1] != 0:
        offsets *= (num_requests / request_rate) / offsets[-1]
        offsets[-1] = num_requests / request_rate  # the product can miss it by one ulp
    return offsets


def to_ns(offsets_s: np.ndarray) -> np.ndarray:
    """Seconds to integer nanoseconds (int64), the unit workers schedule in."""
    return np.round(offsets_s * 1e9).astype(np.int64)


def schedule_hash(offsets_ns: np.ndarray) -> str:
    """A short, stable fingerprint of a schedule, written into the result JSON."""
    return hashlib.sha256(np.ascontiguousarray(offsets_ns, dtype="<i8").tobytes()).hexdigest()[:16]


def assign_workers(
    num_requests: int, num_workers: int, max_concurrency: int | None = None
) -> np.ndarray:
    """Worker of each request: round-robin over the schedule, weighted by each worker's share
    of the concurrency cap (shares from ``split_concurrency``), so no worker gets more work per
    slot than another."""
    slots = max_concurrency or num_workers
    slot_owner = np.arange(slots, dtype=np.int64) % num_workers
    return slot_owner[np.arange(num_requests, dtype=np.int64) % slots]


def split_concurrency(max_concurrency: int | None, num_workers: int) -> list[int]:
    """Each worker's share of a global cap (0 = uncapped); the shares add up to the cap."""
    if not max_concurrency:
        return [0] * num_workers
    base, extra = divmod(max_concurrency, num_workers)
    return [base + (1 if w < extra else 0) for w in range(num_workers)]
