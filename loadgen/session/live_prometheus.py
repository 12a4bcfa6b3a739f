"""``--prometheus-port``: loadgen's own live metrics during a run, for Prometheus and Grafana.

``LiveMetrics`` is one of the run's observers (loadgen/fleet/collector.py): each batch of
records is folded into a few counters and three histograms with numpy (bucket counts by
``np.searchsorted``, no Python object per request), and prometheus_client's HTTP server,
bound to ``--prometheus-host`` (127.0.0.1 by default), serves them from its own thread at
``/metrics``. Every series carries the run's ``run`` label (``--label``, else the backend),
``model`` and ``point`` (a campaign's point and run, as ``rate=4 run=2``; empty for a single run).
A campaign keeps one endpoint open from its first run to its last (``LiveEndpoint.show``):

- ``loadgen_requests_total{outcome}``, with the report's outcomes (``completed``, ``failed``,
  ``cancelled``, ``not_sent``: loadgen/report/failures.py), ``loadgen_requests_in_flight``
  (due by the schedule and not finished, capped by --max-concurrency), and
  ``loadgen_output_tokens_total`` (of the finished requests, as the live view counts them);
- ``loadgen_streamed_tokens_total``: token events received so far, of finished answers and of
  those still streaming (the workers' PROGRESS), so a run of long answers shows its rate before
  one has ended;
- ``loadgen_ttft_seconds``, ``loadgen_itl_seconds`` and ``loadgen_e2el_seconds`` histograms
  of the successful requests;
- ``loadgen_client_cpu_seconds_total``: CPU of the coordinator and its local workers.

The server listens from before t0 until the run's records are all in; a port it cannot bind
fails the run before t0 in one line naming the flag.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from loadgen.fleet.collector import BatchObserver, RecordBatch
from loadgen.report.failures import COMPLETED, OUTCOMES
from loadgen.session.host_cpu import read_process
from loadgen.session.live_figures import DueSchedule, fold_batch, in_flight

# Bucket bounds in seconds: 1 ms to about 65 s, doubling, as latencies spread over decades.
BOUNDS = 0.001 * 2.0 ** np.arange(17)
LABELS = ["run", "model", "point"]  # point: a campaign's point and run, else ""


class Histogram:
    """Cumulative bucket counts and the sum of what was observed, in numpy."""

    def __init__(self) -> None:
        self.counts = np.zeros(len(BOUNDS) + 1, dtype=np.int64)  # the last: over every bound
        self.total = 0.0

    def observe(self, values: np.ndarray) -> None:
        """Take in a batch of observations (seconds)."""
        if len(values):
            where = np.searchsorted(BOUNDS, values, side="left")
            self.counts += np.bincount(where, minlength=len(self.counts))
            self.total += float(values.sum())

    def family(self, name: str, help_text: str, labels: list[str]) -> HistogramMetricFamily:
        """The histogram as prometheus_client exposes one: cumulative ``le`` buckets."""
        cumulative = np.cumsum(self.counts).tolist()
        buckets = [(f"{bound:g}", float(n)) for bound, n in zip(BOUNDS, cumulative, strict=False)]
        buckets.append(("+Inf", float(cumulative[-1])))
        family = HistogramMetricFamily(name, help_text, labels=LABELS)
        family.add_metric(labels, buckets, self.total)
        return family


class LiveMetrics(BatchObserver):
    """The run's live figures as Prometheus metrics; ``collect`` is prometheus_client's hook."""

    def __init__(
        self,
        run: str,
        model: str,
        scheduled_ns: np.ndarray,
        cap: int | None,
        worker_pids: list[int],
        pooling: bool = False,
        point: str = "",
    ) -> None:
        self.labels = [run, model, point]
        self.schedule = DueSchedule(scheduled_ns)
        self.capped = cap is not None
        self.cap = cap or len(scheduled_ns)
        self.worker_pids = worker_pids
        self.pooling = pooling
        self.t0_ns: int | None = None
        self.completed = 0
        self.outcomes = np.zeros(len(OUTCOMES), dtype=np.int64)  # by failures.OUTCOMES
        self.tokens = 0
        self.finished_events = 0  # token events of the finished requests
        self.streaming: dict[int, int] = {}  # each worker's events of answers still streaming
        self.streamed = 0  # the streamed-tokens counter's last value: it never goes back
        self.ttft = Histogram()
        self.itl = Histogram()
        self.e2el = Histogram()
        self.lock = threading.Lock()  # a page is of whole batches: collect runs in another thread

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts: in-flight requests are counted from here."""
        self.t0_ns = t0_ns

    def batch(self, batch: RecordBatch) -> bool:
        """Fold one batch into the counters and histograms (numpy over the batch)."""
        with self.lock:
            self._fold(batch.rows, batch.events, batch.errors)
        return False

    def _fold(self, rows: np.ndarray, events: np.ndarray, errors: dict[int, str]) -> None:
        folded = fold_batch(rows, events, errors, self.pooling)
        self.completed += folded.completed
        self.outcomes += folded.outcomes
        self.tokens += folded.tokens
        self.finished_events += int(rows["n_events"].sum())
        ok = rows["success"].astype(bool)
        self.e2el.observe((rows["end_ns"][ok] - rows["sent_ns"][ok]) / 1e9)
        if not self.pooling:  # a pooling answer's one instant is its E2EL, observed above
            self.ttft.observe(folded.ttft_s)
            self.itl.observe(folded.itl_s)

    def progress(self, worker: int, events: int) -> None:
        """A worker's token events of answers still streaming (its PROGRESS)."""
        with self.lock:
            self.streaming[worker] = events

    def added(self, scheduled_ns: np.ndarray) -> None:
        """A --duration top-up block's requests join the run."""
        with self.lock:
            self.schedule.add(scheduled_ns)
            if not self.capped:
                self.cap = self.schedule.total

    def streamed_tokens(self) -> int:
        """Token events so far, finished and streaming; never less than the last value read,
        since a batch can arrive before the PROGRESS that stops counting its requests."""
        self.streamed = max(self.streamed, self.finished_events + sum(self.streaming.values()))
        return self.streamed

    def collect(self) -> Iterator[Metric]:
        """The metrics now (called from the HTTP server's thread)."""
        with self.lock:
            return iter(list(self._families()))

    def _families(self) -> Iterator[Metric]:
        labels = self.labels
        requests = CounterMetricFamily(
            "loadgen_requests", "Requests finished, by outcome.", labels=[*LABELS, "outcome"]
        )
        for outcome, name in enumerate(OUTCOMES):
            count = self.completed if outcome == COMPLETED else int(self.outcomes[outcome])
            requests.add_metric([*labels, name], count)
        yield requests
        now = 0 if self.t0_ns is None else time.perf_counter_ns() - self.t0_ns
        finished = self.completed + int(self.outcomes.sum())
        flying = in_flight(self.schedule, now, finished, self.cap) if self.t0_ns is not None else 0
        yield _one(GaugeMetricFamily, "loadgen_requests_in_flight",
                   "Requests due and not finished.", labels, flying)  # fmt: skip
        yield _one(CounterMetricFamily, "loadgen_output_tokens",
                   "Output tokens of the successful requests.", labels, self.tokens)  # fmt: skip
        yield _one(CounterMetricFamily, "loadgen_streamed_tokens",
                   "Token events received, of finished answers and of those still streaming.",
                   labels, self.streamed_tokens())  # fmt: skip
        yield self.ttft.family("loadgen_ttft_seconds", "Time to first token.", labels)
        yield self.itl.family("loadgen_itl_seconds", "Inter-token latency.", labels)
        yield self.e2el.family("loadgen_e2el_seconds", "End-to-end latency.", labels)
        yield _one(CounterMetricFamily, "loadgen_client_cpu_seconds",
                   "CPU time of the coordinator and its local workers.", labels,
                   self.client_cpu_s())  # fmt: skip

    def client_cpu_s(self) -> float:
        """CPU seconds of this process and the local workers (read from /proc where it is)."""
        ticks = 0
        for pid in self.worker_pids:
            if (proc := read_process(pid)) is not None:
                ticks += proc.ticks
        return time.process_time() + ticks / os.sysconf("SC_CLK_TCK")


class LiveEndpoint:
    """prometheus_client's HTTP server from ``open`` to ``close``, serving the ``LiveMetrics``
    last shown: a run's, or each of a campaign's runs in turn, on one port that stays open
    between them (the last run's figures stay on the page until the next starts)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.server: Any = None
        self.metrics: LiveMetrics | None = None

    def show(self, metrics: LiveMetrics) -> None:
        """Serve ``metrics`` from now on."""
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's hook: the metrics shown, if any."""
        metrics = self.metrics
        return metrics.collect() if metrics is not None else iter(())

    def open(self) -> None:
        """Listen; OSError (the port is taken, the host is not this machine's) names both."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        try:
            self.server, _ = start_http_server(self.port, addr=self.host, registry=registry)
        except OSError as exc:
            raise OSError(
                f"--prometheus-port {self.port}: cannot listen on {self.host}:{self.port} "
                f"({exc.strerror or exc})"
            ) from None

    def close(self) -> None:
        """Stop listening."""
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()


def _one(
    kind: type[CounterMetricFamily] | type[GaugeMetricFamily],
    name: str,
    documentation: str,
    labels: list[str],
    value: float,
) -> Metric:
    """A metric family of one sample, under the run's ``labels``."""
    family = kind(name, documentation, labels=LABELS)
    family.add_metric(labels, value)
    return family
