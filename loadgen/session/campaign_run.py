"""A campaign's runs (loadgen/session/campaign.py says what a campaign is): ready once, then each
point's runs on the same workers, a line per run, summary.csv and its table at the end.

The phases are runner.py's and the lifecycle a ``RunSession``'s (loadgen/session/lifecycle.py);
this is the loop level around the timed run and the report.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from loadgen.config import ConfigError, RunConfig
from loadgen.fleet.fanout import FanoutError, UnreachableServer, WorkerPool
from loadgen.fleet.placement import planned_workers, worker_pool
from loadgen.records.model import RunRecords
from loadgen.report.campaign_summary import (
    PointRuns,
    run_problem,
    summary_metrics,
    summary_rows,
    summary_table,
    write_summary_csv,
)
from loadgen.report.gates import report_breaches
from loadgen.report.html_campaign import campaign_report_line
from loadgen.report.result_json import write_result
from loadgen.report.run_report import Report
from loadgen.server.client import ServerClient
from loadgen.server.metrics import metrics_page
from loadgen.server.profile import profile
from loadgen.session.campaign import (
    Point,
    campaign_problem,
    failed_line,
    folder_name,
    grid,
    point_config,
    points_of,
    pool_size,
    preparation_config,
    run_config,
    run_line,
    widest,
    with_schedule,
)
from loadgen.session.lifecycle import RunFailed, RunSession
from loadgen.session.preflight import preflight
from loadgen.session.prepare import Prepared, check_before_start
from loadgen.session.records import records_writer, run_start
from loadgen.session.runner import finish, get_ready, now
from loadgen.session.timed_run import active_workers, timed_run

log = logging.getLogger(__name__)


def run_campaign(config: RunConfig) -> int:
    """Run every point of the grid --num-runs times in one process start; the exit code (1
    when a run failed, 3 when one breached a --fail-on gate)."""
    if problem := campaign_problem(config):
        raise ConfigError(problem)
    points = grid(config)
    for point in points:
        point_config(config, point).validate()
    check_before_start(point_config(config, points[0]))  # the warnings, once
    preflight(dataclasses.replace(widest(config, points), save_result=True))
    with RunSession(config) as session:
        return session.run(lambda session: _campaign(session, points))


async def _campaign(session: RunSession, points: list[Point]) -> int:
    """Get ready once, then each point's runs on the same workers (a new pool only after one
    was lost); summary.csv and the table at the end, also when the campaign stops early."""
    config, client = session.config, session.client
    session.start_workers(worker_pool(config, pool_size(config, points), reusable=True))
    results = points_of(points)
    total, step, folder = len(points) * config.num_runs, 0, ""
    breached: list[str] = []
    ended = False  # every run done: the workers may exit
    broken: list[WorkerPool] = []
    try:
        prepared = await get_ready(preparation_config(config, points), client, session.pool)
        session.ready()
        folder = folder_name(config, prepared.model_id, now())
        for point, runs in zip(points, results, strict=True):
            point_prepared = with_schedule(config, prepared, point)
            for run_number in range(config.num_runs):
                step += 1
                one = run_config(config, point, folder, run_number)
                if session.pool in broken or not session.pool.alive():  # a new pool, next runs
                    placed = session.pools[0].placed
                    session.replace_workers(worker_pool(config, placed, reusable=True))
                pool = session.pool
                pool.next_run(planned_workers(one))
                try:
                    report, _ = await _campaign_run(one, client, pool, point_prepared)
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
                    continue
                if pool.stop_requested:
                    raise RunFailed("interrupted: the campaign stopped", pool.exit_code)
                problem = run_problem(report.summary)
                if problem is not None:
                    runs.errors.append(f"run={run_number}: {problem}")
                    log.warning(failed_line(step, total, point, run_number, problem))
                    continue
                metrics, trimmed = summary_metrics(report.summary, config.steady_state)
                runs.metrics.append(metrics)
                runs.trimmed.append(trimmed)
                breached += [f"{point.name} run={run_number}: {line}" for line in report.breaches]
                trim = trimmed if config.steady_state else None
                log.info(run_line(step, total, point, run_number, metrics, trim))
        if config.profile:
            await profile(client, "stop")
        ended = True
    finally:
        await session.end_workers(graceful=ended, dismiss=ended)
        if folder and step:
            for runs in results:  # the campaign stopped early: say so in the rows it left
                missing = config.num_runs - len(runs.metrics) - len(runs.errors)
                if missing:
                    runs.errors.append(f"{missing} run(s) not finished: the campaign stopped")
            _write_summary(config, folder, results)
    failed = sum(len(runs.errors) for runs in results)
    if failed:
        raise RunFailed(f"{failed} of {total} runs failed; summary.csv says why")
    return report_breaches(breached)


def _write_summary(config: RunConfig, folder: str, results: list[PointRuns]) -> None:
    """summary.csv in the campaign's folder, its table on the console, and report.html."""
    rows = summary_rows(results, config.num_runs, config.percentiles())
    os.makedirs(folder, exist_ok=True)
    write_summary_csv(os.path.join(folder, "summary.csv"), rows)
    for line in summary_table(rows, config.num_runs):
        log.info(line)
    log.info(f"Campaign written to {folder} (summary.csv, and a folder per point)")
    log.info(campaign_report_line(folder))


async def _campaign_run(
    config: RunConfig, client: ServerClient, pool: WorkerPool, prepared: Prepared
) -> tuple[Report, RunRecords]:
    """One run of a campaign: its timed run, its report, its result JSON and records file."""
    counters_before = await metrics_page(client)
    start = run_start(config, prepared, active_workers(pool, prepared), counters_before)
    writer = records_writer(config, prepared, start, now())
    try:
        timed = await timed_run(config, client, pool, prepared, writer, counters_before is not None)
    except BaseException:
        if writer is not None:
            writer.close()
        raise
    counters_after = None if pool.stop_requested else await metrics_page(client)
    report, records, _ = await finish(config, prepared, start, timed, writer, counters_after)
    assert report.result is not None  # a campaign's runs always write their result
    write_result(report.path, report.result)
    return report, records
