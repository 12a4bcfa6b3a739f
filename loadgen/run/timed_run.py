"""The timed run: the shards sent from t0, with the progress bar and the probes beside them."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.config import RunConfig
from loadgen.report.collected import Collected
from loadgen.report.probes import ProbeResults
from loadgen.run.fanout import WorkerPool
from loadgen.run.prepare import Prepared
from loadgen.run.progress import Progress
from loadgen.run.shards import plan_shards, response_form
from loadgen.server.client import ServerClient
from loadgen.server.metrics import metrics_page
from loadgen.server.probes import probe_loop


@dataclass
class TimedRun:
    """What the timed run gave: the workers' records, the probes and the /metrics page before."""

    collected: Collected
    num_workers: int
    probes: ProbeResults | None
    counters_before: str | None


async def timed_run(
    config: RunConfig, client: ServerClient, pool: WorkerPool, prepared: Prepared
) -> TimedRun:
    """Plan the shards, read /metrics, and run them from t0 with the bar and the probes."""
    # A short dataset (--no-oversample) or batched prompts may leave a worker idle.
    num_workers = min(pool.num_workers, prepared.num_requests)
    plans = plan_shards(config, prepared, num_workers)
    progress = Progress(prepared.num_requests, config.disable_tqdm)
    probes = probe_loop(config, client, prepared.model_name, response_form(config))
    counters_before = await metrics_page(client)

    def on_start() -> None:
        progress.start()
        if probes is not None:
            probes.start()  # at t0, as upstream starts its probes with the run

    try:
        collected = await pool.run(
            plans,
            prepared.num_requests,
            config.max_concurrency,
            on_start=on_start,
            on_progress=progress.update,
        )
    finally:
        progress.close()
        probe_results = await probes.stop() if probes is not None else None
    return TimedRun(collected, num_workers, probe_results, counters_before)
