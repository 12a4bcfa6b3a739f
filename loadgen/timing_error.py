"""A client's timing error against the mock server's records: the join, its statistics, the
verdict on a step and the table `loadgen calibrate` prints (pure: arrays in, figures and lines out).

The mock server (``--record-timings``) stamps, on ``time.perf_counter_ns()``, when each request
reached its handler and when each token event was written; loadgen's workers stamp, on the same
clock, when the bytes arrived. Per request: TTFT error = client TTFT − server TTFT, and event-gap
error = client gap − server gap for the k-th gap of a request on both sides. The steps that
produce both sides are loadgen/calibrate.py's; scripts/bench/accuracy.py joins other clients'
results the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from loadgen.mock.recorder import TimingRecords
from loadgen.report.run_summary import RunSummary
from loadgen.report.stats import sample_stats
from loadgen.wake_floor import WakeFloor

# How far a trusted step's p99 errors may exceed the machine's wake-up floor: room for a second
# wake-up (a TTFT error spans the mock waking for the request and the client for the first
# event) and for the work between the stamps (aiohttp writing the request, reading the reply).
MARGIN_MS = 1.0


# --- the data of both sides ---


@dataclass
class ClientRun:
    """The per-request figures of one client run (seconds): a detailed result's ``ttfts``,
    ``itls``, ``errors`` and ``start_times``."""

    ttft_s: np.ndarray  # float64 [N]
    itls_s: list[np.ndarray]  # per request, the gaps between its consecutive token events
    failed: np.ndarray  # bool [N]
    start_s: np.ndarray  # float64 [N], send instants in perf_counter seconds (same clock)

    @classmethod
    def from_result(cls, result: dict) -> ClientRun:
        """Take ``ttfts``, ``itls``, ``errors``, ``start_times`` from a detailed result JSON."""
        return cls(
            ttft_s=np.asarray(result["ttfts"], dtype=np.float64),
            itls_s=[np.asarray(gaps, dtype=np.float64) for gaps in result["itls"]],
            failed=np.array([bool(error) for error in result["errors"]], dtype=bool),
            start_s=np.asarray(result["start_times"], dtype=np.float64),
        )

    @classmethod
    def from_summary(cls, summary: RunSummary) -> ClientRun:
        """The figures of a run's summary, as its detailed result JSON gives them."""
        results, timings = summary.requests.results, summary.requests.timings
        return cls(
            ttft_s=timings.ttft_s.astype(np.float64),
            itls_s=timings.itl_lists(),
            failed=np.array([bool(error) for error in summary.errors.per_request], dtype=bool),
            start_s=results.sent_s + summary.identity.t0_s,
        )

    def events_of(self, i: int) -> np.ndarray:
        """Request i's token-event instants (perf_counter seconds): start + TTFT + gaps."""
        first = self.start_s[i] + self.ttft_s[i]
        return first + np.concatenate(([0.0], np.cumsum(self.itls_s[i])))


@dataclass
class Comparison:
    """Client against server for the requests of one step."""

    requests: int
    failed: int  # failed on the client's side
    unrecorded: int  # succeeded on the client's side but absent from the server's records
    count_mismatches: int  # recorded, but the two sides count different numbers of events
    events: int  # token events the server wrote for the step's requests
    span_s: float  # from the step's first arrival to its last event write, server side
    ttft_error_s: np.ndarray  # per successful recorded request: client TTFT − server TTFT
    gap_error_s: np.ndarray  # per paired gap: client gap − server gap
    # TTFT error = send leg + the first event's delivery delay:
    send_leg_s: np.ndarray  # server arrival − client send (includes the server's own queue)
    delivery_s: np.ndarray  # per paired event: client read instant − server write instant
    # Per request, as ttft_error_s (empty where the server's records lack the read stamps):
    first_delivery_s: np.ndarray | None = None  # the client's share: first read − first write
    read_wait_s: np.ndarray | None = None  # server read − client send: its loop reaching it
    parse_queue_s: np.ndarray | None = None  # server arrival − read: parse, handler dispatch

    @property
    def events_per_s(self) -> float:
        """Token events per second the server wrote over the step."""
        return self.events / self.span_s if self.span_s > 0 else math.nan


@dataclass
class Stats:
    """p50, p99 and max of a sample, in milliseconds (NaN when the sample is empty)."""

    p50_ms: float
    p99_ms: float
    max_ms: float


# --- the join and its statistics (pure) ---


def compare(client: ClientRun, server: TimingRecords, prefix: str) -> Comparison:
    """Join client request i with the server record of id ``f"{prefix}{i}"`` and compare them."""
    rows = {request_id: row for row, request_id in enumerate(server.request_ids.tolist())}
    ttft_errors: list[float] = []
    gap_errors: list[np.ndarray] = []
    send_legs: list[float] = []
    deliveries: list[np.ndarray] = []
    firsts: list[float] = []
    read_waits: list[float] = []
    parse_queues: list[float] = []
    read_ns = server.read_ns
    unrecorded = mismatches = events = 0
    first_arrival, last_event = math.inf, -math.inf
    for i in range(len(client.ttft_s)):
        row = rows.get(f"{prefix}{i}")
        if row is None:
            unrecorded += int(not client.failed[i])
            continue
        server_events = server.events_of(row)
        events += len(server_events)
        first_arrival = min(first_arrival, int(server.arrival_ns[row]))
        if len(server_events):
            last_event = max(last_event, int(server_events[-1]))
        if client.failed[i] or not len(server_events):
            continue
        server_ttft_s = (int(server_events[0]) - int(server.arrival_ns[row])) / 1e9
        ttft_errors.append(float(client.ttft_s[i]) - server_ttft_s)
        client_gaps = client.itls_s[i]
        server_gaps = np.diff(server_events) / 1e9
        mismatches += int(len(client_gaps) != len(server_gaps))
        k = min(len(client_gaps), len(server_gaps))
        gap_errors.append(client_gaps[:k] - server_gaps[:k])
        send_legs.append(int(server.arrival_ns[row]) / 1e9 - float(client.start_s[i]))
        client_events = client.events_of(i)
        k = min(len(client_events), len(server_events))
        deliveries.append(client_events[:k] - server_events[:k] / 1e9)
        firsts.append(float(client_events[0]) - int(server_events[0]) / 1e9)
        if read_ns is not None and int(read_ns[row]) > 0:
            read_waits.append(int(read_ns[row]) / 1e9 - float(client.start_s[i]))
            parse_queues.append((int(server.arrival_ns[row]) - int(read_ns[row])) / 1e9)
    span_ns = last_event - first_arrival if last_event > first_arrival else 0
    return Comparison(
        requests=len(client.ttft_s),
        failed=int(client.failed.sum()),
        unrecorded=unrecorded,
        count_mismatches=mismatches,
        events=events,
        span_s=span_ns / 1e9,
        ttft_error_s=np.array(ttft_errors, dtype=np.float64),
        gap_error_s=np.concatenate(gap_errors) if gap_errors else np.zeros(0),
        send_leg_s=np.array(send_legs, dtype=np.float64),
        delivery_s=np.concatenate(deliveries) if deliveries else np.zeros(0),
        first_delivery_s=np.array(firsts, dtype=np.float64),
        read_wait_s=np.array(read_waits, dtype=np.float64),
        parse_queue_s=np.array(parse_queues, dtype=np.float64),
    )


def stats_ms(values_s: np.ndarray) -> Stats:
    """p50, p99 and max of ``values_s`` (seconds) in milliseconds; NaN for an empty sample."""
    stats = sample_stats(values_s, [50, 99], scale=1000, empty=math.nan)
    return Stats(stats.at(50), stats.at(99), stats.max)


def error_stats(comparison: Comparison) -> tuple[Stats, Stats]:
    """TTFT error statistics (signed) and event-gap error statistics (absolute values)."""
    return stats_ms(comparison.ttft_error_s), stats_ms(np.abs(comparison.gap_error_s))


@dataclass(frozen=True)
class StepVerdict:
    """Whether one step's timings can be trusted, and the figures that decided it (ms)."""

    concurrency: int
    ttft_p99_ms: float
    gap_p99_ms: float
    bound_ms: float  # the most either p99 may be: the step's floor + a margin, or a fixed one
    lost: int  # requests that failed, or succeeded without a server record

    @property
    def trusted(self) -> bool:
        """No request lost and both p99 errors within the bound (NaN is never within)."""
        return (
            self.lost == 0
            and self.ttft_p99_ms <= self.bound_ms
            and self.gap_p99_ms <= self.bound_ms
        )


def judge(concurrency: int, comparison: Comparison, bound_ms: float) -> StepVerdict:
    """The verdict on one step against ``bound_ms``."""
    ttft, gap = error_stats(comparison)
    lost = comparison.failed + comparison.unrecorded
    return StepVerdict(concurrency, ttft.p99_ms, gap.p99_ms, bound_ms, lost)


def bound_of(floor: WakeFloor, threshold_ms: float | None, margin_ms: float = MARGIN_MS) -> float:
    """A step's bound: ``threshold_ms`` when given, else the step's floor p99 plus ``margin_ms``."""
    return threshold_ms if threshold_ms is not None else floor.p99_ms() + margin_ms


def _why_not(step: StepVerdict) -> str:
    if step.lost:
        return f"at {step.concurrency} streams {step.lost} requests failed or went unrecorded"
    return (
        f"at {step.concurrency} streams the p99 errors were {step.ttft_p99_ms:.2f} ms (TTFT) "
        f"and {step.gap_p99_ms:.2f} ms (event gap) against {step.bound_ms:.2f} ms allowed"
    )


def conclusion(steps: list[StepVerdict]) -> str:
    """The last line: up to how many streams the timings can be trusted, and what to do beyond."""
    ordered = sorted(steps, key=lambda step: step.concurrency)
    trusted = 0
    while trusted < len(ordered) and ordered[trusted].trusted:
        trusted += 1
    if not ordered:
        return "Conclusion: no step was measured."
    if trusted == len(ordered):
        return (
            f"Conclusion: trustworthy up to {ordered[-1].concurrency} streams on this machine, "
            f"the most tested; give --concurrency higher steps to find where it stops."
        )
    first_bad = ordered[trusted]
    again = [str(step.concurrency) for step in ordered[trusted + 1 :] if step.trusted]
    noise = f"; {', '.join(again)} passed again, so rerun to confirm" if again else ""
    if first_bad.lost:
        remedy = "see the mock server's stderr (--work-dir keeps it)"
    else:
        remedy = "add --workers or cores"
    if not trusted:
        return (
            f"Conclusion: not trustworthy at any tested step on this machine "
            f"({_why_not(first_bad)}{noise}); {remedy}, or test fewer streams."
        )
    return (
        f"Conclusion: trustworthy up to {ordered[trusted - 1].concurrency} streams on this "
        f"machine; beyond, {remedy} ({_why_not(first_bad)}{noise})."
    )


# --- the table ---

HEADER = (
    f"{'concurrency':>11} {'requests':>8} {'failed':>6} {'events/s':>9}   "
    f"{'TTFT error':^17}   {'gap |error|':^17}   {'send leg':^17}   {'delivery':^17}   "
    f"{'floor p99':^17}   {'bound':>6} {'trusted':>7}"
    + f"\n{'':>11} {'':>8} {'':>6} {'':>9}   "
    + "   ".join([f"{'p50':>8} {'p99':>8}"] * 4)
    + f"   {'timer':>8} {'datagram':>8}   {'(ms)':>6}"
)

LEGEND = f"""\
columns (ms; client − server on one clock, time.perf_counter_ns):
  TTFT error   client TTFT − server TTFT (from the request reaching the handler to the first
               event's write)
  gap |error|  |client gap − server gap| for each pair of consecutive token events
  send leg     server arrival − client send stamp: writing the request, the kernel, the mock
               reading it (with delivery, the two halves of the TTFT error)
  delivery     client read − server write, for every event
  floor p99    how late an idle process on this machine wakes for a timer and for a datagram,
               measured just before the step: no client's stamps are finer than this
  bound        the most a trusted step's p99 TTFT and gap errors may be: the larger floor p99
               + {MARGIN_MS:g} ms, or --threshold-ms
  trusted      no request failed or went unrecorded, and both p99 errors are within the bound"""


def format_row(
    concurrency: int,
    comparison: Comparison,
    floor: WakeFloor,
    verdict: StepVerdict,
    stopped: bool = False,
) -> str:
    """One table row: the step's size, throughput, error statistics, floor and verdict
    (``stopped``: the step's run was stopped early, and has none)."""
    ttft, gap = error_stats(comparison)
    send, delivery = stats_ms(comparison.send_leg_s), stats_ms(comparison.delivery_s)
    columns = "   ".join(f"{x.p50_ms:8.3f} {x.p99_ms:8.3f}" for x in (ttft, gap, send, delivery))
    return (
        f"{concurrency:>11} {comparison.requests:>8} {comparison.failed:>6} "
        f"{comparison.events_per_s:>9,.0f}   {columns}   "
        f"{floor.timer_p99_ms():8.3f} {floor.datagram_p99_ms():8.3f}   "
        f"{verdict.bound_ms:6.2f} {_trusted_column(verdict, stopped):>7}"
    )


def _trusted_column(verdict: StepVerdict, stopped: bool) -> str:
    if stopped:
        return "stopped"
    return "yes" if verdict.trusted else "no"


def notes(concurrency: int, comparison: Comparison) -> list[str]:
    """Warnings about a step's join, if any."""
    out = []
    if comparison.unrecorded:
        out.append(f"{comparison.unrecorded} succeeded requests have no server record")
    if comparison.count_mismatches:
        out.append(f"{comparison.count_mismatches} requests have different event counts")
    negative = int((comparison.ttft_error_s < 0).sum())
    if negative:
        out.append(f"{negative} requests have a client TTFT below the server's (impossible)")
    return [f"  note (concurrency {concurrency}): {text}" for text in out]
