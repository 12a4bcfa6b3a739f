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

With ramp-up (``--ramp-up-strategy``, reference §1.6 and §3.3) the rate changes per request
index i instead, from start rps s to end rps e, with p_i = i / max(N - 1, 1):

    linear:       r_i = s + (e - s) * p_i
    exponential:  r_i = s * (e / s) ** p_i

and each gap is drawn as above at r_i (gamma with scale 1 / (r_i * k), 1 / r_i when k = inf,
0 when r_i = inf). The sum is **not** rescaled to N / rate: upstream rescales only without
ramp-up. Every r_i must be > 0, as upstream asserts; a linear ramp from 0 has r_0 = 0.
``rps_change_events`` rebuilds upstream's record of when each whole rps was first reached.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta
from typing import Any

import numpy as np


def arrival_offsets_s(
    num_requests: int,
    request_rate: float,
    burstiness: float,
    seed: int,
    rng: np.random.RandomState | None = None,
) -> np.ndarray:
    """Arrival offsets in seconds (float64 [N]) of a run at ``request_rate`` with ``burstiness``;
    gamma gaps come from ``rng`` when given (upstream's global generator), else ``seed``."""
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
        gaps = (rng if rng is not None else np.random.RandomState(seed)).gamma(
            shape=burstiness, scale=theta, size=num_requests
        )
    offsets = np.cumsum(gaps)
    if offsets[-1] != 0:
        offsets *= (num_requests / request_rate) / offsets[-1]
        offsets[-1] = num_requests / request_rate  # the product can miss it by one ulp
    return offsets


RAMP_UP_STRATEGIES = ("linear", "exponential")


def ramp_up_rates(num_requests: int, strategy: str, start_rps: float, end_rps: float) -> np.ndarray:
    """The rate (requests/s, float64 [N]) of each request of a ramp from start to end rps."""
    if strategy not in RAMP_UP_STRATEGIES:
        raise ValueError(f"--ramp-up-strategy must be linear or exponential, got {strategy}")
    progress = np.arange(num_requests) / max(num_requests - 1, 1)
    if strategy == "linear":
        return start_rps + (end_rps - start_rps) * progress
    if not start_rps > 0:
        raise ValueError(f"exponential ramp-up needs --ramp-up-start-rps > 0, got {start_rps}")
    ratio = end_rps / start_rps
    # Python's float ** (C pow), not np.power, whose SIMD loops can differ from it in the last
    # bit: the rates, and so the gaps and int(rate), must be upstream's to the bit.
    return np.array([start_rps * ratio**p for p in progress.tolist()], dtype=np.float64)


def ramp_up_offsets_s(
    num_requests: int,
    strategy: str,
    start_rps: float,
    end_rps: float,
    burstiness: float,
    seed: int,
    rng: np.random.RandomState | None = None,
) -> np.ndarray:
    """Arrival offsets in seconds (float64 [N]) of a ramp from ``start_rps`` to ``end_rps``;
    gamma gaps come from ``rng`` when given (upstream's global generator), else ``seed``."""
    if num_requests < 1:
        raise ValueError("--num-prompts must be at least 1")
    if not burstiness > 0:
        raise ValueError(f"--burstiness must be > 0, got {burstiness}")
    rates = ramp_up_rates(num_requests, strategy, start_rps, end_rps)
    if not (rates > 0).all():
        first = int(np.flatnonzero(~(rates > 0))[0])
        raise ValueError(
            f"ramp-up gives request {first} a non-positive request rate {rates[first]}; "
            "--ramp-up-start-rps must be > 0"
        )
    finite = ~np.isinf(rates)
    gaps = np.zeros(num_requests)
    if math.isinf(burstiness):
        gaps[finite] = 1.0 / rates[finite]
    else:
        # one draw per finite-rate request, in request order, as upstream's loop draws them
        theta = 1.0 / (rates[finite] * burstiness)
        gaps[finite] = (rng if rng is not None else np.random.RandomState(seed)).gamma(
            shape=burstiness, scale=theta
        )
    return np.cumsum(gaps)


def rps_change_events(
    strategy: str,
    start_rps: int,
    end_rps: int,
    offsets_s: np.ndarray,
    start_time: datetime,
) -> list[dict[str, Any]]:
    """Upstream's ``rps_change_events``: ``{"rps": n, "timestamp": iso}`` for every whole rps n
    the ramp reaches, from ``start_rps`` up, in order.

    The first event is ``start_rps`` at the run's start. After it, whenever a request's
    int(rate) exceeds the last whole rps recorded, every whole rps up to it gets an event stamped
    with that request's time. Upstream stamps ``datetime.now().isoformat()`` as it dispatches
    the request; loadgen's workers dispatch, so here the timestamps are derived from the
    schedule: ``start_time`` (the run's t0 as local wall-clock time) plus the request's
    scheduled offset, in the same format (local time, no zone, microseconds unless zero).
    """
    rates = ramp_up_rates(len(offsets_s), strategy, start_rps, end_rps).tolist()
    events: list[dict[str, Any]] = [{"rps": start_rps, "timestamp": start_time.isoformat()}]
    last_int_rps = start_rps
    for offset_s, rate in zip(np.asarray(offsets_s).tolist(), rates, strict=True):
        int_rps = int(rate)
        if int_rps > last_int_rps:
            timestamp = (start_time + timedelta(seconds=offset_s)).isoformat()
            events += [
                {"rps": n, "timestamp": timestamp} for n in range(last_int_rps + 1, int_rps + 1)
            ]
            last_int_rps = int_rps
    return events


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
