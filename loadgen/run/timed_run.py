"""The timed run: the shards sent from t0, with the live view and the probes beside them."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.config import RunConfig
from loadgen.records.collected import Collected
from loadgen.records.model import HostUsage
from loadgen.report.probes import ProbeResults
from loadgen.run.fail_fast import FirstFailures
from loadgen.run.fanout import RecordsSink, WorkerPool
from loadgen.run.host_cpu import HostSampler
from loadgen.run.live_view import LiveView
from loadgen.run.prepare import Prepared
from loadgen.run.shards import plan_shards, response_form
from loadgen.server.client import ServerClient
from loadgen.server.probes import probe_loop


@dataclass
class TimedRun:
    """What the timed run gave: the workers' records, the probes' and the host's CPU use."""

    collected: Collected
    probes: ProbeResults | None
    first_failures: FirstFailures | None  # what stopped the run, when it failed fast
    host: HostUsage | None = None  # None where it cannot be measured (not Linux)


def active_workers(pool: WorkerPool, prepared: Prepared) -> int:
    """Workers that get requests: a short dataset (--no-oversample) or batched prompts may
    leave some idle."""
    return min(pool.num_workers, prepared.num_requests)


async def timed_run(
    config: RunConfig,
    client: ServerClient,
    pool: WorkerPool,
    prepared: Prepared,
    sink: RecordsSink | None,
) -> TimedRun:
    """Plan the shards and run them from t0 with the live view and the probes; every batch of
    records also goes to ``sink`` as it arrives."""
    plans = plan_shards(config, prepared, active_workers(pool, prepared))
    first_failures = FirstFailures(prepared.num_requests) if config.fail_fast else None
    probes = probe_loop(config, client, prepared.model_name, response_form(config))
    host = HostSampler(pool.local_pids[: len(plans)])
    view = LiveView(
        prepared.num_requests,
        prepared.scheduled_ns,
        config.max_concurrency,
        config.disable_tqdm,
        host,
        pooling=config.pooling,
    )

    def on_start(t0_ns: int) -> None:
        host.start()
        view.start(t0_ns)
        if probes is not None:
            probes.start()  # at t0, as upstream starts its probes with the run

    try:
        collected = await pool.run(
            plans,
            prepared.num_requests,
            config.max_concurrency,
            on_start=on_start,
            on_progress=view.add_batch,
            sink=sink,
            first_failures=first_failures,
        )
    finally:
        host_usage = await host.stop()
        view.close()
        probe_results = (
            await probes.stop(interrupted=pool.stop_requested) if probes is not None else None
        )
    return TimedRun(collected, probe_results, first_failures, host_usage)
