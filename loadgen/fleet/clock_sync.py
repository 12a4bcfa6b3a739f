"""Each worker's clock offset from the coordinator's, from PING/PONG exchanges before t0.

A PING leaves the coordinator at ``sent_ns`` (its clock), the worker stamps ``worker_ns`` (its
clock) as it answers, and the PONG is back at ``received_ns``. The worker's stamp lies somewhere
in that round trip, so its clock minus the coordinator's is ``worker_ns - midpoint``, give or
take half the round trip. Of several exchanges the one with the shortest round trip bounds the
offset most tightly (NTP's minimum-delay filter): queueing on either side only lengthens a round
trip, and a short one had little of it.
"""

from __future__ import annotations

from dataclasses import dataclass

PING_ROUNDS = 16  # exchanges per worker before t0
PING_ROUND_TIMEOUT_S = 1.0  # a round waits this long for the slowest PONG


@dataclass(frozen=True)
class ClockOffset:
    """A worker's clock minus the coordinator's, and how far off that may be."""

    offset_ns: int
    uncertainty_ns: int  # half the round trip of the exchange used: the true offset is within
    round_trip_ns: int  # the shortest round trip seen
    samples: int


def estimate_offset(samples: list[tuple[int, int, int]]) -> ClockOffset:
    """The offset from (sent_ns, worker_ns, received_ns) exchanges: the minimum-round-trip one."""
    if not samples:
        raise ValueError("no PING/PONG exchange to estimate a clock offset from")
    sent, worker, received = min(samples, key=lambda s: s[2] - s[0])
    round_trip = received - sent
    return ClockOffset(
        offset_ns=worker - (sent + received) // 2,
        uncertainty_ns=(round_trip + 1) // 2,
        round_trip_ns=round_trip,
        samples=len(samples),
    )
