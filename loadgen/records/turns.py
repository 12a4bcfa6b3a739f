"""When a conversation's later turn was meant to go (``--multi-turn``): its turn before it
ended, plus the think time.

A turn after the first is not on the run's schedule: the worker releases it when the turn
before it has ended and the think time has passed. That instant is the turn's intended one,
from which its send lag and the "from intended" figures count; its conversation's turns are
consecutive requests (loadgen/datasets/conversations.py lays them out so), so the turn before
request i is request i - 1.
"""

from __future__ import annotations

import numpy as np


def intended_ns(
    scheduled_ns: np.ndarray, end_ns: np.ndarray, turn: np.ndarray, think_ns: np.ndarray
) -> np.ndarray:
    """Each request's intended instant (ns after t0): its schedule's for a first turn (and any
    request of a run without conversations), the end of the turn before plus the think time for
    a later turn whose turn before ended; a later turn never sent keeps its conversation's
    start."""
    intended = np.array(scheduled_ns, dtype=np.int64, copy=True)
    later = np.flatnonzero(turn > 0)
    before = end_ns[later - 1]
    ended = before >= 0
    intended[later[ended]] = before[ended] + think_ns[later[ended]]
    return intended
