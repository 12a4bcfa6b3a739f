"""accuracy.py's shares table: whose time a client's TTFT error is, and whether loadgen's verdict
bounds the client's part.

A TTFT error joined to the recording mock (client TTFT − server TTFT, the server's counted from
its handler's entry) is two legs, per request:

- the server's queue, the send leg: from the client's send stamp to the mock's handler. On
  loopback the bytes are in the mock's socket when the client's write returns, so this is the
  mock's loop reaching the read (``read wait``) then parsing and dispatching the request to its
  handler (``parse queue``): time a TTFT rightly includes, that the mock's TTFT leaves out;
- the client's share, the first event's delivery: from the mock's write of the first token to
  the client's read stamp, the wait for the client's loop (and the kernel's wake-up, which the
  floor client pays too).

loadgen's verdict states a client delay at p99; it holds where that is at least the client's
share at p99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from loadgen.timing_error import Comparison, stats_ms


@dataclass(frozen=True)
class Shares:
    """One client run's TTFT error and its two legs (ms), and loadgen's stated bound."""

    mode: str  # "paced C=64", "burst C=16"
    client: str
    error_p50: float
    error_p99: float
    client_p50: float  # first event's delivery
    client_p99: float
    server_p50: float  # send leg
    server_p99: float
    read_wait_p99: float  # of the send leg: the mock's loop reaching the request's bytes
    parse_queue_p99: float  # of the send leg: read to handler entry
    stated_ms: float = math.nan  # the verdict's stated delay p99 (NaN: not loadgen)
    loop_lag_p99: float = math.nan  # its workers' loop-lag p99

    @property
    def holds(self) -> str:
        """Whether the stated bound covers the client's share at p99 ("-": nothing stated)."""
        if math.isnan(self.stated_ms):
            return "-"
        return "yes" if self.stated_ms >= self.client_p99 else "no"


def shares(mode: str, client: str, comparison: Comparison, result: dict) -> Shares:
    """A run's shares from its join with the mock's records and its result JSON."""
    health = result.get("loadgen", {}).get("client") or {}
    stated = health.get("delay_p99_ms")
    error = stats_ms(comparison.ttft_error_s)
    first = stats_ms(_or_empty(comparison.first_delivery_s))
    send = stats_ms(comparison.send_leg_s)
    return Shares(
        mode=mode,
        client=client,
        error_p50=error.p50_ms,
        error_p99=error.p99_ms,
        client_p50=first.p50_ms,
        client_p99=first.p99_ms,
        server_p50=send.p50_ms,
        server_p99=send.p99_ms,
        read_wait_p99=stats_ms(_or_empty(comparison.read_wait_s)).p99_ms,
        parse_queue_p99=stats_ms(_or_empty(comparison.parse_queue_s)).p99_ms,
        stated_ms=float(stated) if stated is not None else math.nan,
        loop_lag_p99=float(health.get("loop_lag_p99_ms", math.nan)),
    )


def _or_empty(values: np.ndarray | None) -> np.ndarray:
    return values if values is not None else np.zeros(0)


_FIGURES = [f.name for f in fields(Shares) if f.type == "float"]


def median_shares(rows: list[Shares]) -> list[Shares]:
    """One row per (mode, client), in first-seen order: each figure's median over its runs."""
    groups: dict[tuple[str, str], list[Shares]] = {}
    for row in rows:
        groups.setdefault((row.mode, row.client), []).append(row)
    return [
        Shares(
            mode, client, **{name: _median([getattr(r, name) for r in runs]) for name in _FIGURES}
        )
        for (mode, client), runs in groups.items()
    ]


def _median(values: list[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return float(np.median(known)) if known else math.nan


HEADER = (
    f"{'mode':<12} {'client':<20} {'TTFT error p50/p99':>19}  {'client share p50/p99':>21}  "
    f"{'server queue p50/p99':>21} {'(read, parse p99)':>17}  {'stated':>7} {'loop p99':>8} "
    f"{'holds':>5}"
)


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def format_shares(rows: list[Shares]) -> list[str]:
    """The table's lines (ms)."""
    return [
        f"{row.mode:<12} {row.client:<20} {row.error_p50:8.2f} / {row.error_p99:8.2f}  "
        f"{row.client_p50:9.2f} / {row.client_p99:9.2f}  "
        f"{row.server_p50:9.2f} / {row.server_p99:9.2f} "
        f"({_ms(row.read_wait_p99):>6}, {_ms(row.parse_queue_p99):>6})  "
        f"{_ms(row.stated_ms):>7} {_ms(row.loop_lag_p99):>8} {row.holds:>5}"
        for row in rows
    ]


LEGEND = """\
shares (ms): TTFT error = client TTFT − the mock's (from its handler), per request, = server
  queue (the send leg: client send stamp → the mock's handler; read: its loop reaching the
  request's bytes, parse: reading them to the handler) + client share (the first token's
  delivery: the mock's write → the client's read stamp); stated: the verdict's client delay p99;
  loop p99: loadgen's loop-lag probe; holds: stated >= client share p99"""
