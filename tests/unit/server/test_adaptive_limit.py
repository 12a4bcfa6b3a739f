"""The server tokenizer's adaptive concurrency limit on its own, on a hand-driven clock; no
sockets."""

from __future__ import annotations

import pytest

from loadgen.server.adaptive_limit import AdaptiveLimit


def answer_quickly(limit: AdaptiveLimit, count: int, now: float = 0.0) -> None:
    for _ in range(count):
        limit.answered(limit.start(now), now + 0.001)


def test_the_limit_starts_small_and_grows_by_one_per_round_of_quick_answers() -> None:
    limit = AdaptiveLimit()
    assert limit.limit == 4
    answer_quickly(limit, 3)
    assert limit.limit == 4
    answer_quickly(limit, 1)
    assert limit.limit == 5
    answer_quickly(limit, 5)
    assert limit.limit == 6
    answer_quickly(limit, 100_000)
    assert limit.limit == 64  # never more


def test_a_broken_connection_halves_the_limit_once_per_round() -> None:
    limit = AdaptiveLimit(initial=16)
    tickets = [limit.start(0.0) for _ in range(16)]
    for ticket in tickets:  # all sent before the first failure: one decrease, not sixteen
        limit.failed(ticket, 0.01)
    assert limit.limit == 8
    limit.failed(limit.start(0.02), 0.03)
    assert limit.limit == 4
    assert limit.ceiling == 64  # errors do not cap the growth
    for _ in range(10):
        limit.failed(limit.start(0.1), 0.1)
    assert limit.limit == 1


def test_a_slow_answer_overtaken_by_later_calls_sets_a_ceiling() -> None:
    limit = AdaptiveLimit(initial=8)
    answer_quickly(limit, 8)
    assert limit.limit == 9
    tickets = [limit.start(1.0) for _ in range(9)]
    for ticket in tickets[:8]:
        limit.answered(ticket, 1.001)
    answer_quickly(limit, 3, now=1.002)  # later calls are served while the ninth waits ...
    assert limit.limit == 10
    limit.answered(tickets[8], 6.0)  # ... for a thread, as llama.cpp's queued connections do
    assert (limit.limit, limit.ceiling) == (5, 8)
    answer_quickly(limit, 10_000, now=7.0)
    assert limit.limit == 8  # grows back, but not past the ceiling


def test_a_pause_of_the_whole_server_only_halves_the_limit() -> None:
    limit = AdaptiveLimit(initial=8)
    answer_quickly(limit, 1)
    tickets = [limit.start(1.0) for _ in range(8)]
    for ticket in tickets:
        limit.answered(ticket, 3.0)
    assert (limit.limit, limit.ceiling, limit.decreases) == (4, 64, 1)


def test_a_call_stuck_in_flight_shrinks_the_limit_before_it_answers() -> None:
    limit = AdaptiveLimit(initial=6)
    answer_quickly(limit, 1)
    calls = [limit.start(1.0) for _ in range(6)]
    assert not limit.can_start(1.01)
    limit.answered(calls[0], 1.01)
    limit.answered(calls[5], 1.01)  # sent after the stuck ones, and answered
    assert limit.can_start(1.05) and limit.limit == 6
    assert not limit.can_start(2.0)  # calls[1] is stuck for 1 s, far past 0.1 s
    assert (limit.limit, limit.ceiling) == (1, 1)  # it was the second in flight when sent
    for ticket in calls[1:5]:  # their slow answers were counted already
        limit.answered(ticket, 2.5)
    assert limit.decreases == 1


def test_an_error_answer_only_frees_its_slot() -> None:
    limit = AdaptiveLimit()
    ticket = limit.start(0.0)
    assert limit.in_flight == 1
    limit.released(ticket, 30.0)
    assert (limit.in_flight, limit.limit, limit.decreases) == (0, 4, 0)


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="minimum <= initial <= maximum"):
        AdaptiveLimit(initial=100)
