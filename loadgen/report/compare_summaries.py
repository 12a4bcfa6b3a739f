"""``loadgen compare`` of result JSONs without records: `vllm bench serve`'s result files, and
loadgen's (the same keys, loadgen's own figures under ``"loadgen"``) with no records file
beside them. Only the summary figures they hold are compared: no requests, so no interval.

The format is told by the keys (docs/compat.md: loadgen's result JSON is upstream's): a result
holds ``completed``, ``duration`` and ``request_throughput`` (generation and pooling alike); a
loadgen result adds a ``"loadgen"`` object. The metrics are those of a comparison from records
(loadgen/report/compare.py: mean, median and p99 of TTFT, TPOT, ITL and E2EL, the throughputs,
the counts), read from the keys upstream writes (``median_ttft_ms``...); a figure the file does
not hold (upstream writes E2EL only when asked) is ``-``. Pure functions: no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadgen.report.compare import COUNTS, LATENCIES, STATISTICS, Row

SUMMARY_ONLY = "summary figures only: no records, no intervals"
RESULT_KEYS = ("completed", "duration", "request_throughput")  # every result JSON has them
VLLM, LOADGEN = "vllm bench serve", "loadgen"


def result_format(document: object) -> str | None:
    """``loadgen`` or ``vllm bench serve`` when the JSON is a result of theirs, else None."""
    if not isinstance(document, dict) or not all(key in document for key in RESULT_KEYS):
        return None
    return LOADGEN if isinstance(document.get("loadgen"), dict) else VLLM


def not_a_result(name: str) -> str:
    """The one line for a JSON that is neither format."""
    return (
        f"{name}: neither a loadgen nor a `vllm bench serve` result JSON (it lacks "
        f"{', '.join(RESULT_KEYS)})"
    )


@dataclass
class SummarySide:
    """One side compared by its result JSON: its figures by the comparison's metric name."""

    name: str
    source: str  # LOADGEN or VLLM
    figures: dict[str, float] = field(default_factory=dict)
    runs: int = 1


def summary_side(name: str, document: Mapping[str, Any]) -> SummarySide:
    """The figures of a result JSON (``result_format`` said it is one)."""
    figures = {
        f"{stat} {latency} (ms)": _number(document.get(f"{stat}_{latency}_ms"))
        for latency in LATENCIES
        for stat in STATISTICS
    }
    figures["request throughput (req/s)"] = _number(document.get("request_throughput"))
    figures["output throughput (tok/s)"] = _number(document.get("output_throughput"))
    figures["completed"] = _number(document.get("completed"))
    own = document.get("loadgen")
    errors = own.get("errors") if isinstance(own, dict) else None
    errors = errors if isinstance(errors, dict) else {}
    for row_name, key in COUNTS:
        # Upstream writes `failed` only (none in a pooling result); loadgen the others beside.
        figures[row_name] = _number(errors.get(key, document.get(key)))
    source = result_format(document) or VLLM
    return SummarySide(name, source, figures)


def summary_rows(base: SummarySide, other: SummarySide) -> list[Row]:
    """Each figure of ``other`` against ``base``, in the order of a comparison from records."""
    counts = {"completed", *(name for name, _ in COUNTS)}
    return [
        Row(metric, value, other.figures.get(metric, math.nan), math.nan, math.nan,
            count=metric in counts)
        for metric, value in base.figures.items()
    ]  # fmt: skip


def _number(value: object) -> float:
    """A figure of the JSON: a number, upstream's string "inf", or NaN (absent, null)."""
    if isinstance(value, bool) or value is None:
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    return math.nan
