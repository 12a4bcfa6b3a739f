"""``RunSummary``: everything a run's report shows, computed once from its records, formatted
nowhere. ``summarize.summarize`` builds it; the console (``summary.console_lines``), the result
JSON (``result_json.result_json``) and the other views render it.

Field names follow the result JSON where it has the figure (``totals.request_throughput`` is
``"request_throughput"``), so the metric table (``metric_table``) names each one once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.records.event_source import EventSource
from loadgen.records.server_series import MetricSeries
from loadgen.report.metrics import MetricStats, RequestResults, Timings
from loadgen.report.prefix_cache import PrefixCacheHits
from loadgen.report.stats import SampleStats
from loadgen.report.steady import SteadyWindow
from loadgen.report.verdict import ClientHealth
from workers.protocol import ConnectionStats


@dataclass(frozen=True)
class Settings:
    """What the report reads of the run's configuration, and all it reads of it: built once
    where a report is made (``report.settings.settings_of``)."""

    backend: str
    label: str | None
    num_prompts: int
    metadata: dict[str, Any] | None
    request_rate: float
    burstiness: float
    max_concurrency: int | None
    ramp_up_strategy: str | None
    ramp_up_start_rps: int | None
    ramp_up_end_rps: int | None
    self_timed: bool  # requests went at a timed trace's own instants
    pooling: bool
    tokenizer: bool  # token counts are known (not --skip-tokenizer-init)
    save_detailed: bool
    metrics: tuple[str, ...]  # --percentile-metrics: the latencies whose statistics are reported
    percentiles: tuple[float, ...]  # --metric-percentiles
    goodput: dict[str, float] | None  # --goodput's SLOs (ms)
    server_url: str  # as given: a view hides its secrets (records.redact.redact_url)
    endpoint: str
    mock: bool  # the embedded mock served the run
    fail_on: tuple[str, ...]  # --fail-on's conditions
    probes: bool  # --probe-request-rate above 0: probes ran beside the traffic
    steady_state: bool  # a campaign's summary counts each run's steady state only
    duration: float | None = None  # --duration (s): the run was bounded by time
    duration_grace_s: float = 30.0  # --duration-grace-s: how long requests in flight could finish
    warmup_s: float = 0.0  # --warmup-s: the steady window starts this long after t0
    cooldown_s: float = 0.0  # --cooldown-s: and ends this long before the run's end
    seed: int = 0  # the --seed its prompts and schedule were drawn with (a campaign's: per run)
    duration_block: int | None = None  # --duration's requests per block; None: one draw
    search: str | None = None  # --search: rate or concurrency (a campaign's runs)
    slo: tuple[str, ...] = ()  # --slo's conditions (a campaign's)


@dataclass(frozen=True)
class Identity:
    """Which run this was: the model, the loadgen that ran it, its start, its context."""

    model_id: str
    tokenizer_id: str | None
    loadgen_version: str
    num_workers: int
    schedule_sha256: str
    t0_s: float  # the run's origin on the coordinator's clock (start_times are after it)
    t0_wall: str  # the same instant on the wall clock, ISO 8601
    context: dict[str, Any]  # command line, dataset settings, environment (run_context)


@dataclass(frozen=True)
class Totals:
    """The run's counts and throughputs (the metric table's figures); None where a run of its
    kind has no such figure (pooling has no output tokens) or it was not measured."""

    duration: float  # seconds, from t0 to the last end
    completed: int
    failed: int  # upstream's: failed, not cancelled or not sent (loadgen/report/failures.py)
    total_input_tokens: int
    request_throughput: float
    total_token_throughput: float
    total_output_tokens: int | None = None
    request_goodput: float | None = None  # None without --goodput
    output_throughput: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    rtfx: float | None = None
    total_input_sequences: int | None = None  # pooling only
    input_sequence_throughput: float | None = None  # pooling only
    cancelled: int = 0  # in flight when the run stopped
    not_sent: int = 0  # never left the client
    prefix_cache_hit_rate: float | None = None  # % of prompt tokens; None: not reported
    # The server's, from its /metrics during the run (report/server_figures.py); None where
    # it exported no such series
    server_kv_cache_mean_pct: float | None = None
    server_kv_cache_peak_pct: float | None = None
    server_waiting_peak: float | None = None
    server_queued_pct: float | None = None  # % of the scrapes that found requests waiting
    server_preemptions: float | None = None  # over the run
    server_prefix_cache_hit_rate: float | None = None  # % of the lookups


@dataclass(frozen=True)
class Connections:
    """What the connections did: those the server closed or stopped reusing, requests re-sent,
    new connections opened during the run, streams cut short, text cut to the cap."""

    stats: ConnectionStats
    new_during_run: SampleStats  # connect times (ms) of the requests that opened one
    truncated_streams: int
    text_capped: int


@dataclass(frozen=True)
class Errors:
    """The requests' errors: one per request ("" where it had none), each request's outcome
    (failures.OUTCOMES), and the failed requests counted by kind (cancelled and not sent are
    counted apart, in ``Totals``)."""

    per_request: list[str]
    by_kind: dict[str, int]
    outcome: np.ndarray  # int8 per request, an index into failures.OUTCOMES

    @property
    def first(self) -> str:
        """The first request's error in request order ("" when none failed)."""
        return next((e for e in self.per_request if e), "")


@dataclass(frozen=True)
class Decoding:
    """The server's speculative-decoding and diffusion figures over the run (None without)."""

    spec_decode: dict[str, Any] | None
    diffusion: dict[str, Any] | None


@dataclass(frozen=True)
class Client:
    """The client's health and its verdict on its own timing."""

    health: ClientHealth
    send_lag_ms: SampleStats  # p50, p99 and max of release minus scheduled instant
    verdict: str  # the console's last line and the result JSON's last key


@dataclass(frozen=True)
class Ending:
    """How the run ended: interrupted, workers lost, where its workers ran."""

    interrupted: bool
    worker_problems: list[str]
    hosts: list[dict[str, Any]] | None

    @property
    def caveat(self) -> str | None:
        """Why the report covers only part of the run: its workers' problems, or an
        interruption; None when it covers all of it."""
        if self.worker_problems:
            return "; ".join(self.worker_problems)
        if self.interrupted:
            return "the run was interrupted: the results cover the requests that finished"
        return None


@dataclass(frozen=True)
class Requests:
    """Per-request values the detailed JSON, the per-request exports, the plots, the campaign
    and compare read."""

    results: RequestResults
    timings: Timings
    generated_texts: list[str]
    server_queue_s: np.ndarray  # NaN where the server did not say
    server_ttft_s: np.ndarray
    end_s: np.ndarray  # each request's end after t0 (s)
    rows: np.ndarray  # the run's records as the workers reported them (RECORD_DTYPE)
    worker: np.ndarray  # the worker that reported each request; -1 when none did
    scheduled_ns: np.ndarray  # each request's scheduled instant after t0
    events: EventSource  # the token events' instants (ns after t0), a chunk at a time


@dataclass(frozen=True)
class Steady:
    """The steady window of --warmup-s and --cooldown-s: which requests it keeps, and the
    campaign figures counted over them (``steady.window_metrics``' keys)."""

    warmup_s: float
    cooldown_s: float
    window: SteadyWindow
    metrics: dict[str, float]


@dataclass(frozen=True)
class TimeBound:
    """A run bounded by --duration: its deadline and grace, and what the deadline did."""

    duration_s: float
    grace_s: float
    prepared: int  # requests prepared (the upper bound)
    not_sent: int  # of them, left unsent by the deadline: no part of the run
    cancelled: int  # requests in flight when the grace ran out, cancelled
    # unpaced: every prepared request was sent, the last this many s after t0 (None otherwise)
    ran_out_s: float | None = None
    block_size: int | None = None  # requests per block, prepared as the run went (None: one)
    block_seeds: list[int] | None = None  # the seed each block drew its prompts with
    # not sent for another reason than the deadline (a stop, a worker gone): part of the run
    not_sent_otherwise: int = 0


@dataclass(frozen=True)
class RunSummary:
    """A run's report, computed: figures, samples, notes' facts and the verdict."""

    settings: Settings
    identity: Identity
    totals: Totals
    latencies: dict[str, MetricStats]  # the reported ones, in the metric table's order
    intended: dict[str, MetricStats] | None  # from the intended send instant (paced runs)
    connections: Connections
    errors: Errors
    decoding: Decoding
    probes: dict[str, Any] | None  # upstream's probe_* keys, when probes succeeded
    client: Client
    ending: Ending
    multi_turn: dict[str, Any] | None  # per turn and per conversation (--multi-turn)
    rps_change_events: list[dict[str, Any]] | None  # a ramp-up's, upstream's keys
    requests: Requests
    gates: list[str]  # the --fail-on conditions breached, one line each
    steady: Steady | None = None  # None without --warmup-s or --cooldown-s
    time_bound: TimeBound | None = None  # None without --duration
    prefix_cache: PrefixCacheHits | None = None  # the server's, where it reports them
    # The series scraped off the server's /metrics and --telemetry-url during the run (None
    # when none was): the campaign counts its steady window's server figures from them
    server_series: list[MetricSeries] | None = None
