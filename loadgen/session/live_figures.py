"""The live view's figures, computed in the coordinator from the record batches it receives
anyway: nothing new is asked of the workers.

Memory is bounded: recent TTFTs and ITLs sit in fixed numpy rings (value and the instant it was
seen), throughput comes from running totals sampled at each refresh, errors are counted by
kind. No per-request Python object is kept. All instants are ns after t0, the records' clock.

The last refresh (``figures(..., final=True)``) shows the run as its summary will: rates over
the run's duration (t0 to the last end, ``summarize``'s), TTFT and ITL percentiles over every
request when the rings held them all, errors by the summary's kinds.
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

# The report counts outcomes and errors by the same kinds, and lists them in the same order.
from loadgen.report.failures import (
    CANCELLED,
    FAILED,
    NOT_SENT,
    error_kind,
    error_outcome,
    most_frequent,
)
from workers.protocol import NOT_SENT_AT_DEADLINE

RATE_WINDOW_NS = 5_000_000_000  # req/s and tok/s "now": over the last 5 s
LATENCY_WINDOW_NS = 10_000_000_000  # rolling TTFT and ITL percentiles: over the last 10 s
TTFT_RING = 1 << 14
ITL_RING = 1 << 16  # at a higher event rate the window is the last 65,536 gaps instead


@dataclass(frozen=True)
class Percentiles:
    """p50 and p99 of a rolling sample, in ms."""

    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class WorkerLoad:
    """One worker's loop thread between two samples: % of the time on a CPU, % waiting for one."""

    cpu_pct: float
    wait_pct: float


@dataclass(frozen=True)
class LiveFigures:
    """What one refresh of the view shows."""

    elapsed_s: float
    total: int
    completed: int
    failed: int  # the summary's: not the cancelled or not sent (loadgen/report/failures.py)
    in_flight: int
    req_per_s: float
    output_tok_per_s: float
    ttft: Percentiles | None  # None: no request's first token in the window
    itl: Percentiles | None
    errors: list[tuple[str, int]] = field(default_factory=list)  # most frequent first
    workers: list[WorkerLoad] = field(default_factory=list)
    coordinator_cpu_pct: float | None = None
    run_s: float | None = None  # the final refresh: the rates are over this whole run (s)
    latencies_of_run: bool = False  # TTFT and ITL are of every request, not the last 10 s
    pooling: bool = False  # an answer of one instant: its TTFT is its E2EL, it has no tokens
    cancelled: int = 0  # in flight when the run stopped
    not_sent: int = 0  # never left the client
    deadline_s: float | None = None  # --duration: the progress is of the time, not the count

    @property
    def finished(self) -> int:
        """Requests reported: completed, failed, cancelled or not sent."""
        return self.completed + self.failed + self.cancelled + self.not_sent


class Ring:
    """The last ``capacity`` values pushed, each with the instant it belongs to."""

    def __init__(self, capacity: int) -> None:
        self.at_ns = np.zeros(capacity, dtype=np.int64)
        self.values = np.zeros(capacity, dtype=np.float64)
        self.pushed = 0

    def push(self, at_ns: np.ndarray, values: np.ndarray) -> None:
        """Add values (oldest first); the oldest in the ring give way."""
        capacity = len(self.values)
        if len(values) > capacity:
            at_ns, values = at_ns[-capacity:], values[-capacity:]
        slots = (self.pushed + np.arange(len(values))) % capacity
        self.at_ns[slots] = at_ns
        self.values[slots] = values
        self.pushed += len(values)

    def since(self, start_ns: int) -> np.ndarray:
        """The values held whose instant is ``start_ns`` or later."""
        held = min(self.pushed, len(self.values))
        return self.values[:held][self.at_ns[:held] >= start_ns]


def percentiles(values: np.ndarray) -> Percentiles | None:
    """p50 and p99 of values in seconds, as ms; None for an empty sample."""
    if len(values) == 0:
        return None
    p50, p99 = np.percentile(values, [50, 99])
    return Percentiles(float(p50) * 1e3, float(p99) * 1e3)


def rate_over(samples: deque[tuple[int, int, int]], window_ns: int) -> tuple[float, float]:
    """Requests and tokens per second between the newest sample and the oldest one within
    ``window_ns`` of it (the one before the newest when none is); each sample is (ns after
    t0, completed so far, tokens so far)."""
    if len(samples) < 2:
        return 0.0, 0.0
    now_ns, completed, tokens = samples[-1]
    then = samples[-2]
    for sample in samples:
        if now_ns - window_ns <= sample[0] < now_ns:
            then = sample
            break
    at_ns, completed_then, tokens_then = then
    if at_ns >= now_ns:
        return 0.0, 0.0
    span_s = (now_ns - at_ns) / 1e9
    return (completed - completed_then) / span_s, (tokens - tokens_then) / span_s


def in_flight(scheduled_ns: np.ndarray | DueSchedule, now_ns: int, finished: int, cap: int) -> int:
    """Requests due by the schedule (sorted) and not finished, never more than the cap: what
    the workers have sent unless they run behind their schedule."""
    if isinstance(scheduled_ns, DueSchedule):
        due = scheduled_ns.due(now_ns)
    else:
        due = int(np.searchsorted(scheduled_ns, now_ns, side="right"))
    return max(0, min(due - finished, cap))


class DueSchedule:
    """A sorted schedule that --duration's top-up blocks extend (each block's offsets sorted,
    none before the last block's): how many requests are due by an instant, without copying
    the schedule at each block. A block wholly due is kept as its count alone (the view asks
    at later and later instants), so a long run holds the blocks still ahead."""

    def __init__(self, scheduled_ns: np.ndarray) -> None:
        self.blocks: list[np.ndarray | None] = []  # None: wholly due, its offsets let go
        self.firsts: list[int] = []
        self.lasts: list[int] = []
        self.before: list[int] = []  # requests in the blocks before each one
        self.total = 0
        self.add(np.sort(scheduled_ns))

    def add(self, scheduled_ns: np.ndarray) -> None:
        """A block's offsets (sorted) join the end."""
        if len(scheduled_ns):
            self.blocks.append(scheduled_ns)
            self.firsts.append(int(scheduled_ns[0]))
            self.lasts.append(int(scheduled_ns[-1]))
            self.before.append(self.total)
            self.total += len(scheduled_ns)

    def due(self, now_ns: int) -> int:
        """Requests due by ``now_ns`` (asked at later and later instants: the blocks wholly
        due by one are let go)."""
        b = bisect.bisect_right(self.firsts, now_ns) - 1
        if b < 0:
            return 0
        for wholly in range(b):  # every block before b is wholly due: its count is enough
            self.blocks[wholly] = None
        end = self.before[b + 1] if b + 1 < len(self.before) else self.total
        block = self.blocks[b]
        if now_ns >= self.lasts[b] or block is None:
            return end
        return self.before[b] + int(np.searchsorted(block, now_ns, side="right"))


def load_between(
    before: dict[int, tuple[int, int, int]], after: dict[int, tuple[int, int, int]]
) -> list[WorkerLoad]:
    """Each worker's load between two readings of (ns on a CPU, ns waiting, when), by pid."""
    loads = []
    for pid, (run_ns, wait_ns, at_ns) in after.items():
        if pid not in before or at_ns <= before[pid][2]:
            continue
        run0, wait0, at0 = before[pid]
        span = at_ns - at0
        loads.append(WorkerLoad(100.0 * (run_ns - run0) / span, 100.0 * (wait_ns - wait0) / span))
    return loads


@dataclass(frozen=True)
class FoldedBatch:
    """What one batch of records adds to a live view's figures (the live view's and the
    Prometheus endpoint's alike)."""

    left_unsent: int  # requests --duration's deadline left unsent: no part of the run
    completed: int
    outcomes: np.ndarray  # the others' count by failures.OUTCOMES index
    failed_kinds: list[str]  # each failed request's error kind
    tokens: int  # output tokens of the completed (usage, else token events)
    last_end_ns: int
    first_ns: np.ndarray  # each completed stream's first token event (pooling: its answer)
    ttft_s: np.ndarray  # and its time to it (pooling: E2EL)
    itl_at_ns: np.ndarray  # each gap's end
    itl_s: np.ndarray


def fold_batch(
    batch: np.ndarray, events: np.ndarray, errors: dict[int, str], pooling: bool = False
) -> FoldedBatch:
    """One RECORDS batch (RECORD_DTYPE rows, their token events one request after the other,
    the errors by request index) as counts, tokens and latencies, in numpy."""
    unsent = [i for i, message in errors.items() if message == NOT_SENT_AT_DEADLINE]
    if unsent:  # no part of the run, as the summary counts it (they have no events)
        batch = batch[~np.isin(batch["index"], unsent)]
        errors = {i: m for i, m in errors.items() if m != NOT_SENT_AT_DEADLINE}
    ok = batch["success"].astype(bool)
    counts = batch["n_events"].astype(np.int64)
    succeeded = int(ok.sum())
    ended = [error_outcome(message) for message in errors.values()]
    outcomes = np.bincount(np.asarray(ended, np.int64), minlength=NOT_SENT + 1)
    outcomes[FAILED] += len(batch) - succeeded - len(ended)  # failed without a text
    reported = batch["completion_tokens"]  # else the events: the re-tokenized text's guess
    failed = [m for m, why in zip(errors.values(), ended, strict=True) if why == FAILED]
    none = np.zeros(0, dtype=np.int64)
    first_ns, ttft_s, itl_at_ns, itl_s = none, none / 1e9, none, none / 1e9
    if len(events):
        starts = np.cumsum(counts) - counts
        first = ok & (counts > 0)
        # Pooling: the first is the answer's last instant (its only one, as sent): E2EL.
        first_ns = events[starts[first] + (counts[first] - 1 if pooling else 0)]
        ttft_s = (first_ns - batch["sent_ns"][first]) / 1e9
        owner = np.repeat(np.arange(len(batch)), counts)
        gap = (owner[1:] == owner[:-1]) & ok[owner[1:]]
        itl_at_ns, itl_s = events[1:][gap], np.diff(events)[gap] / 1e9
    return FoldedBatch(
        left_unsent=len(unsent),
        completed=succeeded,
        outcomes=outcomes,
        failed_kinds=[error_kind(message) for message in failed],
        tokens=int(np.where(reported > 0, reported, counts)[ok].sum()),
        last_end_ns=int(batch["end_ns"].max()) if len(batch) else 0,
        first_ns=first_ns,
        ttft_s=ttft_s,
        itl_at_ns=itl_at_ns,
        itl_s=itl_s,
    )


class LiveFigureState:
    """What the batches so far say, kept small: counts, totals, rings of recent latencies."""

    def __init__(
        self,
        total: int,
        scheduled_ns: np.ndarray,
        cap: int | None,
        pooling: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        self.total = total
        self.deadline_s = deadline_s
        self.pooling = pooling
        self.schedule = DueSchedule(scheduled_ns)
        self.capped = cap is not None
        self.cap = cap or total
        self.completed = 0
        self.outcomes = np.zeros(NOT_SENT + 1, dtype=np.int64)  # by failures.OUTCOMES
        self.tokens = 0
        # Each worker's token events of answers still streaming (PROGRESS): counted in the
        # "now" output rate, so a run of long answers shows its rate before one has ended.
        self.streaming: dict[int, int] = {}
        self.errors: Counter[str] = Counter()
        self.ttft = Ring(TTFT_RING)
        self.itl = Ring(ITL_RING)
        self.last_end_ns = 0
        self.samples: deque[tuple[int, int, int]] = deque([(0, 0, 0)], maxlen=64)
        self.pending: list[tuple[np.ndarray, np.ndarray, dict[int, str]]] = []

    def add_requests(self, scheduled_ns: np.ndarray) -> None:
        """A --duration top-up block's requests (their offsets, sorted) join the run."""
        self.schedule.add(scheduled_ns)
        self.total += len(scheduled_ns)
        if not self.capped:
            self.cap = self.schedule.total

    def add_batch(self, batch: np.ndarray, events: np.ndarray, errors: dict[int, str]) -> None:
        """One RECORDS batch (RECORD_DTYPE rows, their token events one request after the
        other, the errors by request index), kept until the next ``fold``: one numpy pass
        over many batches costs a fraction of one pass per batch."""
        self.pending.append((batch, events, errors))

    def fold(self) -> None:
        """Take in the batches added since the last fold."""
        if not self.pending:
            return
        batches, event_lists, error_dicts = zip(*self.pending, strict=True)
        self.pending.clear()
        errors = {k: v for d in error_dicts for k, v in d.items()}
        self._take(np.concatenate(batches), np.concatenate(event_lists), errors)

    def _take(self, batch: np.ndarray, events: np.ndarray, errors: dict[int, str]) -> None:
        folded = fold_batch(batch, events, errors, self.pooling)
        self.total -= folded.left_unsent
        self.completed += folded.completed
        self.outcomes += folded.outcomes
        self.last_end_ns = max(self.last_end_ns, folded.last_end_ns)
        self.tokens += folded.tokens
        self.errors.update(folded.failed_kinds)
        self.ttft.push(folded.first_ns, folded.ttft_s)
        self.itl.push(folded.itl_at_ns, folded.itl_s)

    def figures(
        self,
        now_ns: int,
        workers: list[WorkerLoad] | None = None,
        coordinator_cpu_pct: float | None = None,
        final: bool = False,
    ) -> LiveFigures:
        """The view's figures at ``now_ns`` (ns after t0); records a throughput sample. The
        ``final`` ones are of the whole run, as its summary counts them."""
        self.fold()
        if now_ns > self.samples[-1][0]:
            self.samples.append(
                (now_ns, self.completed, self.tokens + sum(self.streaming.values()))
            )
        req_per_s, tok_per_s = rate_over(self.samples, RATE_WINDOW_NS)
        run_s = None
        if final:
            run_s = max(self.last_end_ns / 1e9, 1e-9)  # summarize's duration
            req_per_s, tok_per_s = self.completed / run_s, self.tokens / run_s
        whole = final and all(r.pushed <= len(r.values) for r in (self.ttft, self.itl))
        since = -1 if whole else now_ns - LATENCY_WINDOW_NS
        finished = self.completed + int(self.outcomes.sum())
        return LiveFigures(
            elapsed_s=max(now_ns, 0) / 1e9,
            total=self.total,
            deadline_s=self.deadline_s,
            completed=self.completed,
            failed=int(self.outcomes[FAILED]),
            cancelled=int(self.outcomes[CANCELLED]),
            not_sent=int(self.outcomes[NOT_SENT]),
            in_flight=in_flight(self.schedule, now_ns, finished, self.cap),
            req_per_s=req_per_s,
            output_tok_per_s=tok_per_s,
            ttft=percentiles(self.ttft.since(since)),
            itl=percentiles(self.itl.since(since)),
            errors=most_frequent(self.errors),
            workers=workers or [],
            coordinator_cpu_pct=coordinator_cpu_pct,
            run_s=run_s,
            latencies_of_run=whole,
            pooling=self.pooling,
        )
