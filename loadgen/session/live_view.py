"""The live view of a timed run, drawn by the coordinator from the record batches it receives.

On a terminal (stderr, where upstream's bar went) a rich panel redrawn at most REFRESH_S apart;
otherwise one plain line at t0, every PLAIN_EVERY_S and at the end, with the same figures;
nothing with --disable-tqdm (and so with -q). Its lines hold ``%|`` as tqdm's bar did: scripts
and tests wait for that mark to know the run has started. Drawing runs on the coordinator's
event loop between batches; the workers are asked for nothing new.

Figures go by the metric table's names (``completed``, ``req/s``, ``TTFT``...) and errors by
the summary's kinds; the last frame, drawn as the run ends, is of the whole run, so it shows
the figures the run's summary prints after it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, TextIO

import numpy as np

from loadgen.fleet.collector import BatchObserver, RecordBatch
from loadgen.report.metric_table import FIGURE_BY_KEY, LATENCY_BY_KEY
from loadgen.session.host_cpu import HostSampler
from loadgen.session.live_figures import (
    LiveFigures,
    LiveFigureState,
    Percentiles,
    WorkerLoad,
    load_between,
)
from loadgen.terminal import printable

if TYPE_CHECKING:
    from rich.live import Live
    from rich.text import Text

REFRESH_S = 0.25  # at most 4 redraws a second
PLAIN_EVERY_S = 5.0
SHOWN_ERROR_KINDS = 4
BAR_WIDTH = 40
LABEL_WIDTH = 18
MIN_HEALTH_SPAN_NS = 100_000_000
# The metric table's names of the figures shown.
COMPLETED, FAILED, REQ_PER_S = (
    FIGURE_BY_KEY[key].title for key in ("completed", "failed", "request_throughput")
)
OUTPUT_TOKENS = FIGURE_BY_KEY["output_throughput"]  # generation only
TTFT, ITL, E2EL = (LATENCY_BY_KEY[key] for key in ("ttft", "itl", "e2el"))


def _pair(figures: Percentiles | None, places: int = 1) -> str:
    if figures is None:
        return "-"
    return f"{figures.p50_ms:,.{places}f} / {figures.p99_ms:,.{places}f} ms"


def _errors(figures: LiveFigures) -> str:
    if not figures.errors:
        return "none"
    shown = [f"{printable(kind)} ×{count:,}" for kind, count in figures.errors[:SHOWN_ERROR_KINDS]]
    rest = sum(count for _, count in figures.errors[SHOWN_ERROR_KINDS:])
    return ", ".join(shown) + (f", other ×{rest:,}" if rest else "")


def _stopped(figures: LiveFigures, sep: str) -> str:
    """The requests a stop left: cancelled in flight, never sent ("" when none)."""
    parts = [
        *([f"{figures.cancelled:,} cancelled"] if figures.cancelled else []),
        *([f"{figures.not_sent:,} not sent"] if figures.not_sent else []),
    ]
    return "".join(sep + part for part in parts)


def _health(figures: LiveFigures) -> str:
    parts = [
        f"worker {w} CPU {load.cpu_pct:.0f}% (waits {load.wait_pct:.0f}%)"
        for w, load in enumerate(figures.workers)
    ]
    if figures.coordinator_cpu_pct is not None:
        parts.append(f"coordinator CPU {figures.coordinator_cpu_pct:.0f}%")
    return ", ".join(parts) or "-"


def _done_pct(figures: LiveFigures) -> float:
    if figures.deadline_s:  # --duration: the share of the time, done when all have finished
        if figures.run_s is not None:
            return 100.0
        return min(100.0, 100.0 * figures.elapsed_s / figures.deadline_s)
    return 100.0 * figures.finished / max(figures.total, 1)


def _rates_span(figures: LiveFigures) -> str:
    """Over what the rates are: the last seconds, or the whole run (the final frame)."""
    return "now" if figures.run_s is None else f"run ({figures.run_s:,.2f} s)"


def _latencies_span(figures: LiveFigures) -> str:
    return "run" if figures.latencies_of_run else "last 10 s"


def _rates(figures: LiveFigures, sep: str) -> str:
    """req/s and output tok/s; the final frame's to the summary's 2 places."""
    now = figures.run_s is None
    requests = f"{figures.req_per_s:,.{1 if now else 2}f} {REQ_PER_S}"
    if not OUTPUT_TOKENS.views_for(figures.pooling):  # the summary has no such figure
        return requests
    return f"{requests}{sep}{figures.output_tok_per_s:,.{0 if now else 2}f} {OUTPUT_TOKENS.title}"


def _latencies(figures: LiveFigures, sep: str) -> str:
    """TTFT and ITL p50 / p99; the whole run's to the summary's 2 places."""
    places = 2 if figures.latencies_of_run else 1
    if figures.pooling:  # the answer's one instant: what the summary calls its E2EL
        return f"{E2EL.short} {_pair(figures.ttft, places)}"
    ttft, itl = _pair(figures.ttft, places), _pair(figures.itl, places)
    return f"{TTFT.short} {ttft}{sep}{ITL.short} {itl}"


def plain_line(figures: LiveFigures) -> str:
    """One line with the view's figures, for a log."""
    return (
        f"[{figures.elapsed_s:6.1f} s] {_done_pct(figures):3.0f}%| {figures.finished:,}/"
        f"{figures.total:,} finished: {figures.completed:,} {COMPLETED}, {figures.failed:,} "
        f"{FAILED}{_stopped(figures, ', ')}, {figures.in_flight:,} in flight | "
        f"{_rates_span(figures)} {_rates(figures, ', ')} | "
        f"{_latencies_span(figures)} p50/p99: {_latencies(figures, ', ')} | "
        f"errors: {_errors(figures)} | {_health(figures)}"
    )


def panel(figures: LiveFigures) -> Text:
    """The view on a terminal: a bar, then one row per kind of figure (plain styled text: a
    table of renderables costs rich several times more to draw)."""
    from rich.text import Text

    view = Text(no_wrap=False)
    done = figures.finished / max(figures.total, 1)
    if figures.deadline_s:
        done = _done_pct(figures) / 100.0
    filled = round(BAR_WIDTH * done)
    view.append(f"{'progress':<{LABEL_WIDTH}}", style="bold cyan")
    view.append("━" * filled, style="magenta")
    view.append("━" * (BAR_WIDTH - filled), style="grey23")
    view.append(
        f" {_done_pct(figures):3.0f}%| {figures.finished:,}/{figures.total:,}  "
        f"{figures.elapsed_s:.1f} s\n"
    )
    rows = [
        (
            "requests",
            f"{figures.completed:,} {COMPLETED}   {figures.failed:,} {FAILED}"
            f"{_stopped(figures, '   ')}   {figures.in_flight:,} in flight",
        ),
        (
            "now (5 s)" if figures.run_s is None else _rates_span(figures),
            _rates(figures, "   "),
        ),
        (
            f"p50 / p99 ({'run' if figures.latencies_of_run else '10 s'})",
            _latencies(figures, "    "),
        ),
        ("errors", _errors(figures)),
        ("client", _health(figures)),
    ]
    for label, value in rows:
        view.append(f"{label:<{LABEL_WIDTH}}", style="bold cyan")
        view.append(value, style="red" if label == "errors" and figures.errors else None)
        view.append("\n")
    view.rstrip()
    return view


class LiveView(BatchObserver):
    """Figures from each batch (``batch``), drawn from ``start`` (at t0) to ``close``."""

    def __init__(
        self,
        total: int,
        scheduled_ns: np.ndarray,
        cap: int | None,
        disabled: bool,
        host: HostSampler | None = None,
        stream: TextIO | None = None,
        pooling: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        self.state = LiveFigureState(total, scheduled_ns, cap, pooling, deadline_s)
        self.stream = stream if stream is not None else sys.stderr
        self.mode = "off" if disabled else "panel" if self.stream.isatty() else "plain"
        self.host = host
        self.t0_ns = 0
        self.live: Live | None = None
        self.task: asyncio.Task | None = None
        self.worker_readings: dict[int, tuple[int, int, int]] = {}
        self.worker_loads: list[WorkerLoad] = []
        self.cpu_reading = (time.perf_counter_ns(), time.process_time_ns())
        self.coordinator_cpu_pct: float | None = None

    def batch(self, batch: RecordBatch) -> bool:
        """Take one batch of records (the fan-out hands each on as it arrives)."""
        if self.mode != "off":
            self.state.add_batch(batch.rows, batch.events, batch.errors)
        return False

    def progress(self, worker: int, events: int) -> None:
        """A worker's token events of answers still streaming (its PROGRESS)."""
        self.state.streaming[worker] = events

    def added(self, scheduled_ns: np.ndarray) -> None:
        """A --duration top-up block's requests join the run's total."""
        self.state.add_requests(scheduled_ns)

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts at ``t0_ns``: draw at once, then on the running loop."""
        if self.mode == "off":
            return
        self.t0_ns = t0_ns
        self.cpu_reading = (time.perf_counter_ns(), time.process_time_ns())
        self.worker_readings = self._worker_readings()  # the sampler's first, taken at t0
        if self.mode == "panel":
            from rich.console import Console
            from rich.live import Live

            self.live = Live(
                console=Console(file=self.stream),
                auto_refresh=False,  # no drawing thread: the loop draws between batches
                redirect_stdout=sys.stdout.isatty(),  # a piped stdout stays the pipe's
                redirect_stderr=True,
            )
            self.live.start()
        self.draw()
        self.task = asyncio.get_running_loop().create_task(self._every_refresh())

    async def _every_refresh(self) -> None:
        """Fold the batches every REFRESH_S (so few wait at any time); draw the panel each
        time, a plain line every PLAIN_EVERY_S."""
        next_line = time.monotonic() + PLAIN_EVERY_S
        while True:
            await asyncio.sleep(REFRESH_S)
            if self.live is not None:
                self.draw()
            elif time.monotonic() >= next_line:
                next_line += PLAIN_EVERY_S
                self.draw()
            else:
                self.state.fold()

    def draw(self, final: bool = False) -> None:
        """Draw the figures as they are now (``final``: of the whole run, as it ends)."""
        workers, coordinator = self._health()
        now_ns = time.perf_counter_ns() - self.t0_ns
        figures = self.state.figures(now_ns, workers, coordinator, final=final)
        if self.live is not None:
            self.live.update(panel(figures), refresh=True)
        else:
            self.stream.write(plain_line(figures) + "\n")
            self.stream.flush()

    def _health(self) -> tuple[list[WorkerLoad], float | None]:
        """Worker loads since the last call (from the host sampler's readings, no new ones) and
        the coordinator's CPU %."""
        now_ns, cpu_ns = time.perf_counter_ns(), time.process_time_ns()
        wall0, cpu0 = self.cpu_reading
        if now_ns - wall0 < MIN_HEALTH_SPAN_NS:  # too short to say anything (the first draw)
            return self.worker_loads, self.coordinator_cpu_pct
        self.cpu_reading = (now_ns, cpu_ns)
        coordinator = self.coordinator_cpu_pct = 100.0 * (cpu_ns - cpu0) / (now_ns - wall0)
        if self.host is None:
            return [], coordinator
        readings = self._worker_readings()
        loads = load_between(self.worker_readings, readings)
        if loads or not self.worker_loads:  # no new reading since: the last loads still hold
            self.worker_readings, self.worker_loads = readings, loads
        return self.worker_loads, coordinator

    def _worker_readings(self) -> dict[int, tuple[int, int, int]]:
        """The host sampler's latest reading of each worker's loop thread."""
        if self.host is None:
            return {}
        return {pid: (w.run_ns, w.wait_ns, w.at_ns) for pid, w in self.host.last.items()}

    def close(self) -> None:
        """The run has ended: the panel's last frame stays on screen; a log gets a last plain
        line, so it shows how the run ended, not how it was a few seconds before: the figures of
        the whole run, those its summary shows."""
        if self.task is not None:
            self.task.cancel()
            self.task = None
            if self.live is None:
                self.draw(final=True)
        if self.live is not None:
            self.draw(final=True)
            self.live.stop()
            self.live = None
