"""--duration's top-ups in the fan-out: the next block of requests, dealt to the workers and
sent to each before it runs out.

The session's block source (loadgen/session/topup.py) prepares block after block, in a task of
its own, up to ``AHEAD`` blocks ahead; when a worker has at most ``margin`` requests left to
release (its PROGRESS says how many it has released) or, at a paced rate, its last request is
due within ``lead_s``, every worker gets its part of the first prepared block as one TOPUP
message, and another is prepared meanwhile. Nothing is sent per request. The coordinator holds
the blocks prepared ahead and the one being drawn: its memory for prepared requests is a few
blocks, whatever the run's length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

AHEAD = 2  # blocks prepared ahead of the one the workers will need next


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
    kept: Any = None  # what the source keeps of it for the run (loadgen/session/topup.py)

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
    """The fan-out's side of the top-ups: what each worker has and has released, the blocks
    prepared ahead (at most ``ahead``, drawn one after another by a task of their own), and
    when to send the next."""

    def __init__(
        self,
        source: BlockSource,
        given: list[int],
        last_due_ns: list[int],
        margin: int,
        lead_s: float | None,
        deadline_ns: int,
        ahead: int = AHEAD,
    ) -> None:
        self.source = source
        self.given = list(given)  # requests sent to each worker
        self.released = [0] * len(given)
        self.last_due_ns = list(last_due_ns)  # offset of each worker's last request
        self.margin = margin
        self.lead_ns = None if lead_s is None else round(lead_s * 1e9)  # None: rate inf
        self.deadline_ns = deadline_ns  # from t0; 0: none
        self.ahead = ahead
        self.next_base = sum(given)  # the first request of the next block sent
        self.queue: deque[Block] = deque()  # prepared, in order, not yet sent
        self.exhausted = False  # the source has no more (or could not prepare the next)
        self.finished = False  # the last block has gone
        self.producer: asyncio.Task[None] | None = None
        self.space = asyncio.Event()  # a block was taken: the producer may draw another
        self.t0_ns = 0
        self.waits = 0  # blocks that were not ready when they were due (sent when ready)
        self.late = False  # the block now due was not ready

    def start(self, t0_ns: int) -> None:
        """The run starts: blocks are prepared from now on."""
        self.t0_ns = t0_ns
        self.producer = asyncio.ensure_future(self._produce())

    async def _produce(self) -> None:
        base = self.next_base
        try:
            while True:
                while len(self.queue) >= self.ahead:
                    self.space.clear()
                    await self.space.wait()
                block = await self.source.next_block(base)
                if block is None:
                    break
                base += block.size
                self.queue.append(block)
                if block.last:
                    break
        except Exception as exc:  # the run goes on with what the workers have
            log.warning(
                f"warning: --duration: the next block of requests could not be prepared "
                f"({type(exc).__name__}: {exc}); the run goes on with the requests sent"
            )
        self.exhausted = True

    def on_progress(self, worker: int, released: int) -> None:
        """``worker`` has released ``released`` requests of its shard."""
        self.released[worker] = max(self.released[worker], released)

    def due(self, workers: set[int]) -> bool:
        """Whether a worker still running is about to run out of requests."""
        if self.finished:
            return False
        now = perf_counter_ns() - self.t0_ns
        if self.deadline_ns and now >= self.deadline_ns:
            # The run is ending. (A block that reaches a worker after its deadline, once it has
            # accounted for its requests, is counted by its DONE's ``topups``: not sent.)
            return False
        for w in workers:
            if self.given[w] - self.released[w] <= self.margin:
                return True
            if self.lead_ns is not None and self.last_due_ns[w] - now <= self.lead_ns:
                return True
        return False

    def poll(self, workers: set[int]) -> Block | None:
        """The block to send now: the first prepared when a worker is about to run out (an
        empty last one when the source has no more), else None. A block due before it is
        ready is counted in ``waits``; it goes when it is ready."""
        if not self.due(workers):
            self.late = False
            return None
        if not self.queue:
            if self.exhausted:
                self.finished = True
                empty = np.zeros(0, dtype=np.int64)
                parts = [BlockPart([], empty, empty, empty) for _ in self.given]
                return Block(self.next_base, np.zeros(0, dtype=np.int16), parts, True)
            self.waits += not self.late
            self.late = True
            return None
        self.late = False
        block = self.queue.popleft()
        self.space.set()
        self.next_base += block.size
        for w, part in enumerate(block.parts):
            self.given[w] += len(part.indices)
            if len(part.scheduled_ns):
                self.last_due_ns[w] = int(part.scheduled_ns[-1])
        self.finished = block.last
        self.source.sent(block)
        return block

    async def close(self) -> None:
        """The run is over: blocks being prepared, or prepared and not sent, are dropped."""
        if self.producer is not None:
            self.producer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.producer
            self.producer = None
        self.queue.clear()


def wait_line(waits: int, wait_ns: int, workers: int) -> str:
    """One line on the workers' waits for a block ("" when none waited)."""
    if not waits:
        return ""
    return (
        f"warning: --duration: the workers ran out of requests {waits} time(s) before their "
        f"next block came, {wait_ns / 1e6:.0f} ms in all over {workers} worker(s): a larger "
        "--duration-block gives the coordinator more time to prepare the next"
    )
