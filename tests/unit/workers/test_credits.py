"""The global concurrency cap's credits: a worker's gate and the coordinator's pool; no sockets."""

from __future__ import annotations

import asyncio

import pytest

from loadgen.fleet.credit_pool import CreditMessage, CreditPool, initial_credits
from workers.credits import CreditGate


class Notes:
    """Counts the gate's notify calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def test_a_freed_credit_goes_to_the_waiting_request_first() -> None:
    async def scenario() -> list[str]:
        notes = Notes()
        gate = CreditGate(credits=1, unsent=lambda: 5, due_unsent=lambda: 4, notify=notes)
        order: list[str] = []
        assert gate.try_acquire()

        async def second() -> None:
            await gate.acquire()
            order.append("second sent")

        task = asyncio.create_task(second())
        await asyncio.sleep(0)
        assert notes.calls == 1  # waiting: the coordinator hears of it
        order.append("first ends")
        gate.release()
        await task
        assert gate.free == 0 and gate.returned == 0
        return order

    assert asyncio.run(scenario()) == ["first ends", "second sent"]


def test_a_credit_the_worker_cannot_use_goes_back() -> None:
    notes = Notes()
    gate = CreditGate(credits=2, unsent=lambda: 1, due_unsent=lambda: 1, notify=notes)
    assert gate.try_acquire() and gate.try_acquire()
    gate.release()  # one request left to send, no credit free: keep it
    assert (gate.free, gate.returned) == (1, 0)
    gate.release()  # one free already covers the one request left: hand it back
    assert (gate.free, gate.returned, notes.calls) == (1, 1, 1)
    assert gate.take_returned() == 1 and gate.returned == 0


def test_lending_hands_back_idle_credits_now_and_later() -> None:
    notes = Notes()
    gate = CreditGate(credits=3, unsent=lambda: 10, due_unsent=lambda: 0, notify=notes)
    assert gate.try_acquire()
    gate.set_lend(True)
    assert (gate.free, gate.returned) == (0, 2)
    gate.release()
    assert gate.returned == 3
    gate.set_lend(False)
    gate.grant(2)
    assert (gate.free, gate.returned) == (2, 3)


def test_wake_all_releases_waiters_when_the_run_stops() -> None:
    async def scenario() -> None:
        gate = CreditGate(credits=0, unsent=lambda: 3, due_unsent=lambda: 3, notify=Notes())
        waiter = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gate.wake_all()
        await asyncio.wait_for(waiter, 1)

    asyncio.run(scenario())


def test_initial_credits_split_the_cap_but_never_exceed_a_shard() -> None:
    assert initial_credits(10, [100, 100, 100]) == [4, 3, 3]
    assert initial_credits(10, [2, 100]) == [2, 5]


def test_pool_grants_free_credits_to_the_most_waiting_worker() -> None:
    pool = CreditPool(cap=10, shard_sizes=[2, 100])  # initial [2, 5]: 3 stay free
    assert pool.free == 3
    # The 3 do not cover 90 waiting: every worker is asked to lend its idle credits.
    assert pool.on_demand(1, returned=0, waiting=90) == [
        CreditMessage(0, 0, True),
        CreditMessage(1, 3, True),
    ]
    # Worker 0 runs out of work and returns its two credits: they go to worker 1.
    assert pool.on_demand(0, returned=2, waiting=0) == [CreditMessage(1, 2, True)]
    assert pool.free == 0


def test_pool_lends_only_while_someone_waits_and_nothing_is_free() -> None:
    pool = CreditPool(cap=4, shard_sizes=[50, 50])
    assert pool.on_demand(0, returned=0, waiting=3) == [
        CreditMessage(0, 0, True),
        CreditMessage(1, 0, True),
    ]
    # Worker 1 lends two idle credits: worker 0 gets them; it still waits for one more.
    assert pool.on_demand(1, returned=2, waiting=0) == [CreditMessage(0, 2, True)]
    # Worker 0 reports it no longer waits: lending stops, for everyone.
    assert pool.on_demand(0, returned=0, waiting=0) == [
        CreditMessage(0, 0, False),
        CreditMessage(1, 0, False),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_credits_are_conserved_under_random_traffic(seed: int) -> None:
    """Simulate gates and the pool exchanging messages instantly: held + free == cap always."""
    import random

    rng = random.Random(seed)
    cap, sizes = 7, [40, 25, 3]
    pool = CreditPool(cap, sizes)
    unsent = list(sizes)
    gates = [
        CreditGate(c, lambda w=w: unsent[w], lambda: rng.randrange(3), lambda: None)
        for w, c in enumerate(pool.initial)
    ]
    in_flight = [0] * len(gates)
    for _ in range(2000):
        w = rng.randrange(len(gates))
        gate = gates[w]
        if in_flight[w] and rng.random() < 0.5:
            in_flight[w] -= 1
            gate.release()
        elif unsent[w] and gate.try_acquire():
            in_flight[w] += 1
            unsent[w] -= 1
        waiting = unsent[w] if gate.free == 0 and unsent[w] else 0
        for message in pool.on_demand(w, gate.take_returned(), waiting):
            gates[message.worker].set_lend(message.lend)
            gates[message.worker].grant(message.grant)
        for g in gates:  # lending may have freed credits elsewhere; they reach the pool
            returned = g.take_returned()
            if returned:
                pool.free += returned
        held = sum(in_flight) + sum(g.free for g in gates)
        assert held + pool.free == cap
        assert sum(in_flight) <= cap


def test_a_worker_with_due_requests_does_not_lend() -> None:
    due = [2]
    gate = CreditGate(credits=2, unsent=lambda: 10, due_unsent=lambda: due[0], notify=Notes())
    assert gate.try_acquire()
    gate.set_lend(True)
    assert (gate.free, gate.returned) == (1, 0)  # its dispatcher is about to use it
    gate.release()
    assert (gate.free, gate.returned) == (2, 0)
    due[0] = 0
    assert gate.try_acquire()
    gate.release()  # nothing due now: lend it
    assert (gate.free, gate.returned) == (1, 1)


def test_a_waiting_worker_reports_its_demand_once_until_granted() -> None:
    async def scenario() -> int:
        notes = Notes()
        gate = CreditGate(credits=0, unsent=lambda: 10, due_unsent=lambda: 10, notify=notes)
        first = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gate.demand_reported = True  # the worker's DEMAND went out
        second = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert notes.calls == 1
        gate.grant(1)
        await first
        third = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gate.wake_all()
        await asyncio.gather(second, third)
        return notes.calls

    assert asyncio.run(scenario()) == 2  # once more after the grant
