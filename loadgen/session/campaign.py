"""A campaign: a grid of --max-concurrency and --request-rate values, --num-runs runs of each,
in one process start. The workers, the tokenizer and the dataset are made once; each point
gets its own schedule (the rate's) and each run its own result JSON and records file in the
campaign's folder, beside summary.csv (loadgen/report/campaign_summary.py).

    campaign-{label}-{rates}qps-concurrency{caps}-{model}-{date}/
        max_concurrency=4-request_rate=inf/
            max_concurrency=4-request_rate=inf-run=0.json
            max_concurrency=4-request_rate=inf-run=0.records.arrow
            ...
        summary.csv

One folder per point, as vLLM's sweep lays them out, so that ``loadgen compare A B`` pools a
point's runs as repeats.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from loadgen.config import RunConfig
from loadgen.config.sections import Traffic
from loadgen.fleet.placement import planned_workers
from loadgen.report.campaign_summary import PointRuns
from loadgen.report.prefix_cache import PrefixCacheHits
from loadgen.report.run_summary import RunSummary
from loadgen.schedule import arrival_offsets_s, to_ns
from loadgen.session.prepare import Prepared


@dataclass(frozen=True)
class Point:
    """One pair of the grid."""

    max_concurrency: int | None
    request_rate: float

    @property
    def name(self) -> str:
        """``max_concurrency=4-request_rate=inf``: the point's folder and file names."""
        cap = "none" if self.max_concurrency is None else str(self.max_concurrency)
        return f"max_concurrency={cap}-request_rate={float(self.request_rate)}"


def _as_list(value: object) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def is_campaign(config: Traffic) -> bool:
    """A list in --max-concurrency or --request-rate, --num-runs above 1, --steady-state, --slo
    or --search."""
    return (
        isinstance(config.max_concurrency, tuple)
        or isinstance(config.request_rate, tuple)
        or config.num_runs > 1
        or config.steady_state
        or bool(config.slo)
        or config.search is not None
    )


def rate_varies(config: Traffic) -> bool:
    """Whether the campaign's points have rates of their own (a list, or a rate search)."""
    return isinstance(config.request_rate, tuple) or config.search == "rate"


# Flags a campaign cannot honour as a single run does, and what to do instead.
REFUSED = {
    "append_result": "--append-result appends one run's result to one file; a campaign writes "
    "each run's result JSON in its folder",
    "plot_timeline": "--plot-timeline is not drawn during a campaign; `loadgen report RECORDS "
    "--plot-timeline` draws one run's from its records file",
    "plot_dataset_stats": "--plot-dataset-stats is not drawn during a campaign; `loadgen report "
    "RECORDS --plot-dataset-stats` draws it from a run's records file",
}


def campaign_problem(config: RunConfig) -> str | None:
    """Why the flags cannot make a campaign, in one line; None when they can."""
    for field, why in REFUSED.items():
        if getattr(config, field):
            return why
    if config.search is not None:
        return search_problem(config)
    return None


def search_problem(config: RunConfig) -> str | None:
    """Why the flags cannot make a --search, in one line; None when they can."""
    searched = "--request-rate" if config.search == "rate" else "--max-concurrency"
    if not config.slo:
        return f"--search {config.search} finds the highest load that meets --slo: add --slo"
    if searched in config.given:
        return f"--search {config.search} chooses {searched} for each probe: drop {searched}"
    if isinstance(config.max_concurrency, tuple) or isinstance(config.request_rate, tuple):
        return (
            "--search probes one load at a time: give --max-concurrency and --request-rate "
            "one value each"
        )
    if config.num_runs > 1:
        return (
            "--search repeats a probe near the line by itself (--search-repeats): drop --num-runs"
        )
    if config.search == "rate" and (config.ramp_up_strategy or config.self_timed_trace):
        return "--search rate needs a schedule drawn at a rate: no ramp-up, no self-timed trace"
    if config.search_start > config.search_max:
        return f"--search-start {config.search_start:g} is above --search-max {config.search_max:g}"
    return None


def grid(config: Traffic) -> list[Point]:
    """Every pair, concurrency first, each list in the order given."""
    caps, rates = _as_list(config.max_concurrency), _as_list(config.request_rate)
    return [Point(cap, rate) for cap, rate in itertools.product(caps, rates)]


def point_config(config: RunConfig, point: Point) -> RunConfig:
    """The campaign's flags with the point's values, as one `loadgen run` would have them."""
    return dataclasses.replace(
        config, max_concurrency=point.max_concurrency, request_rate=point.request_rate
    )


def run_config(config: RunConfig, point: Point, folder: str, run_number: int) -> RunConfig:
    """One run's flags: the point's values; its result JSON (and records, unless
    --no-save-records) in the point's folder, named after the point and the run."""
    return dataclasses.replace(
        point_config(config, point),
        save_result=True,
        append_result=False,
        result_dir=os.path.join(folder, point.name),
        result_filename=f"{point.name}-run={run_number}.json",
    )


def run_seed(seed: int, point: Point, run_number: int) -> int:
    """The --seed a campaign's run draws its prompts and schedule with: ``seed`` itself with
    --same-prompts, else

        int(SHA-256("loadgen-prompts/{seed}/{point.name}/{run_number}")[:4], big-endian) mod 2^31

    Stable across versions and machines, different for every point and run, and the same for
    the same point in two campaigns with the same --seed (``loadgen compare`` pairs them); below
    2^31 so that any seeded generator takes it."""
    text = f"loadgen-prompts/{seed}/{point.name}/{run_number}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % (1 << 31)


def seeded(config: RunConfig, point: Point, run_number: int) -> RunConfig:
    """A run's flags with the --seed it draws with (``run_seed``; --seed with --same-prompts)."""
    if config.same_prompts:
        return config
    return dataclasses.replace(config, seed=run_seed(config.seed, point, run_number))


def pool_size(config: RunConfig, points: list[Point]) -> int:
    """Workers for the whole campaign: as many as its largest point would start."""
    return max(planned_workers(point_config(config, point)) for point in points)


def widest(config: RunConfig, points: list[Point]) -> RunConfig:
    """The point that needs the most open files (no cap, else the largest), for preflight."""
    point = max(points, key=lambda p: math.inf if p.max_concurrency is None else p.max_concurrency)
    return point_config(config, point)


def preparation_config(config: RunConfig, points: list[Point]) -> RunConfig:
    """The flags preparation runs with: the first run's (its point's, its seed), at rate inf
    when the rate varies, so that the schedule's random draws are left for each point
    (``with_schedule``)."""
    first = seeded(point_config(config, points[0]), points[0], 0)
    if rate_varies(config):
        return dataclasses.replace(first, request_rate=math.inf)
    return first


def with_schedule(config: RunConfig, prepared: Prepared, point: Point) -> Prepared:
    """The prepared requests with the point's schedule: drawn at its rate from the same
    generator a single run would use (a ramp-up's or a trace's schedule has no rate to vary)."""
    if not rate_varies(config):
        return prepared
    dataset = prepared.dataset
    offsets = arrival_offsets_s(
        prepared.num_requests,
        point.request_rate,
        config.burstiness,
        config.seed,
        copy.deepcopy(dataset.arrival_rng),
    )
    return dataclasses.replace(prepared, scheduled_ns=to_ns(offsets))


def folder_name(config: RunConfig, model_id: str, date: str) -> str:
    """The campaign's folder: upstream's result file name, with each list as given, a
    ``campaign-`` prefix and no ``.json`` (--result-filename's stem when given), under
    --result-dir."""
    if config.result_filename:
        name = "campaign-" + os.path.splitext(os.path.basename(config.result_filename))[0]
    elif config.search is not None:
        model = model_id.split("/")[-1]
        name = f"campaign-{config.label or config.backend}-search-{config.search}-{model}-{date}"
    else:
        rates = ",".join(str(float(rate)) for rate in _as_list(config.request_rate))
        caps = [c for c in _as_list(config.max_concurrency) if c is not None]
        concurrency = f"-concurrency{','.join(map(str, caps))}" if caps else ""
        model = model_id.split("/")[-1]
        name = f"campaign-{config.label or config.backend}-{rates}qps{concurrency}-{model}-{date}"
    return os.path.join(config.result_dir or "", name)


def run_line(
    step: int, total: int, point: Point, run_number: int, metrics: dict, trimmed: int | None
) -> str:
    """The console's line for a finished run."""
    trim = "" if trimmed is None else f", {trimmed} trimmed"
    hits = metrics.get("prefix_cache_hit_rate", math.nan)
    cache = f", prefix cache hits {hits:.0f} %" if math.isfinite(hits) else ""
    return (
        f"[{_step(step, total)}] {point.name} run={run_number}: "
        f"{metrics['completed']:.0f} completed, "
        f"{metrics['failed']:.0f} failed{trim}, {metrics['request_throughput']:.2f} req/s, "
        f"{metrics['output_throughput']:.1f} tok/s, TTFT p99 {metrics['p99_ttft_ms']:.2f} ms{cache}"
    )


def failed_line(step: int, total: int, point: Point, run_number: int, why: str) -> str:
    """The console's line for a run that failed."""
    return f"[{_step(step, total)}] {point.name} run={run_number}: failed: {why}"


def _step(step: int, total: int) -> str:
    """``3/8``; ``probe 3`` where the number of runs is not known ahead (a search)."""
    return f"{step}/{total}" if total else f"probe {step}"


def points_of(points: list[Point]) -> list[PointRuns]:
    """An empty record of runs for each point."""
    return [PointRuns(p.name, p.max_concurrency, p.request_rate) for p in points]


# A run that sent at least this share of its prompts in earlier runs shares them.
SHARED_SHARE = 0.5


# A body is known by its length and this many bytes at each end: a prompt's start and end, at a
# cost that does not grow with the prompts (100,000 bodies of 32 KB would take seconds whole).
BODY_ENDS = 1024


def shared_share(bodies: list[bytes], seen: set[bytes]) -> float:
    """The share of ``bodies`` sent before (in ``seen``, by a digest of their length and ends),
    then added to it."""
    digests = [
        hashlib.sha1(
            b"%d:%b:%b" % (len(body), body[:BODY_ENDS], body[-BODY_ENDS:]), usedforsecurity=False
        ).digest()
        for body in bodies
    ]
    shared = sum(digest in seen for digest in digests)
    seen.update(digests)
    return shared / len(digests) if digests else 0.0


def shared_prompts_warning(
    config: RunConfig, name: str, shared: float, hits: PrefixCacheHits | None
) -> str | None:
    """One line when a run sent prompts earlier runs sent and the server reported serving
    them from its prefix cache (its latencies are then a warm cache's); None otherwise, or
    when the cache was reset before it."""
    if shared < SHARED_SHARE or hits is None or hits.hit_tokens == 0 or config.reset_prefix_cache:
        return None
    why = (
        "--same-prompts sends every run the same prompts"
        if config.same_prompts
        else "the dataset has too few prompts to differ from run to run"
    )
    return (
        f"warning: {name} sent {shared:.0%} of its prompts in earlier runs and the server served "
        f"{hits.hit_rate:.0f} % of its prompt tokens from its prefix cache ({hits.source}): its "
        f"latencies are a warm cache's. {why}; --reset-prefix-cache empties the cache before "
        "each run"
    )


class GridPlan:
    """A grid's runs: each point --num-runs times, in the grid's order."""

    def __init__(self, points: list[Point], num_runs: int) -> None:
        self.grid = points
        self.num_runs = num_runs
        self.results = points_of(points)  # summary.csv's rows, in order
        self.total = len(points) * num_runs

    def points(self) -> Iterator[tuple[Point, PointRuns, Iterable[int]]]:
        """Each point in turn: the point, its record of runs, the numbers of its runs."""
        for point, runs in zip(self.grid, self.results, strict=True):
            yield point, runs, range(self.num_runs)

    def observe(self, point: Point, summary: RunSummary | None, metrics: dict | None) -> list[str]:
        """A grid plans ahead: what a run measured changes nothing (lines to log: none)."""
        return []
