"""The coordinator's side of the global ``--max-concurrency`` cap (workers/credits.py is the
workers' side): the credits no worker holds, and which workers have requests waiting for one.

Every DEMAND a worker sends hands back the credits it cannot use and says how many of its due
requests wait. Free credits go to the waiting workers, most waiting first. While some worker
still waits and no credit is free, every worker is asked to lend its idle credits; once nobody
waits, lending stops. Credits are conserved: held + in transit + free = the cap. A worker that
is lost mid-run (its host or process gone) holds its credits no more: every credit it was given
and did not hand back is free again, for the workers that remain.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.schedule import split_concurrency


@dataclass(frozen=True)
class CreditMessage:
    """What to tell one worker: credits granted, and whether to lend idle ones."""

    worker: int
    grant: int
    lend: bool


class CreditPool:
    """Free credits of the cap and the waiting requests each worker last reported."""

    def __init__(self, cap: int, shard_sizes: list[int]) -> None:
        self.initial = initial_credits(cap, shard_sizes)
        self.free = cap - sum(self.initial)
        self.waiting = [0] * len(shard_sizes)
        self.held = list(self.initial)  # given to each worker and not handed back
        self.lending = False

    def on_demand(self, worker: int, returned: int, waiting: int) -> list[CreditMessage]:
        """Take a worker's DEMAND; return the CREDITS messages to send."""
        self.free += returned
        self.held[worker] -= returned
        self.waiting[worker] = waiting
        return self._grant()

    def on_lost(self, worker: int) -> list[CreditMessage]:
        """A worker is gone with the credits it held: free them; the CREDITS messages to send."""
        self.free += self.held[worker]
        self.held[worker] = 0
        self.waiting[worker] = 0
        return self._grant()

    def _grant(self) -> list[CreditMessage]:
        """Free credits to the waiting workers, most waiting first; lending while some wait."""
        grants = [0] * len(self.waiting)
        while self.free > 0:
            most = max(range(len(self.waiting)), key=self.waiting.__getitem__)
            if self.waiting[most] <= 0:
                break
            granted = min(self.free, self.waiting[most])
            grants[most] += granted
            self.held[most] += granted
            self.waiting[most] -= granted
            self.free -= granted
        lend = self.free == 0 and any(n > 0 for n in self.waiting)
        lend_changed = lend != self.lending
        self.lending = lend
        return [
            CreditMessage(w, grants[w], lend)
            for w in range(len(grants))
            if grants[w] or lend_changed
        ]


def initial_credits(cap: int, shard_sizes: list[int]) -> list[int]:
    """Each worker's share of the cap at START, never more than it has requests."""
    shares = split_concurrency(cap, len(shard_sizes))
    return [min(share, size) for share, size in zip(shares, shard_sizes, strict=True)]
