"""``--dry-run`` (the Rust client's): the plan a run would follow, printed, and nothing more.

Preparation runs as in a real run (the model, the tokenizer, the dataset with --max-model-len,
the bodies, the schedule), then the plan is printed and the run ends with exit 0: no worker is
started and no request is sent. The server is asked only what preparation needs: its model list
without --model, its /tokenize with --skip-tokenizer-init (or for a hub tokenizer that cannot
be read). The Rust client prints the dataset's totals and averages ("Dry run stats:"); loadgen
prints those lines as it does, then the lengths' spread, the schedule and its hash (the
``schedule_sha256`` the run's result JSON would have), and each worker's share.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from loadgen.config import RunConfig
from loadgen.fleet.credit_pool import initial_credits
from loadgen.fleet.placement import planned_workers
from loadgen.schedule import schedule_hash
from loadgen.schedule_blocks import ScheduleBlocks
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.session.lifecycle import RunSession
from loadgen.session.prepare import Prepared, prepare
from loadgen.session.shards import request_owners
from loadgen.session.time_bound import first_block_config, request_cap, tops_up
from loadgen.session.topup import first_block

log = logging.getLogger(__name__)


async def show_plan(session: RunSession) -> int:
    """Prepare the session's run and show its plan (the output channel); the exit code (0)."""
    config = session.config
    block = config.duration_block if tops_up(config) else None  # --duration's blocks: the first
    drawn = first_block_config(config, block) if block is not None else config
    prepared = await prepare(drawn, session.client)
    if isinstance(prepared.tokenizer, ServerTokenizer):
        prepared.tokenizer.end_build()
    schedule = None
    if block is not None:
        prepared, schedule = await first_block(config, prepared)
    workers = min(planned_workers(config) + config.remote_workers, prepared.num_requests)
    for line in plan_lines(config, prepared, workers, schedule):
        log.info(line)
    return 0


def plan_lines(
    config: RunConfig,
    prepared: Prepared,
    num_workers: int,
    blocks: ScheduleBlocks | None = None,
) -> list[str]:
    """The whole plan: the dataset, the schedule, the workers (with --duration's ``blocks``,
    block 0's requests and the whole schedule's hash)."""
    dataset = prepared.dataset
    stats = dataset_lines(dataset.prompt_lens, dataset.output_lens, config.num_prompts)
    if blocks is not None:
        cap = request_cap(config)
        most = "until the deadline" if cap is None else f"{cap} at most"
        stats.insert(
            1,
            f"  --duration: requests in blocks of {config.duration_block} ({most}); block 0's "
            "shown, each later one drawn while the run goes with a seed of its own",
        )
    if prepared.turns is not None:  # as the Rust client's multi-turn dry run
        conversations = prepared.turns.num_conversations
        stats[1:2] = [
            f"  Total conversations: {conversations}",
            f"  Total turns: {len(dataset.prompts)}",
        ]
    return [
        *stats,
        *schedule_lines(config, prepared.scheduled_ns, prepared.turns is not None, blocks),
        *worker_lines(config, prepared, num_workers),
        "Dry run: no worker started, no request sent.",
    ]


def dataset_lines(prompt_lens: np.ndarray, output_lens: np.ndarray, asked: int) -> list[str]:
    """The Rust client's "Dry run stats" lines, then each length's spread."""
    count = len(prompt_lens)
    total_in, total_out = int(prompt_lens.sum()), int(output_lens.sum())
    lines = [
        "Dry run stats:",
        f"  Total prompts: {count}" + (f" (--num-prompts {asked})" if asked != count else ""),
        f"  Total input tokens: {total_in}",
        f"  Total expected output tokens: {total_out}",
        f"  Avg input tokens: {total_in / count:.1f}",
        f"  Avg output tokens: {total_out / count:.1f}",
        f"  Input tokens:  {spread(prompt_lens)}",
        f"  Output tokens: {spread(output_lens)}",
    ]
    return lines


def spread(values: np.ndarray) -> str:
    """min, mean, p50, p99 and max of ``values`` (percentiles interpolated, as the report's)."""
    values = np.asarray(values, dtype=np.float64)
    p50, p99 = np.percentile(values, [50, 99])
    return (
        f"min {values.min():g}, mean {values.mean():.1f}, p50 {p50:g}, p99 {p99:g}, "
        f"max {values.max():g}"
    )


def schedule_lines(
    config: RunConfig,
    scheduled_ns: np.ndarray,
    multi_turn: bool,
    blocks: ScheduleBlocks | None = None,
) -> list[str]:
    """When requests are due: the arrival process, the span of the sends, and the hash (with
    --duration's ``blocks``: the whole schedule's, paced; block 0's at rate inf)."""
    last_s = float(scheduled_ns.max()) / 1e9 if len(scheduled_ns) else 0.0
    if blocks is not None and blocks.num_requests is not None and not blocks.unpaced:
        last_s = blocks.num_requests / blocks.rate
    if config.self_timed_trace:
        arrivals = "the trace's own send times (self-timed)"
    elif config.ramp_up_strategy is not None:
        arrivals = (
            f"{config.ramp_up_strategy} ramp-up from {config.ramp_up_start_rps} to "
            f"{config.ramp_up_end_rps} req/s, burstiness {config.burstiness:g}"
        )
    elif math.isinf(config.rate):
        arrivals = "request rate inf: every request due at t0"
    else:
        process = "Poisson process" if config.burstiness == 1.0 else "Gamma distribution"
        arrivals = (
            f"request rate {config.rate:g} req/s, burstiness {config.burstiness:g} ({process})"
        )
    what = "conversation starts" if multi_turn else "requests"
    lines = [
        "Schedule:",
        f"  Arrivals: {arrivals}",
        f"  Duration: the last of the {what} is due {last_s:.3f} s after t0",
    ]
    if multi_turn:
        lines.append("  Later turns go when the turn before them ends, plus the think time")
    cap = config.max_concurrency
    lines += [
        f"  Max concurrency: {cap if cap else 'none'}",
        f"  schedule_sha256: {schedule_hash(scheduled_ns) if blocks is None else blocks.hash()}",
    ]
    return lines


def worker_lines(config: RunConfig, prepared: Prepared, num_workers: int) -> list[str]:
    """Each worker's requests and its credits of the --max-concurrency cap at the start, as the
    run would deal them (shards.request_owners, credit_pool.initial_credits)."""
    cap = config.concurrency or 0
    owners = request_owners(prepared, num_workers, cap or None)
    sizes = np.bincount(owners, minlength=num_workers).tolist()
    credits = initial_credits(cap, sizes)
    remote = min(config.remote_workers, num_workers)
    placed = num_workers - remote
    where = "Ray actors" if config.ray else "local processes"
    head = f"Workers: {num_workers} ({placed} {where}"
    head += f", {remote} joining at --listen)" if remote else ")"
    lines = [head + ", none started"]
    for w, size in enumerate(sizes):
        share = f", {credits[w]} of the {cap} credits at the start" if cap else ""
        note = ""
        if w >= placed:
            note = " (a remote worker, joining at --listen in the order they come: not contacted)"
        elif config.ray:
            note = f" (a Ray actor on the cluster at --ray {config.ray}: not contacted)"
        lines.append(f"  worker {w}: {size} requests{share}{note}")
    return lines
