"""The runs of a ``--search``: the campaign loop (campaign_run.py) makes each run this plan yields
and tells it what the run measured; the policy (search.py) picks the next load from the verdicts.

Each load is a point of the campaign (``max_concurrency=8-request_rate=inf``), its repeats the
point's runs (``run=1``, ``run=2``), so the folder, summary.csv and report.html read as a grid's.
The search's own account (every probe, its verdict and evidence, the bracket) is logged as it
goes and written to the campaign's JSON (``search_json``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.config import RunConfig
from loadgen.config.gates import format_number
from loadgen.report.campaign_summary import PointRuns
from loadgen.report.run_summary import RunSummary
from loadgen.report.slo import Estimate, run_estimates, slo_gates
from loadgen.session.campaign import Point
from loadgen.session.search import Bounds, Outcome, Verdict, judge, next_load, outcome


@dataclass(frozen=True)
class Probe:
    """One run of the search: its number, its load and point, and the load's verdict after it
    (on every run of the load so far)."""

    number: int
    load: float
    point: str
    run: int
    estimates: dict[str, Estimate]  # this run's; empty: the run failed
    verdict: Verdict


class SearchPlan:
    """A search's runs, chosen one at a time from the verdicts so far."""

    def __init__(self, config: RunConfig) -> None:
        assert config.search is not None
        self.config = config
        maximum = config.search_max
        if config.search == "concurrency" and config.num_prompts > 0:
            maximum = min(maximum, config.num_prompts)  # more streams than requests: the same
        self.bounds = Bounds(
            config.search,
            config.search_start,
            maximum,
            config.search_tolerance,
            config.search_repeats,
        )
        self.gates = slo_gates(config.slo)
        self.keys = [gate.key for gate in self.gates]
        self.total = 0  # not known ahead
        self.by_load: dict[float, PointRuns] = {}
        self.runs_of: dict[float, list[dict[str, Estimate]]] = {}
        self.verdicts: dict[float, Verdict] = {}
        self.probes: list[Probe] = []

    def point(self, load: float) -> Point:
        """The campaign's point at a load: the searched flag set to it, the other as given."""
        config = self.config
        if self.bounds.kind == "rate":
            return Point(config.concurrency, load)
        return Point(int(load), config.rate)

    def load_of(self, point: Point) -> float:
        """The load a point of the search stands for."""
        if self.bounds.kind == "rate":
            return float(point.request_rate)
        assert point.max_concurrency is not None  # a concurrency search's points have one
        return float(point.max_concurrency)

    @property
    def results(self) -> list[PointRuns]:
        """Each load's runs, lowest load first: summary.csv's rows."""
        return [self.by_load[load] for load in sorted(self.by_load)]

    def points(self) -> Iterator[tuple[Point, PointRuns, Iterable[int]]]:
        """Each probe: its point, the point's record of runs and the number of its one run,
        chosen after the run before was observed."""
        last = None
        while (load := next_load(self.verdicts, last, self.bounds)) is not None:
            point = self.point(load)
            runs = self.by_load.setdefault(
                load, PointRuns(point.name, point.max_concurrency, point.request_rate)
            )
            yield point, runs, [len(self.runs_of.get(load, []))]
            last = load

    def observe(self, point: Point, summary: RunSummary | None, metrics: dict | None) -> list[str]:
        """Weigh a run (``summary`` None: it failed, which misses the SLO); the line to log."""
        load = self.load_of(point)
        estimates = {}
        if summary is not None and metrics is not None:
            estimates = run_estimates(summary, metrics, self.keys, self.config.steady_state)
        runs = self.runs_of.setdefault(load, [])
        runs.append(estimates)
        verdict = judge(load, runs, self.gates)
        self.verdicts[load] = verdict
        self.probes.append(Probe(len(self.probes) + 1, load, point.name, len(runs) - 1,
                                 estimates, verdict))  # fmt: skip
        return [f"  search: {self.kind_word} {format_number(load)}: {verdict.describe(self.gates)}"]

    @property
    def kind_word(self) -> str:
        """``rate`` or ``concurrency``, as the lines name the load."""
        return self.bounds.kind

    def outcome(self) -> Outcome:
        """Where the search ended."""
        return outcome(self.verdicts, self.bounds)

    def lines(self) -> list[str]:
        """The search's account at the end (``account_lines`` of its JSON)."""
        return account_lines(self.search_json(), self.config.slo)

    def search_json(self) -> dict[str, object]:
        """The search's part of the campaign's JSON."""
        end = self.outcome()
        bounds = self.bounds
        return {
            "kind": bounds.kind,
            "start": bounds.start,
            "max": bounds.maximum,
            "tolerance": bounds.tolerance,
            "repeats": bounds.repeats,
            "best": end.best,
            "bracket": [end.low, end.high],
            "stopped": end.reason,
            "probes": [
                {
                    "probe": p.number,
                    "load": p.load,
                    "point": p.point,
                    "run": p.run,
                    "failed": not p.estimates,
                    "estimates": {key: e.as_json() for key, e in p.estimates.items()},
                    "load_meets": p.verdict.meets,
                    "load_near_line": p.verdict.near,
                    "load_runs": p.verdict.runs,
                    "load_estimates": {key: e.as_json() for key, e in p.verdict.estimates.items()},
                }
                for p in self.probes
            ],
        }


def account_lines(search: Mapping[str, Any], slo: Sequence[str]) -> list[str]:
    """A search's account from its part of the campaign's JSON (``SearchPlan.search_json``):
    each probe in order with its load's verdict, then the answer and why it stopped. The live
    search prints it at its end, ``loadgen report CAMPAIGN`` again from campaign.json."""
    kind = search["kind"]
    unit = " req/s" if kind == "rate" else ""
    gates = slo_gates(slo)
    lines = [f"Search for the highest {kind} within the SLO ({', '.join(slo)}):"]
    for probe in search["probes"]:
        estimates = {key: _estimate(e) for key, e in probe["load_estimates"].items()}
        verdict = Verdict(probe["load"], probe["load_runs"], probe["load_meets"],
                          probe["load_near_line"], estimates)  # fmt: skip
        lines.append(f"  probe {probe['probe']}: {kind} {format_number(probe['load'])}{unit} "
                     f"run={probe['run']}: {verdict.describe(gates)}")  # fmt: skip
    best, reason = search["best"], search["stopped"]
    if best is None:
        lines.append(f"No {kind} met the SLO ({reason})")
    else:
        lines.append(f"Highest {kind} within the SLO: {format_number(best)}{unit} ({reason})")
    return lines


def _estimate(value: Mapping[str, float | None]) -> Estimate:
    """An estimate from its JSON (``Estimate.as_json``: null where there is none)."""
    low, high = value.get("low"), value.get("high")
    value_, low_, high_ = (
        math.nan if v is None else float(v) for v in (value.get("value"), low, high)
    )
    return Estimate(value_, low_, high_)
