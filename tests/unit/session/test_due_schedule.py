"""The live view's count of due requests over --duration's blocks: as one sorted schedule."""

from __future__ import annotations

import numpy as np

from loadgen.session.live_figures import DueSchedule, in_flight


def test_blocks_count_as_the_schedule_they_make() -> None:
    rng = np.random.default_rng(0)
    whole = np.sort(rng.integers(0, 10**9, 500))
    due = DueSchedule(whole[:100])
    for start in range(100, 500, 37):
        due.add(whole[start : start + 37])
    assert due.total == 500
    # the view asks at later and later instants
    for now in [-1, 0, *sorted(rng.integers(0, 10**9, 50).tolist()), 10**9]:
        assert due.due(now) == np.searchsorted(whole, now, side="right")
        assert in_flight(due, now, 3, 10) == in_flight(whole, now, 3, 10)
    # every block but the last is wholly due by now: only its count is kept
    assert all(block is None for block in due.blocks[:-1]) and due.blocks[-1] is not None


def test_a_closed_loop_has_every_request_due_from_t0() -> None:
    due = DueSchedule(np.zeros(8, np.int64))
    due.add(np.zeros(8, np.int64))
    due.add(np.zeros(0, np.int64))
    assert due.due(0) == 16 and due.due(-1) == 0
