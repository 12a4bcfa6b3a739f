"""A campaign's runs (loadgen/session/campaign.py says what a campaign is): ready once, then each
point's runs on the same workers, a line per run, summary.csv and its table at the end.

The phases are runner.py's and the lifecycle a ``RunSession``'s (loadgen/session/lifecycle.py);
this is the loop level around the timed run and the report.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping

from loadgen.config import ConfigError, RunConfig
from loadgen.config.gates import parse_gate
from loadgen.console import TABLE
from loadgen.fleet.fanout import FanoutError, UnreachableServer, WorkerPool
from loadgen.fleet.placement import planned_workers, worker_pool
from loadgen.records.model import RunRecords
from loadgen.report.campaign_summary import (
    run_problem,
    run_replicates,
    summary_metrics,
    summary_rows,
    summary_table,
    write_summary_csv,
)
from loadgen.report.gates import report_breaches
from loadgen.report.html_campaign import campaign_report_line
from loadgen.report.intervals import MIN_RUNS
from loadgen.report.result_json import write_result
from loadgen.report.run_report import Report
from loadgen.report.slo import (
    CAMPAIGN_JSON,
    best_line,
    mark_points,
    slo_gates,
    slo_json,
    slo_problem,
    with_slo,
    write_campaign_json,
)
from loadgen.schedule_blocks import ScheduleBlocks
from loadgen.server.client import ServerClient
from loadgen.server.metrics import metrics_page
from loadgen.server.prefix_cache import reset_prefix_cache
from loadgen.server.profile import profile
from loadgen.session.campaign import (
    GridPlan,
    Point,
    campaign_problem,
    failed_line,
    folder_name,
    grid,
    point_config,
    pool_size,
    preparation_config,
    run_config,
    run_line,
    seeded,
    shared_prompts_warning,
    shared_share,
    widest,
    with_schedule,
)
from loadgen.session.flag_checks import check_before_start
from loadgen.session.lifecycle import RunFailed, RunSession
from loadgen.session.live_prometheus import LiveEndpoint
from loadgen.session.preflight import preflight
from loadgen.session.prepare import Prepared, redraw
from loadgen.session.records import records_writer, run_start
from loadgen.session.runner import finish, get_ready, now
from loadgen.session.search_plan import SearchPlan
from loadgen.session.time_bound import (
    block_size,
    bounded_by_duration,
    cut_to,
    duration_line,
    first_block_config,
    planned_requests,
    request_cap,
    tops_up,
)
from loadgen.session.timed_run import active_workers, open_live_endpoint, timed_run
from loadgen.session.topup import DurationBlocks, first_block, with_schedule_hash

log = logging.getLogger(__name__)


def run_campaign(config: RunConfig) -> int:
    """Run every point of the grid --num-runs times in one process start; the exit code (1
    when a run failed, 3 when one breached a --fail-on gate)."""
    if problem := campaign_problem(config):
        raise ConfigError(problem)
    if problem := slo_problem(config.slo, config.percentiles()):
        raise ConfigError(problem)
    plan: GridPlan | SearchPlan
    if config.search is not None:
        plan = SearchPlan(config)
        loads = {plan.bounds.load(config.search_start), plan.bounds.load(plan.bounds.maximum)}
        points = [plan.point(load) for load in sorted(loads)]  # the range, for the checks
    else:
        points = grid(config)
        plan = GridPlan(points, config.num_runs)
    for point in points:
        point_config(config, point).validate()
    check_before_start(point_config(config, points[0]))  # the warnings, once
    preflight(dataclasses.replace(widest(config, points), save_result=True))
    with RunSession(config) as session:
        return session.run(lambda session: _campaign(session, points, plan))


async def _campaign(session: RunSession, points: list[Point], plan: GridPlan | SearchPlan) -> int:
    """Get ready once, then each run the plan asks for on the same workers (a new pool only
    after one was lost); summary.csv and the table at the end, also when the campaign stops
    early. ``points``: the grid, or a search's lowest and highest loads (the pool's size)."""
    config, client = session.config, session.client
    session.start_workers(worker_pool(config, pool_size(config, points), reusable=True))
    total, step, folder = plan.total, 0, ""
    breached: list[str] = []
    ended = False  # every run done: the workers may exit
    broken: list[WorkerPool] = []
    reset: str | None = None  # the server's prefix-cache reset, once found
    sent: set[bytes] = set()  # every body sent so far, by digest
    warned = False  # of prompts shared between runs
    endpoint = None  # --prometheus-port: one for every run
    try:
        endpoint = open_live_endpoint(config)
        first = campaign_preparation(config, points)
        block = campaign_block(config, points)  # --duration's blocks: each run's first drawn
        prepared = await get_ready(first, client, session.pool)
        session.ready()
        folder = folder_name(config, prepared.model_id, now())
        for point, runs, run_numbers in plan.points():
            # --duration: a point at a lower rate sends fewer of the prepared requests
            count = planned_requests(point_config(config, point))
            for run_number in run_numbers:
                step += 1
                one = seeded(run_config(config, point, folder, run_number), point, run_number)
                one = bounded_by_duration(one, False, blocks=block is not None)
                if block is not None:
                    one = dataclasses.replace(one, duration_block=block)
                    count = first_block_config(one, block).num_prompts
                if one.seed == first.seed:  # the prompts drawn: the point's schedule only
                    drawn = with_schedule(
                        dataclasses.replace(config, seed=one.seed), cut_to(prepared, count), point
                    )
                elif block is not None:
                    drawn = await redraw(first_block_config(one, block), client, prepared)
                else:
                    drawn = await redraw(one, client, prepared)
                schedule = None
                if block is not None:  # block 0 on the run's one schedule
                    drawn, schedule = await first_block(one, drawn)
                if config.reset_prefix_cache:
                    reset = await reset_prefix_cache(client, reset)
                if session.pool in broken or not session.pool.alive():  # a new pool, next runs
                    placed = session.pools[0].placed
                    session.replace_workers(worker_pool(config, placed, reusable=True))
                pool = session.pool
                pool.next_run(planned_workers(one))
                shared = shared_share(drawn.bodies, sent)
                try:
                    label = f"{point.name} run={run_number}"
                    report, _ = await _campaign_run(
                        one, client, pool, (drawn, schedule), endpoint, label
                    )
                except UnreachableServer:
                    raise  # no later run would reach it either
                except (RunFailed, FanoutError) as exc:  # failed fast, or the workers failed
                    if isinstance(exc, FanoutError) and exc.exit_code != 1:  # a stop signal
                        stopped = RunFailed("interrupted: the campaign stopped", exc.exit_code)
                        raise stopped from None
                    if isinstance(exc, FanoutError):
                        broken.append(pool)  # its workers may be mid-run: none is reused
                    runs.errors.append(f"run={run_number}: {exc}")
                    log.warning(failed_line(step, total, point, run_number, str(exc)))
                    _log_lines(plan.observe(point, None, None))
                    continue
                if pool.stop_requested:
                    raise RunFailed("interrupted: the campaign stopped", pool.exit_code)
                runs.error_kinds.append(report.summary.errors.by_kind)
                problem = run_problem(report.summary)
                if problem is not None:
                    runs.errors.append(f"run={run_number}: {problem}")
                    log.warning(failed_line(step, total, point, run_number, problem))
                    _log_lines(plan.observe(point, None, None))
                    continue
                metrics, trimmed = summary_metrics(report.summary, config.steady_state)
                runs.metrics.append(metrics)
                runs.trimmed.append(trimmed)
                if isinstance(plan, GridPlan) and config.num_runs >= MIN_RUNS:  # an interval
                    runs.replicates.append(run_replicates(report.summary, config.steady_state))
                breached += [f"{point.name} run={run_number}: {line}" for line in report.breaches]
                trim = trimmed if config.steady_state else None
                log.info(run_line(step, total, point, run_number, metrics, trim))
                warning = shared_prompts_warning(
                    config, f"{point.name} run={run_number}", shared, report.summary.prefix_cache
                )
                if warning and not warned:  # once: the table shows every run's hit rate
                    log.warning(warning)
                    warned = True
                _log_lines(plan.observe(point, report.summary, metrics))
        if config.profile:
            await profile(client, "stop")
        ended = True
    finally:
        if endpoint is not None:
            endpoint.close()
        await session.end_workers(graceful=ended, dismiss=ended)
        if folder and step:
            if isinstance(plan, GridPlan):
                for runs in plan.results:  # the campaign stopped early: say so in its rows
                    missing = config.num_runs - len(runs.metrics) - len(runs.errors)
                    if missing:
                        runs.errors.append(f"{missing} run(s) not finished: the campaign stopped")
            _write_summary(config, folder, plan)
    if isinstance(plan, SearchPlan):  # a failed probe is a verdict: the search goes on
        return report_breaches(breached)
    failed = sum(len(runs.errors) for runs in plan.results)
    if failed:
        raise RunFailed(f"{failed} of {total} runs failed; summary.csv says why")
    return report_breaches(breached)


def campaign_preparation(config: RunConfig, points: list[Point]) -> RunConfig:
    """The flags preparation runs with; with --duration, as many requests as the point that
    sends the most (each point then sends its own count: ``planned_requests``)."""
    prepared = preparation_config(config, points)
    if config.duration is None:
        return prepared
    block = campaign_block(config, points)
    first = bounded_by_duration(point_config(config, points[0]), False, block is not None)
    if block is not None:
        first = dataclasses.replace(first, duration_block=block)
    log.info(duration_line(first))
    most = max(planned_requests(point_config(config, point)) for point in points)
    if block is not None:  # each run's block 0, the first point's run 0 drawn here
        caps = [request_cap(point_config(config, point)) for point in points]
        most = block if None in caps else min(block, max(c for c in caps if c is not None))
    return dataclasses.replace(prepared, num_prompts=most)


def campaign_block(config: RunConfig, points: list[Point]) -> int | None:
    """The block size of every run of a --duration campaign (its points' largest), or None
    where runs are not topped up (no --duration, a self-timed trace)."""
    if not tops_up(config):
        return None
    return max(block_size(point_config(config, point)) for point in points)


def _log_lines(lines: list[str], extra: Mapping[str, object] | None = None) -> None:
    for line in lines:
        log.info(line, extra=extra)


def _write_summary(config: RunConfig, folder: str, plan: GridPlan | SearchPlan) -> None:
    """summary.csv in the campaign's folder, its table on the console, the SLO's marks and the
    search's account (and campaign.json with them), and report.html."""
    results = plan.results
    search = isinstance(plan, SearchPlan)
    num_runs = 1 if search else config.num_runs  # a search's repeats vary: each load's mean
    rows = summary_rows(results, num_runs, config.percentiles())
    if search:
        for row, runs in zip(rows, results, strict=True):
            row["runs"] = len(runs.metrics) + len(runs.errors)
    marks = None
    if config.slo:
        marks = mark_points(results, slo_gates(config.slo))
        rows = with_slo(rows, marks)
    os.makedirs(folder, exist_ok=True)
    write_summary_csv(os.path.join(folder, "summary.csv"), rows)
    keys = [parse_gate(text).key for text in config.slo]
    # The table and the SLO's verdict: what -q shows (TABLE).
    _log_lines(summary_table(rows, num_runs, keys, pooling=config.pooling), TABLE)
    if marks is not None:
        document: dict[str, object] = {"slo": slo_json(config.slo, results, marks)}
        if isinstance(plan, SearchPlan):
            _log_lines(plan.lines(), TABLE)
            document["search"] = plan.search_json()
        else:
            log.info(best_line(config.slo, results, marks), extra=TABLE)
        write_campaign_json(os.path.join(folder, CAMPAIGN_JSON), document)
    log.info(f"Campaign written to {folder} (summary.csv, and a folder per point)")
    log.info(campaign_report_line(folder))


async def _campaign_run(
    config: RunConfig,
    client: ServerClient,
    pool: WorkerPool,
    drawn: tuple[Prepared, ScheduleBlocks | None],
    endpoint: LiveEndpoint | None,
    point: str,
) -> tuple[Report, RunRecords]:
    """One run of a campaign: its timed run, its report, its result JSON and records file;
    --prometheus-port's figures to the campaign's ``endpoint``, labelled with its ``point``.
    ``drawn``: its requests, and with --duration's blocks the schedule they continue."""
    prepared, schedule = drawn
    counters_before = await metrics_page(client)
    start = run_start(config, prepared, active_workers(pool, prepared), counters_before)
    start = with_schedule_hash(start, schedule)
    writer = records_writer(config, prepared, start, now())
    blocks = None
    if schedule is not None:
        workers = active_workers(pool, prepared)
        blocks = DurationBlocks(config, client, prepared, schedule, workers, writer)
    try:
        answered = counters_before is not None
        timed = await timed_run(
            config, client, pool, prepared, writer, answered, endpoint, point, blocks
        )
    except BaseException:
        if writer is not None:
            writer.close()
        raise
    counters_after = None if pool.stop_requested else await metrics_page(client)
    report, records, _ = await finish(
        config, prepared, start, timed, writer, counters_after, blocks
    )
    assert report.result is not None  # a campaign's runs always write their result
    write_result(report.path, report.result)
    return report, records
