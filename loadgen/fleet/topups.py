"""--duration's top-ups in the fan-out: the next block of requests, dealt to the workers and
sent to each before it runs out.

The session's block source (loadgen/session/topup.py) prepares block after block; here one
block is kept ready ahead, and when a worker has at most ``margin`` requests left to release
(its PROGRESS says how many it has released) or, at a paced rate, its last request is due
within ``lead_s``, every worker gets its part of the ready block as one TOPUP message, and the
next block is prepared meanwhile. Nothing is sent per request. The coordinator holds the ready
block and the one being prepared: its memory for prepared requests is two blocks, whatever the
run's length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)


@dataclass
class BlockPart:
    """One worker's part of a block: its requests' bodies, run indices, offsets, guards."""

    bodies: list[bytes]
    indices: np.ndarray
    scheduled_ns: np.ndarray
    max_events: np.ndarray


@dataclass
class Block:
    """A block of requests, dealt: ``owner`` is the worker of each of its requests (indices
    ``base`` onwards), ``parts`` each worker's; ``last``: no block follows."""

    base: int
    owner: np.ndarray
    parts: list[BlockPart]
    last: bool

    @property
    def size(self) -> int:
        """The block's requests."""
        return len(self.owner)


class BlockSource(Protocol):
    """What prepares the run's blocks, in order (loadgen/session/topup.py)."""

    async def next_block(self, base: int) -> Block | None:
        """The block whose first request is ``base``; None when the run has no more."""
        ...

    def sent(self, block: Block) -> None:
        """``block`` went to the workers: its requests are the run's."""
        ...


class TopUps:
    """The fan-out's side of the top-ups: what each worker has and has released, the block
    ready ahead, and when to send it."""

    def __init__(
        self,
        source: BlockSource,
        given: list[int],
        last_due_ns: list[int],
        margin: int,
        lead_s: float | None,
        deadline_ns: int,
    ) -> None:
        self.source = source
        self.given = list(given)  # requests sent to each worker
        self.released = [0] * len(given)
        self.last_due_ns = list(last_due_ns)  # offset of each worker's last request
        self.margin = margin
        self.lead_ns = None if lead_s is None else round(lead_s * 1e9)  # None: rate inf
        self.deadline_ns = deadline_ns  # from t0; 0: none
        self.next_base = sum(given)
        self.finished = False  # the last block has gone (or none is left)
        self.ready: asyncio.Task[Block | None] | None = None
        self.t0_ns = 0
        self.waits = 0  # blocks that were not ready when they were due (sent when ready)
        self.late = False  # the block now due was not ready

    def start(self, t0_ns: int) -> None:
        """The run starts: the next block is prepared at once."""
        self.t0_ns = t0_ns
        self._prepare()

    def _prepare(self) -> None:
        if not self.finished and self.ready is None:
            self.ready = asyncio.ensure_future(self.source.next_block(self.next_base))

    def on_progress(self, worker: int, released: int) -> None:
        """``worker`` has released ``released`` requests of its shard."""
        self.released[worker] = max(self.released[worker], released)

    def due(self, workers: set[int]) -> bool:
        """Whether a worker still running is about to run out of requests."""
        if self.finished:
            return False
        now = perf_counter_ns() - self.t0_ns
        if self.deadline_ns and now >= self.deadline_ns:
            return False  # nothing more is sent: the run is ending
        for w in workers:
            if self.given[w] - self.released[w] <= self.margin:
                return True
            if self.lead_ns is not None and self.last_due_ns[w] - now <= self.lead_ns:
                return True
        return False

    def poll(self, workers: set[int]) -> Block | None:
        """The block to send now: the ready one when a worker is about to run out (an empty
        last one when the source has no more), else None. A block due before it is ready is
        counted in ``waits``; it goes when it is ready."""
        if not self.due(workers):
            self.late = False
            return None
        assert self.ready is not None
        if not self.ready.done():
            self.waits += not self.late
            self.late = True
            return None
        self.late = False
        try:
            block = self.ready.result()
        except Exception as exc:  # the run goes on with what the workers have
            log.warning(
                f"warning: --duration: the next block of requests could not be prepared "
                f"({type(exc).__name__}: {exc}); the run goes on with the requests sent"
            )
            block = None
        self.ready = None
        if block is None:
            self.finished = True
            empty = np.zeros(0, dtype=np.int64)
            parts = [BlockPart([], empty, empty, empty) for _ in self.given]
            return Block(self.next_base, np.zeros(0, dtype=np.int16), parts, True)
        self.next_base += block.size
        for w, part in enumerate(block.parts):
            self.given[w] += len(part.indices)
            if len(part.scheduled_ns):
                self.last_due_ns[w] = int(part.scheduled_ns[-1])
        self.finished = block.last
        self.source.sent(block)
        self._prepare()
        return block

    async def close(self) -> None:
        """The run is over: a block being prepared is dropped."""
        if self.ready is not None:
            self.ready.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.ready
            self.ready = None


def wait_line(waits: int, wait_ns: int, workers: int) -> str:
    """One line on the workers' waits for a block ("" when none waited)."""
    if not waits:
        return ""
    return (
        f"warning: --duration: the workers ran out of requests {waits} time(s) before their "
        f"next block came, {wait_ns / 1e6:.0f} ms in all over {workers} worker(s): a larger "
        "--duration-block gives the coordinator more time to prepare the next"
    )
