"""``CreditGate.settle``: when a failed turn ends its conversation, the later turns are recorded
unsent at once, and the free credits they would have used go back to the coordinator at once
(issue 27, point 1); and the coordinator's pool gives a finished worker's credits to the others.
And the dispatcher of turns takes a turn's credit before the turn leaves the due heap. No
sockets."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from loadgen.fleet.credit_pool import CreditMessage, CreditPool
from workers.conversations import END_MARK, HISTORY_MARK, Conversations
from workers.credits import CreditGate
from workers.precise_timer import PreciseTimer
from workers.worker import Worker


class Notes:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def one_conversation(turns: int) -> Conversations:
    """One conversation of ``turns`` turns, no think time, due at 0."""
    zeros = np.zeros(turns, np.int64)
    return Conversations(zeros, np.arange(turns), zeros, zeros, "")


def test_a_failed_turn_hands_back_the_credits_its_later_turns_would_have_used() -> None:
    conversations = one_conversation(4)
    notes = Notes()
    gate = CreditGate(
        credits=3,
        unsent=lambda: conversations.pending,
        due_unsent=lambda: conversations.due_count(10**12),
        notify=notes,
    )
    assert gate.try_acquire()
    k = conversations.pop()  # turn 0 goes, 3 turns left to send: the 2 free credits stay
    gate.release()  # turn 0 failed: its credit stays too (3 turns still counted unsent)
    assert (gate.free, gate.returned) == (3, 0)
    dropped = conversations.ended(k, b"", False, "", end_ns=5)  # a failed turn's body is not read
    assert dropped == [1, 2, 3] and conversations.pending == 0
    gate.settle()
    assert (gate.free, gate.take_returned(), notes.calls) == (0, 3, 1)


def test_settle_keeps_the_credits_still_needed() -> None:
    notes = Notes()
    unsent = [5]
    gate = CreditGate(credits=4, unsent=lambda: unsent[0], due_unsent=lambda: 1, notify=notes)
    gate.settle()  # 5 requests left, 4 free: nothing spare
    assert (gate.free, gate.returned, notes.calls) == (4, 0, 0)
    unsent[0] = 1  # a conversation of 4 turns ended early: 1 request left
    gate.settle()
    assert (gate.free, gate.returned, notes.calls) == (1, 3, 1)


def test_settle_while_lending_with_nothing_due_hands_back_every_free_credit() -> None:
    notes = Notes()
    gate = CreditGate(credits=2, unsent=lambda: 3, due_unsent=lambda: 0, notify=notes)
    gate.lend = True  # another worker waits; this one's turns wait for answers, none is due
    gate.settle()
    assert (gate.free, gate.take_returned()) == (0, 2)


def test_a_finished_workers_credits_go_to_a_waiting_worker() -> None:
    pool = CreditPool(cap=4, shard_sizes=[10, 10])
    assert pool.initial == [2, 2] and pool.free == 0
    pool.on_demand(1, returned=0, waiting=3)  # worker 1 waits
    # Worker 0 ends holding credits it never handed back (a grant that came after its last
    # request): the pool takes them back at its DONE and grants them to worker 1.
    messages = pool.on_lost(0)
    assert messages == [CreditMessage(1, 2, True)]  # it waits for 1 more: lending goes on
    assert pool.held == [0, 4] and pool.free == 0


# --- the dispatcher of turns: a turn waiting for a credit is due and unsent -------------------


class OneBody:
    """The part of a Shard the dispatcher of turns reads: each turn's marked body."""

    turns = None

    def body(self, k: int) -> bytes:
        return b'{"messages":[' + HISTORY_MARK + b'{"role":"user","content":"q"}' + END_MARK + b"]}"


def test_a_turn_waiting_for_a_credit_is_reported_waiting_and_gets_one() -> None:
    """Worker 0 (one conversation of 2 turns, 1 credit) and worker 1 (waiting for more) share a
    cap of 2 through the real CreditPool. Turn 0 ends well while lending is on, before turn 1 is
    due: its credit goes back, to worker 1. Turn 1 then waits for a credit, and its DEMAND must
    say so: when worker 1 ends, its credits come to worker 0 only if it is known to wait. (The
    turn used to leave the due heap before it had its credit: the DEMAND said nothing waited,
    and the worker waited for ever.)"""

    async def scenario() -> tuple[list[int], list[int]]:
        loop = asyncio.get_running_loop()
        pool = CreditPool(cap=2, shard_sizes=[2, 10])
        worker = Worker.__new__(Worker)  # no sockets: the pool is called directly
        worker._reset_run_state()
        zeros = np.zeros(2, np.int64)
        worker.conversations = Conversations(zeros, np.arange(2), zeros, zeros, "")
        shard = OneBody()
        worker.shard, worker.t0_ns = shard, time.perf_counter_ns()  # type: ignore[assignment]
        worker.timer = PreciseTimer(loop)
        waiting_said: list[int] = []

        def deliver(messages: list[CreditMessage]) -> None:  # CREDITS to worker 0
            for message in messages:
                if message.worker == 0:
                    gate.set_lend(message.lend)
                    gate.grant(message.grant)

        def send_demand() -> None:  # as Worker._send_demand, to the pool instead of a socket
            worker.demand_pending = False
            waiting = worker._due_unsent() if gate.waiters else 0
            gate.demand_reported = waiting > 0
            waiting_said.append(waiting)
            deliver(pool.on_demand(0, gate.take_returned(), waiting))

        def notify() -> None:
            if not worker.demand_pending:
                worker.demand_pending = True
                loop.call_soon(send_demand)

        gate = worker.gate = CreditGate(1, worker._unsent, worker._due_unsent, notify)
        deliver(pool.on_demand(1, returned=0, waiting=5))  # worker 1 waits: lending begins
        sent: list[int] = []

        async def request(*args: object) -> None:  # Worker._request's credit and turn steps
            k = int(args[3])  # type: ignore[call-overload]
            sent.append(k)
            await asyncio.sleep(0)
            gate.release()
            worker._turn_ended(shard, k, True, None, time.perf_counter_ns() - worker.t0_ns, None)  # type: ignore[arg-type]

        worker._request = request  # type: ignore[method-assign]
        tasks: set[asyncio.Task] = set()
        dispatcher = asyncio.create_task(
            worker._dispatch_turns(None, None, shard, {}, gate, tasks)  # type: ignore[arg-type]
        )
        for _ in range(100):  # every pass the exchange needs, and more
            await asyncio.sleep(0)
        deliver(pool.on_lost(1))  # worker 1 has ended: its credits go to whoever waits
        for _ in range(100):
            await asyncio.sleep(0)
        worker.stopping = True  # as a STOP does: whatever still waits lets go
        worker.timer.wake()
        gate.wake_all()
        await dispatcher
        worker.timer.close()
        return sent, waiting_said

    sent, waiting_said = asyncio.run(scenario())
    assert 1 in waiting_said  # turn 1, waiting for its credit, was reported
    assert sent == [0, 1]
