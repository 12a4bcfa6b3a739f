"""``--probe-request-rate``'s figures: upstream's probe keys and its "Probe Requests" block.

``loadgen.server.probes`` sends the probes and fills a ``ProbeResults``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class ProbeResults:
    """What the probes measured: the E2EL of each successful one, and how many failed."""

    latencies_s: list[float] = field(default_factory=list)
    failures: int = 0


def probe_stats(results: ProbeResults) -> dict[str, Any] | None:
    """Upstream's probe keys over the successful probes; None when none succeeded."""
    if not results.latencies_s:
        return None
    latencies = np.asarray(results.latencies_s)
    return {
        "probe_completed": len(latencies),
        "probe_failed": results.failures,
        "probe_median_e2el_ms": float(np.median(latencies)) * 1000,
        "probe_p99_e2el_ms": float(np.percentile(latencies, 99)) * 1000,
        "probe_max_e2el_ms": float(latencies.max()) * 1000,
    }


def probe_lines(stats: dict[str, Any]) -> list[str]:
    """Upstream's "Probe Requests" block of the summary."""
    return [
        "{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"),
        "{:<40} {:<10}".format("Probe requests completed:", stats["probe_completed"]),
        "{:<40} {:<10}".format("Probe requests failed:", stats["probe_failed"]),
        "{:<40} {:<10.2f}".format("Median probe E2EL (ms):", stats["probe_median_e2el_ms"]),
        "{:<40} {:<10.2f}".format("P99 probe E2EL (ms):", stats["probe_p99_e2el_ms"]),
        "{:<40} {:<10.2f}".format("Max probe E2EL (ms):", stats["probe_max_e2el_ms"]),
    ]
