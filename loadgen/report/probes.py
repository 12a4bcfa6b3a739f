"""``--probe-request-rate``'s figures: upstream's probe keys and its "Probe Requests" block.

``loadgen.server.probes`` sends the probes and fills a ``ProbeResults``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadgen.report.rows import Block, block_lines
from loadgen.report.stats import sample_stats


@dataclass
class ProbeResults:
    """What the probes measured: the E2EL of each successful one, and how many failed."""

    latencies_s: list[float] = field(default_factory=list)
    failures: int = 0


def probe_stats(results: ProbeResults) -> dict[str, Any] | None:
    """Upstream's probe keys over the successful probes; None when none succeeded."""
    if not results.latencies_s:
        return None
    e2el = sample_stats(results.latencies_s, [99], scale=1000)
    return {
        "probe_completed": e2el.count,
        "probe_failed": results.failures,
        "probe_median_e2el_ms": e2el.median,
        "probe_p99_e2el_ms": e2el.at(99),
        "probe_max_e2el_ms": e2el.max,
    }


def probe_block(stats: dict[str, Any]) -> Block:
    """Upstream's "Probe Requests" block of the summary."""
    return Block(
        "Probe Requests",
        (
            ("Probe requests completed:", stats["probe_completed"], ""),
            ("Probe requests failed:", stats["probe_failed"], ""),
            ("Median probe E2EL (ms):", stats["probe_median_e2el_ms"], ".2f"),
            ("P99 probe E2EL (ms):", stats["probe_p99_e2el_ms"], ".2f"),
            ("Max probe E2EL (ms):", stats["probe_max_e2el_ms"], ".2f"),
        ),
    )


def probe_lines(stats: dict[str, Any]) -> list[str]:
    """Upstream's "Probe Requests" block of the summary, line for line."""
    return block_lines(probe_block(stats))
