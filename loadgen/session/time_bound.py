"""Runs bounded by time (``--duration``): how many requests such a run prepares, and the
prepared requests of a campaign's point cut to its own count.

At a paced ``--request-rate`` the schedule is upstream's for N = floor(rate x duration)
requests, whose last arrival is at N / rate, within the duration: one seeded schedule, hashed
as any other, with prompts drawn for exactly those N. At rate inf (and for a trace's or a
ramp's own schedule) every request is due from t0, so the workers send until the deadline with
``--num-prompts`` as the most they have; the deadline itself is the workers' (WorkerConfig's
``deadline_ns``), and the requests it left unsent are no part of the run (``sent_by_deadline``
in loadgen/report/steady.py).
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from loadgen.config import RunConfig
from loadgen.datasets.max_model_len import select_requests
from loadgen.session.prepare import Prepared

log = logging.getLogger(__name__)


def duration_requests(rate: float, duration_s: float) -> int:
    """Requests of a paced schedule that fills ``duration_s`` at ``rate`` req/s: floor(rate x
    duration), at least 1, and never one whose arrival (N / rate, in whole ns) is past it."""
    n = max(1, math.floor(round(rate * duration_s, 9)))
    while n > 1 and round(n / rate * 1e9) > round(duration_s * 1e9):
        n -= 1
    return n


def paced(config: RunConfig) -> bool:
    """Whether the run's own rate sets its schedule (no trace, no ramp, a finite rate)."""
    return (
        not config.self_timed_trace
        and config.ramp_up_strategy is None
        and not math.isinf(config.rate)
    )


def planned_requests(config: RunConfig) -> int:
    """The requests a run prepares: --num-prompts, or with --duration at a paced rate the
    schedule's count (capped by --num-prompts when that was given too)."""
    if config.duration is None or not paced(config):
        return config.num_prompts
    n = duration_requests(config.rate, config.duration)
    return min(n, config.num_prompts) if "--num-prompts" in config.given else n


def bounded_by_duration(config: RunConfig, say: bool = True) -> RunConfig:
    """The run's flags with --num-prompts set to the requests it prepares, said in one line
    (``say``) (unchanged without --duration)."""
    if config.duration is None:
        return config
    bounded = dataclasses.replace(config, num_prompts=planned_requests(config))
    if say:
        log.info(duration_line(bounded))
    return bounded


def duration_line(config: RunConfig) -> str:
    """One line on what --duration makes of the run (``config`` already bounded)."""
    assert config.duration is not None
    head = f"--duration {config.duration:g} s"
    if paced(config):
        last = config.num_prompts / config.rate
        full = duration_requests(config.rate, config.duration)
        capped = " (capped by --num-prompts)" if config.num_prompts < full else ""
        return (
            f"{head} at {config.rate:g} req/s: {config.num_prompts} requests on one seeded "
            f"schedule{capped}, the last due at {last:.2f} s"
        )
    return (
        f"{head}: requests are sent until t0 + {config.duration:g} s, at most the "
        f"{config.num_prompts} prepared (--num-prompts); whichever bound comes first ends the run"
    )


def cut_to(prepared: Prepared, num_requests: int) -> Prepared:
    """The first ``num_requests`` of the prepared requests (a campaign's point at a lower
    rate sends fewer than the campaign prepared)."""
    if num_requests >= prepared.num_requests:
        return prepared
    keep = slice(0, num_requests)
    return dataclasses.replace(
        prepared,
        dataset=select_requests(prepared.dataset, np.arange(num_requests)),
        models=prepared.models[keep],
        bodies=prepared.bodies[keep],
        scheduled_ns=prepared.scheduled_ns[keep],
    )
