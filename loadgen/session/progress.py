"""What the console shows as the timed run starts: upstream's pacing lines (the live view that
follows is loadgen/session/live_view.py)."""

from __future__ import annotations

import logging

from loadgen.config import RunConfig

log = logging.getLogger(__name__)


def show_traffic(config: RunConfig) -> None:
    """Upstream's lines on how requests will be paced, printed as the timed run starts."""
    if config.self_timed_trace:
        log.info("Self timing is set, using the timestamps from the trace file.")
        return
    distribution = "Poisson process" if config.burstiness == 1.0 else "Gamma distribution"
    if config.ramp_up_strategy is not None:
        log.info(f"Traffic ramp-up strategy: {config.ramp_up_strategy}.")
        log.info(
            f"Will increase RPS from {config.ramp_up_start_rps} to "
            f"{config.ramp_up_end_rps} RPS over the duration of the benchmark."
        )
    else:
        log.info(f"Traffic request rate: {config.request_rate}")
    log.info(f"Burstiness factor: {config.burstiness} ({distribution})")
    log.info(f"Maximum request concurrency: {config.max_concurrency}")
