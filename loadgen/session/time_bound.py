"""Runs bounded by time (``--duration``): how many requests such a run prepares, in what
blocks, and the prepared requests of a campaign's point cut to its own count.

A run with --duration prepares its requests in blocks (``tops_up``; the blocks are
loadgen/session/topup.py's, their sending loadgen/fleet/topups.py's): block 0 before t0, each
next one while the run goes, sent to the workers before they run out (one message per worker
and block, never one per request). The coordinator holds a few blocks of prepared requests
(block 0, up to two drawn ahead, the one being drawn) whatever the run's length;
``--duration-block`` sets their size.

At a paced ``--request-rate`` the schedule is upstream's for N = floor(rate x duration)
requests, whose last arrival is at N / rate, within the duration: one seeded schedule (drawn
from ``RandomState(--seed)``, block after block from the same generator), hashed as one value,
and equal to the one-shot schedule of N requests to the nanosecond (loadgen/schedule_blocks.py).
At rate inf (a closed loop with --max-concurrency, or a burst) every request is due from t0 and
blocks come until the time is up. With ``--num-prompts`` given too, it stays a cap: whichever
bound comes first ends the run. Block 0's prompts are drawn with the run's --seed (a campaign
run's own seed), block k's with a seed derived from it and k (``block_seed``).

Datasets that cannot be drawn again: a file read with ``--no-oversample`` cycles (each block
sends its rows again, reshuffled; one line says so), as a soak over a fixed set of prompts
expects; a self-timed trace keeps its own instants and is not topped up: a --duration past its
last request is refused before t0 in one line (``trace_problem``; repeating a trace's timing
would not be the traffic it recorded). A campaign's runs are topped up the same
way, with one block size for all its points (loadgen/session/campaign_run.py's
``campaign_block``).

The deadline itself is the workers' (WorkerConfig's ``deadline_ns``), and the requests it left
unsent are no part of the run (``sent_by_deadline`` in loadgen/report/steady.py).
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from loadgen.backends import BACKENDS
from loadgen.config import ConfigError, RunConfig
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


def tops_up(config: RunConfig) -> bool:
    """Whether a run's requests are prepared in blocks while it runs: --duration,
    but not a self-timed trace (its own instants) nor audio uploads."""
    return (
        config.duration is not None
        and not config.self_timed_trace
        and not config.multi_turn
        and not BACKENDS[config.backend].multipart
    )


def block_problem(config: RunConfig) -> str | None:
    """Why --duration-block, given, cannot apply (a run that is not topped up), in one line."""
    if "--duration-block" not in config.given or tops_up(config):
        return None
    what = "a self-timed trace's" if config.self_timed_trace else "audio uploads'"
    return f"--duration-block has no effect: {what} requests are prepared up front"


def request_cap(config: RunConfig) -> int | None:
    """The most requests a --duration run prepares: at a paced rate the schedule's count
    (capped by --num-prompts when given), at rate inf --num-prompts when given, else no cap."""
    if paced(config):
        return planned_requests(config)
    return config.num_prompts if "--num-prompts" in config.given else None


def block_size(config: RunConfig) -> int:
    """Requests per block: --duration-block, else 10 s of a paced rate, at least 1024 and 4
    times --max-concurrency."""
    if config.duration_block is not None:
        return config.duration_block
    size = max(1024, 4 * (config.concurrency or 0))
    if paced(config):
        size = max(size, math.ceil(config.rate * 10))
    return size


def first_block_config(config: RunConfig, block: int) -> RunConfig:
    """The flags block 0 is drawn with: at most ``block`` requests, within the cap."""
    cap = request_cap(config)
    return dataclasses.replace(config, num_prompts=block if cap is None else min(block, cap))


def bounded_by_duration(config: RunConfig, say: bool = True, blocks: bool = True) -> RunConfig:
    """The run's flags with --num-prompts set to the requests it prepares (and, ``blocks``,
    --duration-block set to its blocks' size: a campaign sets one size for all its runs
    itself), said in one line (``say``); unchanged without --duration."""
    if config.duration is None:
        return config
    if problem := block_problem(config):
        raise ConfigError(problem)
    bounded = dataclasses.replace(config, num_prompts=planned_requests(config))
    if blocks and tops_up(config):
        bounded = dataclasses.replace(bounded, duration_block=block_size(config))
    if say:
        log.info(duration_line(bounded))
    return bounded


def duration_line(config: RunConfig) -> str:
    """One line on what --duration makes of the run (``config`` already bounded)."""
    assert config.duration is not None
    head = f"--duration {config.duration:g} s"
    topped = tops_up(config) and config.duration_block is not None
    cap = request_cap(config)
    several = topped and (cap is None or cap > (config.duration_block or 0))
    blocks = f", prepared in blocks of {config.duration_block}" if several else ""
    if paced(config):
        last = config.num_prompts / config.rate
        full = duration_requests(config.rate, config.duration)
        capped = " (capped by --num-prompts)" if config.num_prompts < full else ""
        return (
            f"{head} at {config.rate:g} req/s: {config.num_prompts} requests on one seeded "
            f"schedule{capped}{blocks}, the last due at {last:.2f} s"
        )
    if topped:
        most = f", at most {cap} (--num-prompts)" if cap is not None else ""
        return f"{head}: requests are sent until t0 + {config.duration:g} s{most}{blocks}"
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


def trace_problem(config: RunConfig, scheduled_ns: np.ndarray) -> str | None:
    """Why a self-timed trace cannot fill --duration (its last request is due before the
    deadline: the run would end early, or idle), in one line; None when it can."""
    if config.duration is None or not config.self_timed_trace or not len(scheduled_ns):
        return None
    last_s = float(scheduled_ns.max()) / 1e9
    if last_s >= config.duration:
        return None
    return (
        f"--duration {config.duration:g} s is longer than the trace: its last request is due "
        f"{last_s:.2f} s after t0. Give --duration {math.floor(last_s * 100) / 100:g} or less "
        "(the trace is replayed as recorded, never repeated), or --no-self-timed to send its "
        "requests at --request-rate"
    )
