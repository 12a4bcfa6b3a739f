"""The client's verdict on itself: could it keep up, or did it distort what it measured?

Three figures decide it (docs/performance.md explains how to read them):

- **loop lag**: the coordinator PINGs every worker every 10 ms with its perf_counter_ns; the
  delay until the worker's event loop handles the message is exactly the delay an arriving
  SSE chunk waits before it is stamped. Its p99 must stay at or below 1 ms, so no more than
  1 % of stamps can be late by more than 1 ms.
- **worker CPU**: CPU time / wall time of each worker over the run. A worker at 90 % of a core
  or more has no headroom: its loop lag is about to grow, and bursts already wait.
- **send lag** (finite request rates only): release instant - scheduled instant. Its p99 must
  stay at or below 2 ms (uvloop's timers have 1 ms granularity). With ``--request-rate inf``
  every request is due at t0 and the time to release a burst is not a distortion of any
  measured latency, so it is reported but not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from loadgen.report.stats import sample_stats

LOOP_LAG_P99_MS = 1.0
WORKER_CPU_PCT = 90.0
SEND_LAG_P99_MS = 2.0


@dataclass
class ClientHealth:
    """The figures the verdict is taken from."""

    send_lag_p99_ms: float
    send_lag_judged: bool  # False at --request-rate inf
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    loop_lag_samples: int
    worker_cpu_pct: list[float]

    def to_json(self) -> dict:
        """The figures and thresholds for the result JSON."""
        return {
            "send_lag_p99_ms": self.send_lag_p99_ms,
            "send_lag_judged": self.send_lag_judged,
            "loop_lag_p99_ms": self.loop_lag_p99_ms,
            "loop_lag_max_ms": self.loop_lag_max_ms,
            "loop_lag_samples": self.loop_lag_samples,
            "worker_cpu_pct": self.worker_cpu_pct,
            "thresholds": {
                "loop_lag_p99_ms": LOOP_LAG_P99_MS,
                "worker_cpu_pct": WORKER_CPU_PCT,
                "send_lag_p99_ms": SEND_LAG_P99_MS,
            },
        }


def measure(
    send_lag_ms: np.ndarray,
    loop_lag_ns: np.ndarray,
    worker_cpu_ns: list[int],
    worker_wall_ns: list[int],
    request_rate: float,
) -> ClientHealth:
    """Reduce the raw samples (send lags of released requests, PING delays, worker CPU)."""
    send = sample_stats(send_lag_ms, [99])
    loop = sample_stats(np.asarray(loop_lag_ns, dtype=np.float64) / 1e6, [99])
    return ClientHealth(
        send_lag_p99_ms=send.at(99),
        send_lag_judged=not math.isinf(request_rate),
        loop_lag_p99_ms=loop.at(99),
        loop_lag_max_ms=loop.max,
        loop_lag_samples=loop.count,
        worker_cpu_pct=[
            100.0 * cpu / wall if wall > 0 else 0.0
            for cpu, wall in zip(worker_cpu_ns, worker_wall_ns, strict=True)
        ],
    )


def verdict(health: ClientHealth) -> str:
    """``client: OK (figures)`` or ``client-bound: reasons (figures)``."""
    reasons = []
    if health.loop_lag_p99_ms > LOOP_LAG_P99_MS:
        reasons.append(f"loop lag p99 {health.loop_lag_p99_ms:.2f} ms > {LOOP_LAG_P99_MS:g} ms")
    cpu = max(health.worker_cpu_pct, default=0.0)
    if cpu >= WORKER_CPU_PCT:
        reasons.append(f"worker CPU {cpu:.0f} % >= {WORKER_CPU_PCT:.0f} %")
    if health.send_lag_judged and health.send_lag_p99_ms > SEND_LAG_P99_MS:
        reasons.append(f"send lag p99 {health.send_lag_p99_ms:.2f} ms > {SEND_LAG_P99_MS:g} ms")
    send = f"{health.send_lag_p99_ms:.2f} ms" + ("" if health.send_lag_judged else " (rate inf)")
    figures = (
        f"send lag p99 {send}, loop lag p99 {health.loop_lag_p99_ms:.2f} ms, "
        f"worker CPU max {cpu:.0f} %"
    )
    if reasons:
        return f"client-bound: {'; '.join(reasons)} ({figures})"
    return f"client: OK ({figures})"


def not_judged(health: ClientHealth) -> str:
    """The verdict line of a run that never ended: its workers' loop lag and CPU were never
    reported, so only the send lag is known."""
    send = f"{health.send_lag_p99_ms:.2f} ms" + ("" if health.send_lag_judged else " (rate inf)")
    return (
        "client: not judged (the run did not end: its workers' loop lag and CPU were never "
        f"reported; send lag p99 {send})"
    )
