"""``--max-running N``: at most N generation requests run at once, the rest wait their turn in
arrival order (vLLM's ``--max-num-seqs``, a continuous-batching scheduler's batch size).

A request holds its slot from its start to its last token event: ``ttft + (n - 1) * itl`` for an
answer of n tokens (the first event is due at ``ttft``, each later one ``itl`` after the one
before). So the mock serves at most

    capacity = N / (ttft + (n - 1) * itl)   requests per second

and a closed loop of C > N streams, or an arrival rate above the capacity, waits in the queue:
its time to first token grows by the wait (a rate above the capacity: by more with each request),
which is what a search for the highest load within an SLO must find. Without the flag (0) every
request runs at once, as before.
"""

from __future__ import annotations

import asyncio
from collections import deque


def capacity_rps(max_running: int, ttft_s: float, itl_s: float, output_tokens: int) -> float:
    """Requests per second the mock serves at most with ``max_running`` slots, each held for an
    answer of ``output_tokens`` tokens (the module's formula)."""
    return max_running / (ttft_s + (output_tokens - 1) * itl_s)


class RunningSlots:
    """N slots handed out first come, first served; ``limit`` 0: as many as asked for."""

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.running = 0
        self.queue: deque[asyncio.Future[None]] = deque()
        self.max_waiting = 0

    @property
    def waiting(self) -> int:
        """Requests queued for a slot."""
        return len(self.queue)

    async def acquire(self) -> None:
        """Wait for a slot: at once while one is free and nobody waits, else after every
        request queued before this one."""
        if not self.limit or (self.running < self.limit and not self.queue):
            self.running += 1
            return
        turn = asyncio.get_running_loop().create_future()
        self.queue.append(turn)
        self.max_waiting = max(self.max_waiting, len(self.queue))
        try:
            await turn
        except asyncio.CancelledError:  # the client went away while queued
            if turn.done() and not turn.cancelled():  # its slot was handed over: pass it on
                self.release()
            elif turn in self.queue:
                self.queue.remove(turn)
            raise

    def release(self) -> None:
        """Give a slot back: straight to the first request waiting, else free it."""
        while self.queue:
            turn = self.queue.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes on: ``running`` stays
                return
        self.running -= 1
