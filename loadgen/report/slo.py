"""``--slo``: which runs and points of a campaign meet it, the highest-throughput point that does,
and the evidence the search weighs (each measured value with its 95 % interval).

An SLO is a list of conditions in ``--fail-on``'s grammar (loadgen/config/gates.py) that must
*hold*: ``p99_ttft_ms<=500`` is met by a run whose p99 TTFT is at most 500 ms. Its keys are
summary.csv's metrics (``campaign_summary.metric_keys``: each latency's mean, median, p99 and the
other --metric-percentiles, the throughputs and counts), measured as summary.csv measures them
(over the steady window with --steady-state). A value the run could not measure (NaN) does not
meet any condition. A run meets the SLO when it meets every condition; a point, when every one of
its runs finished and met it.

The interval of a run's value (``run_estimates``), at 95 %: the percentile interval of the
run's bootstrap over its requests (``campaign_summary.run_replicates``: a latency statistic's,
a request's ITL gaps drawn together); a throughput or a count has none (a run measures it
once). The interval holds the value: its ends never leave the range of the values measured.

Over k runs of one load (``pooled``): the mean of their values; with ``MIN_RUNS`` (3) runs or
more, the two-level bootstrap over the runs and their requests (``intervals.point_interval``),
or for a figure without replicates Student's t over the runs clipped at 0; with fewer runs the
requests' noise only, the runs taken as they are (``intervals.runs_fixed_replicates``; for
estimates without replicates, each side ``sqrt(sum side_i²) / k``, the interval of a mean of k
independent estimates), and none for a figure without a per-run interval. This is what the
search weighs ("near the line": the interval holds the threshold); summary.csv shows no
interval with fewer than 3 runs.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from loadgen.config.gates import Gate, format_number, parse_gate
from loadgen.report.campaign_summary import PointRuns, metric_keys, run_replicates
from loadgen.report.intervals import (
    MIN_RUNS,
    finite_mean,
    percentile_interval,
    point_interval,
    runs_fixed_replicates,
    runs_interval,
)
from loadgen.report.run_summary import RunSummary

CAMPAIGN_JSON = "campaign.json"  # the SLO's marks, and a search's account
_LATENCY_STAT = re.compile(r"^(?P<stat>mean|median|p[0-9.]+)_(?P<latency>[a-z0-9_]+)_ms$")
THROUGHPUT = "request_throughput"  # what "the highest-throughput point" ranks by


@dataclass(frozen=True)
class Estimate:
    """A measured value and its 95 % interval (NaN ends: none), and the bootstrap replicates it
    came from (a run's over its requests; None: not bootstrapped)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    replicates: np.ndarray | None = field(default=None, compare=False, repr=False)

    def holds(self, threshold: float) -> bool:
        """Whether ``threshold`` lies within the interval: noise could put the value either side."""
        return math.isfinite(self.low) and self.low <= threshold <= self.high

    def as_json(self) -> dict[str, float | None]:
        """The value and the interval's ends, null where there is none."""
        return {"value": _json(self.value), "low": _json(self.low), "high": _json(self.high)}

    def __str__(self) -> str:
        text = format_number(self.value)
        if math.isfinite(self.low):
            text += f" [{format_number(self.low)}, {format_number(self.high)}]"
        return text


def _json(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def slo_gates(conditions: Sequence[str]) -> list[Gate]:
    """The SLO's conditions, parsed."""
    return [parse_gate(text) for text in conditions]


def slo_problem(conditions: Sequence[str], percentiles: Sequence[float]) -> str | None:
    """Why a condition's key is not one of summary.csv's metrics (``percentiles``: the run's
    --metric-percentiles), in one line naming it; None when every key is."""
    known = metric_keys(percentiles)
    for text in conditions:
        key = parse_gate(text).key
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=3)
        hint = f" (close: {', '.join(close)})" if close else ""
        if _LATENCY_STAT.match(key):
            hint += "; --metric-percentiles chooses the pNN_METRIC_ms keys"
        return f"--slo {text!r}: {key} is not one of summary.csv's metrics{hint}"
    return None


def holds(gate: Gate, value: float) -> bool:
    """Whether a measured value meets the condition (a value not measured does not)."""
    return math.isfinite(value) and gate.met_by(value)


def run_meets(gates: Sequence[Gate], metrics: dict[str, float]) -> bool:
    """Whether one run's campaign metrics meet every condition."""
    return all(holds(gate, metrics.get(gate.key, math.nan)) for gate in gates)


def misses(gates: Sequence[Gate], metrics: dict[str, float]) -> list[str]:
    """The conditions a run's metrics miss, each with the measured value."""
    return [
        f"{gate.key} {format_number(metrics.get(gate.key, math.nan))} (SLO {gate})"
        for gate in gates
        if not holds(gate, metrics.get(gate.key, math.nan))
    ]


@dataclass(frozen=True)
class SloMarks:
    """Each point's runs that met the SLO, whether the point did, and the best point's index."""

    met_runs: list[int]
    meets: list[bool]
    best: int | None  # the highest request throughput among the points that meet it


def mark_points(points: Sequence[PointRuns], gates: Sequence[Gate]) -> SloMarks:
    """The SLO's marks on a campaign's points."""
    met_runs = [sum(run_meets(gates, metrics) for metrics in p.metrics) for p in points]
    meets = [
        bool(p.metrics) and not p.errors and met == len(p.metrics)
        for p, met in zip(points, met_runs, strict=True)
    ]
    ranked = [(_throughput(p), i) for i, p in enumerate(points) if meets[i]]
    best = max(ranked)[1] if ranked else None
    return SloMarks(met_runs, meets, best)


def _throughput(point: PointRuns) -> float:
    mean = finite_mean([m.get(THROUGHPUT, math.nan) for m in point.metrics])
    return mean if math.isfinite(mean) else -math.inf


def with_slo(rows: list[dict[str, object]], marks: SloMarks) -> list[dict[str, object]]:
    """summary.csv's rows (one per point, in the marks' order) with two columns before
    ``error``: ``slo_met_runs`` (the point's runs that met the SLO) and ``slo_met`` (yes: every
    run finished and met it)."""
    out = []
    for row, met, meets in zip(rows, marks.met_runs, marks.meets, strict=True):
        cells = {key: value for key, value in row.items() if key != "error"}
        cells["slo_met_runs"] = met
        cells["slo_met"] = "yes" if meets else "no"
        out.append({**cells, "error": row.get("error", "")})
    return out


def best_line(conditions: Sequence[str], points: Sequence[PointRuns], marks: SloMarks) -> str:
    """The console's line naming the highest-throughput point within the SLO (or none)."""
    slo = ", ".join(conditions)
    if marks.best is None:
        return f"No point meets the SLO ({slo})"
    point = points[marks.best]
    return (
        f"Highest throughput within the SLO ({slo}): {point.name}, {_throughput(point):.2f} req/s"
    )


def slo_json(
    conditions: Sequence[str], points: Sequence[PointRuns], marks: SloMarks
) -> dict[str, object]:
    """The SLO's part of the campaign's JSON: the conditions, each point's marks, the best."""
    return {
        "conditions": list(conditions),
        "points": [
            {
                "point": p.name,
                "runs": len(p.metrics) + len(p.errors),
                "runs_met": met,
                "meets": meets,
                THROUGHPUT: _json(_throughput(p)),
            }
            for p, met, meets in zip(points, marks.met_runs, marks.meets, strict=True)
        ],
        "best_point": None if marks.best is None else points[marks.best].name,
    }


def write_campaign_json(path: str, document: dict[str, object]) -> None:
    """Write the campaign's JSON (``CAMPAIGN_JSON``): the SLO's part, and a search's."""
    with open(path, "wb") as out:
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


def read_campaign_json(folder: str) -> dict[str, Any] | None:
    """A campaign folder's JSON, or None where it has none (no --slo)."""
    path = os.path.join(folder, CAMPAIGN_JSON)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        document = orjson.loads(handle.read())
    return document if isinstance(document, dict) else None


def run_estimates(
    summary: RunSummary, metrics: dict[str, float], keys: Sequence[str], steady: bool = False
) -> dict[str, Estimate]:
    """Each key's value in a run's campaign ``metrics`` with its 95 % interval from the run's
    requests (the module's rule); a throughput or count has none."""
    latencies = {m["latency"] for key in keys if (m := _LATENCY_STAT.match(key))}
    replicates = run_replicates(summary, steady, latencies) if latencies else {}
    estimates = {}
    for key in keys:
        value = metrics.get(key, math.nan)
        drawn = replicates.get(key)
        if drawn is None or not math.isfinite(value):
            estimates[key] = Estimate(value)
            continue
        low, high = percentile_interval(drawn)
        if not math.isfinite(low):
            estimates[key] = Estimate(value)
            continue
        estimates[key] = Estimate(value, min(low, value), max(high, value), drawn)
    return estimates


def pooled(estimates: Sequence[Estimate]) -> Estimate:
    """k runs' estimates of one value as one (the module's rule)."""
    values = [e.value for e in estimates]
    if not estimates or not all(math.isfinite(v) for v in values):
        return Estimate(math.nan)
    k = len(estimates)
    mean = sum(values) / k
    drawn = [e.replicates for e in estimates]
    if all(d is not None for d in drawn):
        runs = [d for d in drawn if d is not None]
        if k >= MIN_RUNS:
            low, high = point_interval(mean, runs)
        else:
            low, high = percentile_interval(runs_fixed_replicates(runs))
            low, high = min(low, mean), max(high, mean)
        return Estimate(mean, low, high) if math.isfinite(low) else Estimate(mean)
    if all(math.isfinite(e.low) for e in estimates):
        below = math.sqrt(sum((e.value - e.low) ** 2 for e in estimates)) / k
        above = math.sqrt(sum((e.high - e.value) ** 2 for e in estimates)) / k
        return Estimate(mean, mean - below, mean + above)
    low, high = runs_interval(values)
    return Estimate(mean, low, high)


__all__ = [
    "Estimate",
    "SloMarks",
    "best_line",
    "holds",
    "mark_points",
    "misses",
    "pooled",
    "run_estimates",
    "run_meets",
    "slo_gates",
    "slo_json",
    "slo_problem",
    "with_slo",
]
