"""``CreditGate.settle``: when a failed turn ends its conversation, the later turns are recorded
unsent at once, and the free credits they would have used go back to the coordinator at once
(issue 27, point 1); and the coordinator's pool gives a finished worker's credits to the others.
No sockets."""

from __future__ import annotations

import numpy as np

from loadgen.run.credit_pool import CreditMessage, CreditPool
from workers.conversations import Conversations
from workers.credits import CreditGate


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
