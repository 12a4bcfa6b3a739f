"""``--slo``: which runs and points of a campaign meet it, the highest-throughput point that does,
and the evidence the search weighs (each measured value with its 95 % interval).

An SLO is a list of conditions in ``--fail-on``'s grammar (loadgen/config/gates.py) that must
*hold*: ``p99_ttft_ms<=500`` is met by a run whose p99 TTFT is at most 500 ms. Its keys are
summary.csv's metrics (``campaign_summary.metric_keys``: each latency's mean, median, p99 and the
other --metric-percentiles, the throughputs and counts), measured as summary.csv measures them
(over the steady window with --steady-state). A value the run could not measure (NaN) does not
meet any condition. A run meets the SLO when it meets every condition; a point, when every one of
its runs finished and met it.

The interval of a run's value (``run_estimates``), at 95 % (z = 1.96):

- a percentile q of a latency with n samples: the order statistics of ranks
  ``floor(n q - z sqrt(n q (1 - q)))`` and ``ceil(n q + z sqrt(n q (1 - q)))`` (1-based, kept
  within 1..n), which holds the true q-quantile whatever the distribution (the binomial count of
  samples below it, in its normal approximation); the median is q = 0.5;
- a mean: ``mean ± z s / sqrt(n)``;
- a throughput or a count: none (a run measures it once; repeats show its spread).

Over k runs of one load (``pooled``): the mean of their values, each side of the interval
``sqrt(sum side_i²) / k`` (the interval of a mean of k independent estimates); where a run has no
interval, Student's t interval of the k values (k ≥ 2).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from loadgen.config.gates import Gate, format_number, parse_gate
from loadgen.report.campaign_summary import (
    PointRuns,
    counted_requests,
    mean_ci95,
    metric_keys,
)
from loadgen.report.run_summary import RunSummary

CAMPAIGN_JSON = "campaign.json"  # the SLO's marks, and a search's account
Z95 = 1.959964
_LATENCY_STAT = re.compile(r"^(?P<stat>mean|median|p[0-9.]+)_(?P<latency>[a-z0-9_]+)_ms$")
THROUGHPUT = "request_throughput"  # what "the highest-throughput point" ranks by


@dataclass(frozen=True)
class Estimate:
    """A measured value and its 95 % interval (NaN ends: none)."""

    value: float
    low: float = math.nan
    high: float = math.nan

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
    mean, _, _ = mean_ci95([m.get(THROUGHPUT, math.nan) for m in point.metrics])
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


def quantile_interval(values: np.ndarray, q: float, z: float = Z95) -> tuple[float, float]:
    """The distribution-free interval of the q-quantile of ``values`` (the module's formula);
    NaN for no values."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    ordered = np.sort(values)
    spread = z * math.sqrt(n * q * (1 - q))
    low_rank = min(max(math.floor(n * q - spread), 1), n)
    high_rank = min(max(math.ceil(n * q + spread), 1), n)
    return float(ordered[low_rank - 1]), float(ordered[high_rank - 1])


def sample_estimate(stat: str, values_ms: np.ndarray, value: float) -> Estimate:
    """The interval of one statistic (mean, median, pNN) of a latency's samples around the
    value summary.csv has for it."""
    if len(values_ms) == 0 or not math.isfinite(value):
        return Estimate(value)
    if stat == "mean":
        if len(values_ms) < 2:
            return Estimate(value)
        half = Z95 * float(values_ms.std(ddof=1)) / math.sqrt(len(values_ms))
        return Estimate(value, value - half, value + half)
    q = 0.5 if stat == "median" else float(stat[1:]) / 100.0
    low, high = quantile_interval(values_ms, q)
    return Estimate(value, min(low, value), max(high, value))


def run_estimates(
    summary: RunSummary, metrics: dict[str, float], keys: Sequence[str], steady: bool = False
) -> dict[str, Estimate]:
    """Each key's value in a run's campaign ``metrics`` with its 95 % interval from the run's
    requests (the module's formulas); a throughput or count has none."""
    samples = counted_requests(summary, steady).samples
    estimates = {}
    for key in keys:
        value = metrics.get(key, math.nan)
        match = _LATENCY_STAT.match(key)
        if match is None or match["latency"] not in samples:
            estimates[key] = Estimate(value)
            continue
        values_ms = samples[match["latency"]] * 1000.0
        estimates[key] = sample_estimate(match["stat"], values_ms, value)
    return estimates


def pooled(estimates: Sequence[Estimate]) -> Estimate:
    """k runs' estimates of one value as one (the module's formula)."""
    values = [e.value for e in estimates]
    if not estimates or not all(math.isfinite(v) for v in values):
        return Estimate(math.nan)
    k = len(estimates)
    mean = sum(values) / k
    if all(math.isfinite(e.low) for e in estimates):
        below = math.sqrt(sum((e.value - e.low) ** 2 for e in estimates)) / k
        above = math.sqrt(sum((e.high - e.value) ** 2 for e in estimates)) / k
        return Estimate(mean, mean - below, mean + above)
    _, low, high = mean_ci95(values)
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
