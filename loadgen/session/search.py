"""``--search rate|concurrency --slo ...``: the policy that picks the next load to probe, given the
verdicts so far. Pure: no clock, no sockets; the campaign loop (search_plan.py) runs the probes.

The highest load L* that meets the SLO is bracketed, then bisected:

1. **Bracket.** Probe ``start``, then double (``2 L``) while the SLO holds, up to ``maximum``
   (a search whose every probe holds stops there: L* is at least the maximum). If ``start``
   already fails, halve instead (a concurrency down to 1, a rate down to ``start / 1024``) until
   a load holds (none does: the search says so).
2. **Bisect.** With ``lo`` the highest load that held below ``hi``, the lowest that failed,
   probe ``(lo + hi) / 2`` (a concurrency: its integer part) until ``hi - lo <= tolerance * lo``
   (or, for a concurrency, ``hi = lo + 1``). The answer is ``lo`` and the bracket ``[lo, hi]``.
3. **Noise.** A load whose measured value's interval holds a condition's threshold ("near the
   line": run-to-run noise could flip its verdict) is probed again, up to ``repeats`` more
   times, its verdict then judged on its runs pooled (``loadgen.report.slo.pooled``: the
   interval narrows by about sqrt(k)). A load is probed again before the search moves on.

If the verdicts are not monotonic (noise, or a server that recovers), ``hi`` is the lowest load
that failed and ``lo`` the highest below it that held: the bracket always holds the crossing
nearest the loads that failed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadgen.config.gates import Gate
from loadgen.report.slo import Estimate, holds, pooled

RATE_FLOOR_HALVINGS = 10  # a rate search that fails at its start gives up 2**10 times lower


@dataclass(frozen=True)
class Bounds:
    """What is searched and where: ``kind`` rate or concurrency, the first load, the highest,
    the bracket's width at which the search stops (a fraction of its low end), and how many
    more runs a load near the line gets."""

    kind: str
    start: float
    maximum: float
    tolerance: float = 0.1
    repeats: int = 2

    def load(self, value: float) -> float:
        """A load as probed: a concurrency is a whole number, at least 1."""
        return float(max(1, math.floor(value))) if self.kind == "concurrency" else value

    @property
    def floor(self) -> float:
        """The lowest load a search that fails at its start halves down to."""
        return 1.0 if self.kind == "concurrency" else self.start / 2**RATE_FLOOR_HALVINGS


@dataclass(frozen=True)
class Verdict:
    """One load's verdict on its runs so far: each condition's pooled estimate, whether the SLO
    holds, and whether the load sits near the line (an interval holds a threshold)."""

    load: float
    runs: int
    meets: bool
    near: bool
    estimates: dict[str, Estimate]

    def describe(self, gates: Sequence[Gate]) -> str:
        """``meets the SLO: p99_ttft_ms 41.2 [39.0, 44.8] <= 500`` (the evidence per condition)."""
        word = "meets the SLO" if self.meets else "misses the SLO"
        near = ", near the line" if self.near else ""
        evidence = "; ".join(
            f"{gate.key} {self.estimates[gate.key]} "
            f"{'meets' if holds(gate, self.estimates[gate.key].value) else 'misses'} "
            f"{gate.op}{gate.threshold:g}"
            for gate in gates
        )
        return f"{word}{near} ({self.runs} run(s)): {evidence}"


def judge(load: float, runs: Sequence[Mapping[str, Estimate]], gates: Sequence[Gate]) -> Verdict:
    """A load's verdict on its runs (each a run's estimate per condition key; a failed run is
    an empty mapping and fails the SLO, whatever the other runs measured)."""
    if not runs or any(not run for run in runs):
        estimates = {gate.key: Estimate(math.nan) for gate in gates}
        return Verdict(load, len(runs), False, False, estimates)
    estimates = {gate.key: pooled([run[gate.key] for run in runs]) for gate in gates}
    meets = all(holds(gate, estimates[gate.key].value) for gate in gates)
    near = any(estimates[gate.key].holds(gate.threshold) for gate in gates)
    return Verdict(load, len(runs), meets, near, estimates)


@dataclass(frozen=True)
class Outcome:
    """Where the search ended: the highest load that met the SLO (None: none did), the bracket
    (``high`` None: no load failed), and why it stopped."""

    best: float | None
    low: float | None
    high: float | None
    reason: str


def bracket(verdicts: Mapping[float, Verdict]) -> tuple[float | None, float | None]:
    """The highest load that met the SLO below the lowest that failed, and that lowest."""
    failed = [load for load, v in verdicts.items() if not v.meets]
    high = min(failed) if failed else None
    held = [load for load, v in verdicts.items() if v.meets and (high is None or load < high)]
    return (max(held) if held else None), high


def next_load(
    verdicts: Mapping[float, Verdict], last: float | None, bounds: Bounds
) -> float | None:
    """The load to probe next (the module's policy), or None when the search is over."""
    if last is None or not verdicts:
        return bounds.load(min(bounds.start, bounds.maximum))
    latest = verdicts[last]
    if latest.near and latest.runs <= bounds.repeats:
        return last
    low, high = bracket(verdicts)
    if high is None:  # every load held: double
        top = max(verdicts)
        if top >= bounds.maximum:
            return None
        return bounds.load(min(top * 2, bounds.maximum))
    if low is None:  # every load failed: halve
        lower = bounds.load(min(verdicts) / 2)
        return None if lower < bounds.floor or lower in verdicts else lower
    if high - low <= bounds.tolerance * low:
        return None
    middle = bounds.load((low + high) / 2)
    return None if middle <= low or middle >= high else middle


def outcome(verdicts: Mapping[float, Verdict], bounds: Bounds) -> Outcome:
    """The search's answer from its verdicts."""
    if not verdicts:
        return Outcome(None, None, None, "no probe finished")
    low, high = bracket(verdicts)
    if high is None:
        top = max(verdicts)
        return Outcome(top, top, None, f"every probe met the SLO, up to --search-max {top:g}")
    if low is None:
        return Outcome(None, None, high, f"no load met the SLO, down to {min(verdicts):g}")
    width = (high - low) / low
    return Outcome(low, low, high, f"bracket [{low:g}, {high:g}]: {width:.1%} of its low end")
