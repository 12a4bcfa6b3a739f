"""Campaigns compared point by point (``loadgen compare CAMPAIGN_A CAMPAIGN_B``), and a campaign's
table rebuilt from its records (``loadgen report CAMPAIGN``).

A campaign's folder holds summary.csv (its points, their runs and errors), a folder per point
with each run's records file, and campaign.json with --slo (loadgen/session/campaign_run.py).
Its points are read as report.html reads them (loadgen/report/html_campaign.py): each run's
report rebuilt from its records. Two campaigns' points are matched by their load: the pair
(--max-concurrency, --request-rate), whichever of them the campaigns swept (``match_points``);
a point that only one campaign has is named, not compared. A matched pair is compared as two
runs are (loadgen/report/compare.py): each point's runs pooled, the differences of its latency
statistics with their bootstrap interval over the pooled requests and the mark, and beside
them the SLO's verdict on each point where a campaign had one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.records.read import read_records
from loadgen.report.campaign_summary import PointRuns, summary_rows, summary_table
from loadgen.report.compare import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    Row,
    Samples,
    compare,
    metrics_json,
    pooled_samples,
    row_lines,
    setting_differences,
)
from loadgen.report.html_campaign import CampaignPoint, campaign_points, point_runs, read_reports
from loadgen.report.html_figures import point_label
from loadgen.report.run_summary import RunSummary
from loadgen.report.slo import SloMarks, best_line, mark_points, slo_gates, with_slo

PointKey = tuple[int | None, float]  # (--max-concurrency, --request-rate) of a point
# The figures a campaign's comparison shows per point (compare's rows by name); the JSON has
# every row.
SHOWN = (
    "request throughput (req/s)",
    "output throughput (tok/s)",
    "median ttft (ms)",
    "p99 ttft (ms)",
    "median itl (ms)",
    "p99 itl (ms)",
    "median e2el (ms)",
    "p99 e2el (ms)",
    "completed",
    "failed",
    "cancelled",
    "not sent",
)


def is_campaign(path: Path) -> bool:
    """Whether ``path`` is a campaign's folder (it holds summary.csv)."""
    return path.is_dir() and (path / "summary.csv").is_file()


@dataclass(frozen=True)
class Matching:
    """Two campaigns' points paired by load: the pairs (base index, other index) in the base's
    order, and the points of each that have no partner."""

    pairs: list[tuple[int, int]]
    only_base: list[int]
    only_other: list[int]


def match_points(base: Sequence[PointKey], other: Sequence[PointKey]) -> Matching:
    """Pair the points of equal load (``nan``-free keys: a rate is a number or inf)."""
    where = {key: j for j, key in enumerate(other)}
    pairs = [(i, where[key]) for i, key in enumerate(base) if key in where]
    paired = {j for _, j in pairs}
    return Matching(
        pairs,
        [i for i, key in enumerate(base) if key not in where],
        [j for j in range(len(other)) if j not in paired],
    )


def swept(keys: Sequence[PointKey]) -> tuple[bool, bool]:
    """Whether the concurrency, and the rate, vary over ``keys``."""
    return len({cap for cap, _ in keys}) > 1, len({rate for _, rate in keys}) > 1


def axis_words(keys: Sequence[PointKey]) -> str:
    """What the points are matched by, in words: the swept flag(s)."""
    caps, rates = swept(keys)
    if caps and rates:
        return "concurrency and rate"
    return "rate" if rates else "concurrency"


def key_label(key: PointKey, keys: Sequence[PointKey]) -> str:
    """How the comparison names a point: ``c=4``, ``r=20/s`` (report.html's labels)."""
    caps, rates = swept(keys)
    return point_label(key[0], key[1], caps_vary=caps, rates_vary=rates)


@dataclass
class Campaign:
    """A campaign read from its folder: its points, each one's runs' summaries, the SLO and
    its marks."""

    name: str
    folder: Path
    points: list[CampaignPoint]
    slo: tuple[str, ...] = ()
    steady: bool = False
    runs: list[PointRuns] = field(default_factory=list)  # each point's metrics, as it counted
    marks: SloMarks | None = None

    @property
    def keys(self) -> list[PointKey]:
        """Each point's load."""
        return [(run.max_concurrency, run.request_rate) for run in self.runs]

    def summaries(self, index: int) -> list[RunSummary]:
        """The summaries of a point's runs that left records."""
        return [report.summary for report in self.points[index].reports]


def read_campaign(folder: Path, name: str) -> Campaign:
    """A campaign's points and their runs' reports, rebuilt from its records files (a
    RecordsFileError when it has no summary.csv or a records file is damaged)."""
    points = campaign_points(folder)
    read_reports(points)
    summaries = [r.summary for point in points for r in point.reports]
    if not summaries:
        return Campaign(name, folder, points, runs=point_runs(points, False))
    settings = summaries[0].settings
    runs = point_runs(points, settings.steady_state)
    slo = tuple(settings.slo)
    marks = mark_points(runs, slo_gates(slo)) if slo else None
    return Campaign(name, folder, points, slo, settings.steady_state, runs, marks)


@dataclass
class PointComparison:
    """One matched point: its label and folders, both sides' pooled figures and the rows."""

    label: str
    base_point: str
    other_point: str
    base: Samples
    other: Samples
    rows: list[Row]


@dataclass
class CampaignComparison:
    """``other`` against ``base``, point by point."""

    base: Campaign
    other: Campaign
    axis: str
    points: list[PointComparison]
    only_base: list[str]  # labels of the points with no partner
    only_other: list[str]
    settings: list[str]  # traffic settings the matched points' first runs differ in


def compare_campaigns(
    base: Campaign, other: Campaign, resamples: int = DEFAULT_RESAMPLES
) -> CampaignComparison:
    """Match the two campaigns' points and compare each pair."""
    keys = [*base.keys, *other.keys]
    matching = match_points(base.keys, other.keys)
    compared = []
    differ: dict[str, None] = {}
    for i, j in matching.pairs:
        a = pooled_samples(base.name, base.summaries(i), base.steady)
        b = pooled_samples(other.name, other.summaries(j), other.steady)
        label = key_label(base.keys[i], keys)
        compared.append(PointComparison(label, base.points[i].name, other.points[j].name, a, b,
                                        compare(a, b, resamples)))  # fmt: skip
        first_a, first_b = base.points[i].records[:1], other.points[j].records[:1]
        if first_a and first_b:  # the same point's run 0: the same derived seed, the same load
            runs = [read_records(str(first_a[0])), read_records(str(first_b[0]))]
            differ |= dict.fromkeys(setting_differences(runs[:1], runs[1:]))
    return CampaignComparison(
        base,
        other,
        axis_words(keys),
        compared,
        [key_label(base.keys[i], keys) for i in matching.only_base],
        [key_label(other.keys[j], keys) for j in matching.only_other],
        list(differ),
    )


def slo_cell(campaign: Campaign, point: str) -> str:
    """The SLO's verdict on a point: ``met (2/2 runs)``, ``missed (1/2 runs)``; "" without one."""
    if campaign.marks is None:
        return ""
    index = next(k for k, p in enumerate(campaign.points) if p.name == point)
    runs = campaign.runs[index]
    total = len(runs.metrics) + len(runs.errors)
    word = "met" if campaign.marks.meets[index] else "missed"
    return f"{word} ({campaign.marks.met_runs[index]}/{total} runs)"


def comparison_lines(comparison: CampaignComparison) -> list[str]:
    """The console's account: what was matched, then a block per matched point (the main
    figures, the counts, the SLO's verdicts)."""
    base, other = comparison.base, comparison.other
    lines = [
        f"{other.name} against {base.name}: {len(comparison.points)} point(s) matched by "
        f"{comparison.axis} (difference = {other.name} − {base.name}, "
        f"{100 * CONFIDENCE:.0f} % bootstrap interval over each point's pooled requests; "
        "* where it leaves out 0)"
    ]
    if comparison.only_base:
        lines.append(f"  only in {base.name} (not compared): {', '.join(comparison.only_base)}")
    if comparison.only_other:
        lines.append(f"  only in {other.name} (not compared): {', '.join(comparison.only_other)}")
    for point in comparison.points:
        lines.append(f"{point.label} ({point.other.runs} and {point.base.runs} run(s))")
        by_name = {row.metric: row for row in point.rows}
        lines += row_lines([by_name[metric] for metric in SHOWN if metric in by_name])
        if base.slo or other.slo:
            lines.append(
                f"  SLO: {base.name} {_slo_words(base, point.base_point)}; "
                f"{other.name} {_slo_words(other, point.other_point)}"
            )
    return lines


def _slo_words(campaign: Campaign, point: str) -> str:
    if not campaign.slo:
        return "had none"
    return f"{slo_cell(campaign, point)} of {', '.join(campaign.slo)}"


def comparison_json(comparison: CampaignComparison) -> dict[str, Any]:
    """The comparison as JSON: the matching, then per matched point every row's figures."""
    base, other = comparison.base, comparison.other
    return {
        "base": base.name,
        "other": other.name,
        "matched_by": comparison.axis,
        "confidence": CONFIDENCE,
        "only_base": comparison.only_base,
        "only_other": comparison.only_other,
        "setting_differences": comparison.settings,
        "slo": {"base": list(base.slo), "other": list(other.slo)},
        "points": [
            {
                "point": point.label,
                "base_point": point.base_point,
                "other_point": point.other_point,
                "base_runs": point.base.runs,
                "other_runs": point.other.runs,
                "slo": {
                    "base": slo_cell(base, point.base_point) or None,
                    "other": slo_cell(other, point.other_point) or None,
                },
                "metrics": metrics_json(point.rows),
            }
            for point in comparison.points
        ],
    }


def campaign_table(campaign: Campaign) -> list[str]:
    """The campaign's console table, as the campaign printed it at its end (summary.csv's rows
    computed again from the records, ``summary_table``), and the SLO's line naming the best
    point (a search's account is its JSON's: the CLI adds it)."""
    first = next((s for k in range(len(campaign.points)) for s in campaign.summaries(k)), None)
    search = first is not None and first.settings.search is not None
    num_runs = 1 if search else int(campaign.points[0].row["runs"])
    percentiles = first.settings.percentiles if first is not None else ()
    rows = summary_rows(campaign.runs, num_runs, percentiles)
    if search:  # a search's loads have their own counts, as its campaign wrote them
        for row, point in zip(rows, campaign.points, strict=True):
            row["runs"] = int(point.row["runs"])
    if campaign.marks is not None:
        rows = with_slo(rows, campaign.marks)
    keys = [gate.key for gate in slo_gates(campaign.slo)]
    pooling = first.settings.pooling if first is not None else False
    lines = summary_table(rows, num_runs, keys, pooling=pooling)
    if campaign.marks is not None and not search:
        lines.append(best_line(campaign.slo, campaign.runs, campaign.marks))
    return lines
