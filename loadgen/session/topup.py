"""--duration's blocks: the run's requests prepared block after block while it runs
(loadgen/session/time_bound.py says what a --duration run sends; loadgen/fleet/topups.py
when each block goes).

Block 0 is what preparation drew (the run's --seed: a campaign's point and run seed); block
k > 0 draws its prompts with ``block_seed(seed, k)``, from what block 0 was drawn with (the
tokenizer, the rows files gave: nothing is loaded or read again; the dataset cache is not
used for them). The paced schedule is one seeded schedule (loadgen/schedule_blocks.py), each
block taking its next offsets. A block's bodies are let go once it has gone; its offsets,
prompt lengths and input sequences join the records file's writer (a ``RequestBlocks``), which
lets them go once the block's rows are written, and the report reads them back from the file
at the end (``DurationBlocks.ended``): what the coordinator holds is the blocks still being
answered, whatever the run's length.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from loadgen.backends import input_sequences
from loadgen.config import RunConfig
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.fleet.fanout import ShardPlan
from loadgen.fleet.topups import Block, BlockPart, TopUps
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.model import RunStart
from loadgen.records.request_blocks import RequestBlocks
from loadgen.schedule import assign_workers
from loadgen.schedule_blocks import ScheduleBlocks, block_seed
from loadgen.server.client import ServerClient
from loadgen.session.prepare import Prepared, align, build_dataset, requests_of
from loadgen.session.shards import output_guard
from loadgen.session.threads import in_daemon_thread, niced
from loadgen.session.time_bound import block_size, paced, request_cap

log = logging.getLogger(__name__)

LEAD_S = 2.0  # at a paced rate, a worker's next block goes this long before its last is due
# A block is drawn while the run goes, on the machine the workers share: its thread yields the
# CPU to them (and to a server on the same machine) as a niced process would.
DRAW_NICE = 10


class UnkeptPrompts(Sequence[Any]):
    """The prompts of a --duration run with blocks: counted, not kept (they went with their
    blocks)."""

    def __init__(self, count: int) -> None:
        self.size = count

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        raise LookupError("a --duration run's prompts go with their blocks; none is kept")

    def __iter__(self) -> Iterator[Any]:
        raise LookupError("a --duration run's prompts go with their blocks; none is kept")


class PromptBlocks:
    """The run's blocks after the first, drawn while it runs (the fan-out's BlockSource)."""

    def __init__(
        self,
        config: RunConfig,
        client: ServerClient,
        prepared: Prepared,
        schedule: ScheduleBlocks,
        num_workers: int,
        block_size: int,
        cap_left: int | None,
        ledger: RequestBlocks,
    ) -> None:
        self.config, self.client, self.prepared = config, client, prepared
        self.schedule = schedule
        self.num_workers, self.block_size = num_workers, block_size
        self.cap_left = cap_left  # requests --num-prompts still allows (None: no cap)
        self.ledger = ledger
        self.block = 0  # the last block drawn
        self.cycles_noted = False
        # Block 0's alignment changed prompts: the server's tokenizer differs from the local
        # one, and each block is aligned as block 0 was (its /tokenize, during the run).
        self.aligns = prepared.realigned
        if self.aligns:
            log.warning(
                "warning: --duration: the server's tokenizer differs from the local one, so "
                "each block's prompts are aligned with the server's /tokenize while the run "
                "goes (requests beside the benchmark's); give --tokenizer the server's to "
                "avoid them"
            )

    def left(self) -> int | None:
        """Requests the run may still prepare (None: no bound but the deadline)."""
        bounds = [b for b in (self.cap_left, self.schedule.left) if b is not None]
        return min(bounds) if bounds else None

    async def next_block(self, base: int) -> Block | None:
        """The next block, dealt to the workers; None when the run has no more."""
        left = self.left()
        count = self.block_size if left is None else min(self.block_size, left)
        if count <= 0:
            return None
        self.block += 1
        config = dataclasses.replace(
            self.config,
            num_prompts=count,
            seed=block_seed(self.config.seed, self.block),
            dataset_cache=False,  # a block's draw is not worth a file of its own
        )
        started = time.perf_counter()
        drawn = await self._draw(config)
        log.debug(f"--duration: block {self.block} drawn in {time.perf_counter() - started:.3f} s")
        n = drawn.num_requests
        if n == 0:
            return None
        scheduled = self.schedule.take(n)
        if self.cap_left is not None:
            self.cap_left -= n
        sequences = _sequences(self.config, drawn)
        kept = {
            "scheduled_ns": scheduled,
            "input_tokens": drawn.dataset.prompt_lens,
            "input_sequences": sequences,
        }
        cap = self.config.concurrency
        owner = assign_workers(n, self.num_workers, cap).astype(np.int16)
        guards = output_guard(self.config, drawn.dataset.output_lens)
        parts = []
        for w in range(self.num_workers):
            mine = np.flatnonzero(owner == w)
            parts.append(
                BlockPart(
                    [drawn.bodies[i] for i in mine],
                    base + mine,
                    scheduled[mine],
                    guards[mine],
                )
            )
        left = self.left()
        return Block(base, owner, parts, last=left is not None and left <= 0, kept=kept)

    async def _draw(self, config: RunConfig) -> Prepared:
        """A block's requests, drawn and serialized in a thread, aligned as block 0 was."""
        source = self.prepared.source
        assert source is not None  # made by prepare()
        dataset, _ = await build_dataset(config, source, quiet=True, nice=DRAW_NICE)
        if self.config.no_oversample and not self.cycles_noted:
            self.cycles_noted = True
            log.info(
                f"--duration: --no-oversample's {self.config.dataset_path} is sent again, "
                "reshuffled, in each block (the file cycles until the time is up)"
            )
        names = (self.prepared.model_name, self.prepared.model_id, self.prepared.tokenizer_id)
        drawn = await in_daemon_thread(
            niced(lambda: requests_of(config, names, source, dataset, None, quiet=True), DRAW_NICE)
        )
        if not self.aligns:
            return drawn
        return await align(config, self.client, drawn, quiet=True)

    def sent(self, block: Block) -> None:
        """The block went out: its requests' values join the run's (the records file's)."""
        self.ledger.add(**block.kept)


def _sequences(config: RunConfig, drawn: Prepared) -> np.ndarray:
    """Inputs each request embeds (a pooling batch counts each); 1 per generation request."""
    if not config.pooling:
        return np.ones(drawn.num_requests, dtype=np.int64)
    return np.array(
        [input_sequences(config.backend, p) for p in drawn.dataset.prompts], dtype=np.int64
    )


class DurationBlocks:
    """A --duration run's blocks: its schedule, the block source, the ledger (each request's
    offset, prompt length and input sequences: the records file's writer's, which lets a
    block's go once written), and what the fan-out needs to send them."""

    def __init__(
        self,
        config: RunConfig,
        client: ServerClient,
        prepared: Prepared,
        schedule: ScheduleBlocks,
        num_workers: int,
        writer: RecordsWriter | None,
    ) -> None:
        self.config, self.schedule, self.num_workers = config, schedule, num_workers
        self.block_size = block_size(config)
        self.ledger = RequestBlocks(  # int64 each, as the records file's writer keeps them
            scheduled_ns=np.asarray(prepared.scheduled_ns, dtype=np.int64),
            input_tokens=np.asarray(prepared.dataset.prompt_lens, dtype=np.int64),
            input_sequences=_sequences(config, prepared),
        )
        if writer is not None:
            writer.values = self.ledger
        cap = request_cap(config)
        self.source = PromptBlocks(
            config,
            client,
            prepared,
            schedule,
            num_workers,
            self.block_size,
            None if cap is None else cap - prepared.num_requests,
            self.ledger,
        )

    def topups(self, plans: list[ShardPlan]) -> TopUps:
        """The fan-out's top-ups after ``plans`` (the shards of block 0)."""
        workers = len(plans)
        return TopUps(
            self.source,
            [len(plan.indices) for plan in plans],
            [int(plan.scheduled_ns[-1]) if len(plan.scheduled_ns) else 0 for plan in plans],
            margin=topup_margin(self.block_size, self.config.concurrency, workers),
            lead_s=LEAD_S if paced(self.config) else None,
            deadline_ns=round((self.config.duration or 0) * 1e9),
        )

    def ended(
        self,
        config: RunConfig,
        prepared: Prepared,
        start: RunStart,
        interrupted: bool,
        written: dict[str, np.ndarray],
    ) -> tuple[RunConfig, Prepared, RunStart]:
        """The run's flags, requests and start as its report reads them, once it has ended
        and its rows are read back (``written``: the ledger's values of the requests in the
        records file, -1 for the others): every block's requests (``num_prompts`` their count)
        and the schedule's hash. A paced run that ended with scheduled requests never sent to
        a worker (not ``interrupted``: the coordinator prepared them slower than they fell
        due) says so."""
        prepared = self.run_prepared(prepared, written)
        scheduled = self.schedule.num_requests
        missed = (scheduled or 0) - prepared.num_requests
        if scheduled is not None and not self.schedule.unpaced and not interrupted and missed:
            log.warning(
                f"warning: --duration: {missed} of the {scheduled} scheduled requests were "
                "never prepared in time (the coordinator drew prompts slower than the schedule "
                "sent them): the run's rate is below the one asked"
            )
        start = dataclasses.replace(
            start, num_requests=prepared.num_requests, schedule_sha256=self.schedule.hash()
        )
        return dataclasses.replace(config, num_prompts=prepared.num_requests), prepared, start

    def run_prepared(self, prepared: Prepared, written: dict[str, np.ndarray]) -> Prepared:
        """``prepared`` as the report reads it: every block's requests, their values those
        ``written`` to the records file and the ledger's blocks still held (their prompts,
        bodies and requested output lengths not kept: nothing after the run reads them)."""
        arrays = self.ledger.whole(written)
        dataset = SampledPrompts(
            UnkeptPrompts(self.ledger.size), arrays["input_tokens"], np.zeros(0, np.int64)
        )
        return dataclasses.replace(
            prepared,
            dataset=dataset,
            models=[],
            bodies=[],
            scheduled_ns=arrays["scheduled_ns"],
            input_sequences=arrays["input_sequences"],
        )


async def first_block(config: RunConfig, prepared: Prepared) -> tuple[Prepared, ScheduleBlocks]:
    """Block 0 on the run's schedule (built in a thread: its passes draw every gap)."""
    total = request_cap(config) if paced(config) else None
    schedule = await in_daemon_thread(
        ScheduleBlocks, total, config.rate, config.burstiness, config.seed
    )
    scheduled = schedule.take(prepared.num_requests)
    if len(scheduled) < prepared.num_requests:  # (never: block 0 is drawn within the count)
        raise ValueError("block 0 is longer than the schedule")
    return dataclasses.replace(prepared, scheduled_ns=scheduled), schedule


def topup_margin(block: int, cap: int | None, workers: int) -> int:
    """Requests a worker may have left when its next block goes: half its share of a block
    (the block after it is prepared from then on, while the worker sends a whole block), and
    at least twice its share of the cap (with fewer left than its credits, a worker hands
    credits back, and they would have to come again)."""
    return max(1, block // (2 * workers), 2 * math.ceil((cap or 0) / workers))


def with_schedule_hash(start: RunStart, schedule: ScheduleBlocks | None) -> RunStart:
    """The run's start with its blocks' schedule hash (paced: the whole schedule's; at rate
    inf the hash of the requests prepared, replaced at the end)."""
    if schedule is None:
        return start
    return dataclasses.replace(start, schedule_sha256=schedule.hash())
