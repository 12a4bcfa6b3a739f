"""A worker's part of the global ``--max-concurrency`` cap: credits lent by the coordinator.

The coordinator owns the cap as C credits and hands each worker its share at START. A request
takes a credit before it is sent and frees it when it ends; a freed credit goes, in order:

1. to the next request of this worker that is due and waiting for one;
2. back to the coordinator, when this worker cannot use it: it holds as many free credits as it
   has requests left to send, or the coordinator has asked it to lend idle credits (another
   worker has requests waiting) and none of this worker's requests is due;
3. otherwise into this worker's free credits, for its next request.

Requests can also leave without a credit: a failed turn of a ``--multi-turn`` conversation ends
it, and its later turns are recorded unsent at once. ``settle`` then hands back, at once, the
free credits the worker no longer needs, by the same rule. A request waiting for a credit is
counted as due and unsent until it has one (the dispatcher of turns takes the credit first).

So the cap is never exceeded (a credit in flight between processes is used by nobody), and in a
closed-loop run the in-flight count stays at the cap: credits move, batched per event-loop pass,
only when a worker runs out of work or another worker waits. Returning credits and reporting
demand go through ``notify``, which the worker coalesces into one DEMAND message per pass; a
worker that keeps waiting reports it once, and again only after a grant.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class CreditGate:
    """Credits held by one worker, the requests waiting for one, and credits to hand back."""

    def __init__(
        self,
        credits: int,
        unsent: Callable[[], int],
        due_unsent: Callable[[], int],
        notify: Callable[[], None],
    ) -> None:
        self.free = credits
        self.unsent = unsent  # requests not yet released by the dispatcher
        self.due_unsent = due_unsent  # those of them that are due now
        self.lend = False  # the coordinator asked for idle credits
        self.returned = 0  # credits to hand back with the next DEMAND
        self.demand_reported = False  # the coordinator knows this worker waits
        self.waiters: deque[asyncio.Future[bool]] = deque()
        self.notify = notify

    def try_acquire(self) -> bool:
        """Take a free credit if there is one."""
        if self.free > 0:
            self.free -= 1
            return True
        return False

    async def acquire(self) -> bool:
        """Take a credit, waiting (and telling the coordinator) when none is free; False when
        ``wake_all`` let it go without one."""
        if self.try_acquire():
            return True
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        if not self.demand_reported:
            self.notify()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.release()  # granted just as it was cancelled: pass it on
            else:
                self.waiters.remove(waiter)
            raise

    def release(self) -> None:
        """A request ended: its credit goes to a waiter, back to the coordinator, or stays."""
        while self.waiters:
            if _resolve(self.waiters.popleft()):
                return
        if self.free >= self.unsent() or (self.lend and self.due_unsent() == 0):
            self.returned += 1
            self.notify()
        else:
            self.free += 1

    def grant(self, credits: int) -> None:
        """Credits from the coordinator (which now counts this worker as waiting less)."""
        if credits:
            self.demand_reported = False
        for _ in range(credits):
            self.release()

    def set_lend(self, lend: bool) -> None:
        """Start or stop lending idle credits; starting hands back those free now, unless this
        worker has requests due."""
        self.lend = lend
        if lend and self.free > 0 and self.due_unsent() == 0:
            self.returned += self.free
            self.free = 0
            self.notify()

    def settle(self) -> None:
        """Requests left to send went unsent (a failed turn ended its conversation, whose later
        turns are recorded at once): the free credits they would have used go back now, as a
        release would hand them back (more free than requests left, or lending with none due)."""
        spare = self.free - self.unsent()
        if self.lend and self.due_unsent() == 0:
            spare = self.free
        if spare > 0:
            self.free -= spare
            self.returned += spare
            self.notify()

    def wake_all(self) -> None:
        """Let every waiter go without a credit (the run is stopping)."""
        while self.waiters:
            _resolve(self.waiters.popleft(), granted=False)

    def take_returned(self) -> int:
        """The credits to hand back now (and forget them)."""
        returned, self.returned = self.returned, 0
        return returned


def _resolve(waiter: asyncio.Future[bool], granted: bool = True) -> bool:
    """Wake a waiter that is still waiting (``granted``: with a credit); whether it was."""
    if waiter.done():
        return False
    waiter.set_result(granted)
    return True
