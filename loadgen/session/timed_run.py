"""The timed run: the shards sent from t0, with the live view and the probes beside them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loadgen.config import RunConfig
from loadgen.fleet.collector import BatchObserver
from loadgen.fleet.fanout import WorkerPool
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.model import HostUsage
from loadgen.records.server_series import MetricSeries
from loadgen.report.probes import ProbeResults
from loadgen.server.client import ServerClient
from loadgen.server.probes import probe_loop
from loadgen.server.scraper import scrapers
from loadgen.session.fail_fast import FailFast
from loadgen.session.host_cpu import HostSampler, local_server_port
from loadgen.session.lifecycle import RunFailed
from loadgen.session.live_prometheus import LiveEndpoint, LiveMetrics
from loadgen.session.live_view import LiveView
from loadgen.session.prepare import Prepared
from loadgen.session.records import ToRecordsFile
from loadgen.session.shards import plan_shards, response_form
from loadgen.session.topup import DurationBlocks


@dataclass
class TimedRun:
    """What the timed run gave: the workers' records, the probes' and the host's CPU use."""

    collected: Collected
    probes: ProbeResults | None
    fail_fast: FailFast | None  # None with --no-fail-fast; ``stopped`` when it stopped the run
    host: HostUsage | None = None  # None where it cannot be measured (not Linux)
    server_metrics: list[MetricSeries] | None = None  # None when nothing was scraped


class AtT0(BatchObserver):
    """Starts something that runs beside the workers (the host sampler, the probes) at t0."""

    def __init__(self, start: Callable[[], None]) -> None:
        self.at_t0 = start

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts: so does what this starts."""
        self.at_t0()


class AtT0Ns(BatchObserver):
    """Starts something that needs t0's instant (the scrapers) at t0."""

    def __init__(self, start: Callable[[int], None]) -> None:
        self.at_t0 = start

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts at ``t0_ns``: so does what this starts."""
        self.at_t0(t0_ns)


def active_workers(pool: WorkerPool, prepared: Prepared) -> int:
    """Workers that get requests: a short dataset (--no-oversample) or batched prompts may
    leave some idle."""
    return min(pool.num_workers, prepared.num_requests)


async def timed_run(
    config: RunConfig,
    client: ServerClient,
    pool: WorkerPool,
    prepared: Prepared,
    writer: RecordsWriter | None,
    metrics_answered: bool = False,
    endpoint: LiveEndpoint | None = None,
    point: str = "",
    blocks: DurationBlocks | None = None,
) -> TimedRun:
    """Plan the shards and run them from t0 with the live view, the probes and the scrapers
    (the server's /metrics when it answered before the run, ``metrics_answered``); every batch
    of records also goes to the records file (``writer``) as it arrives. --prometheus-port's
    figures go to a campaign's ``endpoint`` labelled with its ``point``, else to the run's own.
    ``blocks``: --duration's blocks after the first (``prepared``), sent as the run goes."""
    plans = plan_shards(config, prepared, active_workers(pool, prepared), topup=blocks is not None)
    own_endpoint = endpoint is None
    if endpoint is None:
        endpoint = open_live_endpoint(config)  # first: may refuse
    live = None
    if endpoint is not None:
        live = live_metrics(config, prepared, pool.local_pids[: len(plans)], point)
        endpoint.show(live)
    records_file = ToRecordsFile(writer) if writer is not None else BatchObserver()
    # The records file (a temporary one when none is kept) holds the token events alone.
    fail_fast = FailFast(prepared.num_requests, records_file) if config.fail_fast else None
    probes = probe_loop(config, client, prepared.model_name, response_form(config))
    host = HostSampler(pool.local_pids[: len(plans)], local_server_port(config.server_url))
    view = LiveView(
        prepared.num_requests,
        prepared.scheduled_ns,
        config.concurrency,
        config.disable_tqdm,
        host,
        pooling=config.pooling,
        deadline_s=config.duration,
    )
    # In this order from t0: the view's first reading is the host sampler's, taken at t0; the
    # probes start with the run, as upstream starts its probes.
    observers = [fail_fast or records_file, AtT0(host.start), view]
    if probes is not None:
        observers.append(AtT0(probes.start))
    scraping = scrapers(
        client,
        config.server_metrics and metrics_answered,
        config.telemetry_urls,
        config.server_metrics_interval,
        writer.write_series if writer is not None else None,
    )
    if scraping is not None:
        observers.append(AtT0Ns(scraping.start))
    if live is not None:
        observers.append(live)
    try:
        collected = await pool.run(
            plans,
            prepared.num_requests,
            config.concurrency,
            observers=observers,
            topups=blocks.topups(plans) if blocks is not None else None,
            rows_in_file=writer is not None,
        )
    finally:
        host_usage = await host.stop()
        view.close()
        probe_results = (
            await probes.stop(interrupted=pool.stop_requested) if probes is not None else None
        )
        server_metrics = await scraping.stop() if scraping is not None else None
        if own_endpoint and endpoint is not None:
            endpoint.close()
    return TimedRun(collected, probe_results, fail_fast, host_usage, server_metrics)


def open_live_endpoint(config: RunConfig) -> LiveEndpoint | None:
    """--prometheus-port's endpoint, listening (RunFailed in one line when it cannot), or None
    without the flag."""
    if config.prometheus_port is None:
        return None
    endpoint = LiveEndpoint(config.prometheus_host, config.prometheus_port)
    try:
        endpoint.open()
    except OSError as exc:
        raise RunFailed(str(exc)) from None
    return endpoint


def live_metrics(
    config: RunConfig, prepared: Prepared, worker_pids: list[int], point: str = ""
) -> LiveMetrics:
    """The run's figures for --prometheus-port, labelled with the run, model and ``point``."""
    return LiveMetrics(
        config.label or config.backend,
        prepared.model_name,
        prepared.scheduled_ns,
        config.concurrency,
        worker_pids,
        pooling=config.pooling,
        point=point,
    )
