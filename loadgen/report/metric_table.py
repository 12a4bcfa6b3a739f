"""The metric table: each figure a run's report shows, declared once.

A ``Figure`` is one number of the run (a count or a throughput); a ``Latency`` is one sample's
statistics (mean, median, std and the asked-for percentiles, in ms). Each row names its key
stem (the result JSON's key, and the attribute of ``RunSummary`` that holds it), its console
label, its unit, the views it appears in, and whether a generation run, a pooling run or both
report it. The console's "Serving Benchmark Result" block and the result JSON's metric keys are
made from these rows in their order (``FIGURES`` is in the JSON's order, upstream's; ``console``
gives the console's; report.html's run table is made from the console's blocks); summary.csv
and report.html's campaign table take the rows whose views name ``campaign``, and the
campaign's console table, narrower, those of them that also name ``campaign table`` (a latency
by its p99); the result JSON's ``loadgen.server`` the rows naming ``loadgen json`` (loadgen's
own figures, so upstream's keys stay upstream's). A row added here appears in every view it
names, and in no other (tests/unit/report/test_metric_table.py). Where room is short (the
campaign's tables, the live view) a figure goes by its ``title`` and a latency statistic by its
``column``, so the live view, the final summary and the campaign's tables name each figure
alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The views a row may name.
CONSOLE = "console"  # the console summary (and report.html's summary table, made from it)
JSON = "json"  # the result JSON (and the Python API's Result.metrics, which is it)
CAMPAIGN = "campaign"  # a campaign's summary.csv (and report.html's campaign table)
# The campaign's console table at its end: some of summary.csv's columns (so a row naming it
# names ``campaign`` too), a latency by its TABLE_STATISTIC.
CAMPAIGN_TABLE = "campaign table"
# The result JSON's ``loadgen.server`` object: loadgen's own figures, not upstream's keys.
LOADGEN_JSON = "loadgen json"
VIEWS = (CONSOLE, JSON, CAMPAIGN, CAMPAIGN_TABLE, LOADGEN_JSON)
TABLE_STATISTIC = "p99"

RunKind = Literal["generation", "pooling", "both"]
# When the console shows a figure: always, with a tokenizer (token counts need one), when the
# run has a value (None: not measured, as goodput without --goodput), when it is not zero, or
# when the rate is finite.
ShownWhen = Literal["always", "tokenizer", "known", "nonzero", "finite"]


@dataclass(frozen=True)
class Figure:
    """One number of a run: ``key`` is the result JSON's key and the attribute of the summary's
    ``totals`` (or ``settings``, see ``of``) that holds it."""

    key: str
    label: str  # the console row's label, upstream's, colon included
    unit: str
    views: frozenset[str]
    runs: RunKind = "both"
    spec: str = ".2f"  # the console row's format ("" for a count)
    shown: ShownWhen = "always"
    console: int | None = None  # the row's place in the console block (None: not shown there)
    after_detail: bool = False  # in the JSON after the per-request lists (upstream's order)
    of: Literal["totals", "settings"] = "totals"
    pooling_views: frozenset[str] | None = None  # a pooling run's views, where they differ
    short: str | None = None  # its name where room is short: a table's column, the live view

    @property
    def title(self) -> str:
        """Its name in a table's header and the live view: ``short``, else the console's
        label without its colon (so a row added without one is still named)."""
        return self.short or self.label.rstrip(":")

    def views_for(self, pooling: bool) -> frozenset[str]:
        """The views this figure appears in for a pooling or a generation run (none when that
        kind of run does not report it)."""
        if self.runs == ("generation" if pooling else "pooling"):
            return frozenset()
        if pooling and self.pooling_views is not None:
            return self.pooling_views
        return self.views


@dataclass(frozen=True)
class Latency:
    """One latency sample of a run, reported as mean, median, std and percentiles in ms: JSON
    keys ``mean_{key}_ms``..., a console block titled ``title`` with rows ``Mean {short} (ms)``."""

    key: str
    short: str
    title: str
    views: frozenset[str]
    tokens: bool = False  # generation with a tokenizer only (TTFT, TPOT, ITL)
    concurrency: bool = False  # only with --max-concurrency (the client's own queue)
    paced: bool = False  # only at a finite request rate
    unit: str = "ms"

    def column(self, statistic: str) -> str:
        """Its name in a table's header and the live view: ``p99 TTFT (ms)``."""
        return f"{statistic} {self.short} ({self.unit})"


def _views(*names: str) -> frozenset[str]:
    return frozenset(names)


ALL = _views(CONSOLE, JSON, CAMPAIGN)
TABLED = ALL | {CAMPAIGN_TABLE}
SHOWN = _views(CONSOLE, JSON)
SERVER = _views(CAMPAIGN, LOADGEN_JSON)

# In the result JSON's order (upstream's, after its run settings); ``console`` is the order of
# the "Serving Benchmark Result" block's rows. The first two are the run's settings, not
# measured: the console shows them in the block, the JSON and summary.csv among the run's
# settings (upstream's "max_concurrency" and "request_rate", a campaign point's columns).
FIGURES: tuple[Figure, ...] = (
    Figure("max_concurrency", "Maximum request concurrency:", "requests", ALL, spec="",
           shown="known", console=3, of="settings", short="max concurrency"),
    Figure("request_rate", "Request rate configured (RPS):", "req/s", ALL, shown="finite",
           console=4, of="settings", short="request rate (req/s)"),
    Figure("duration", "Benchmark duration (s):", "s", SHOWN, console=5, short="duration (s)"),
    Figure("completed", "Successful requests:", "requests", ALL, spec="", console=1,
           short="completed"),
    Figure("failed", "Failed requests:", "requests", ALL, spec="", console=2, short="failed",
           pooling_views=_views(CONSOLE, CAMPAIGN)),  # upstream's pooling JSON has no "failed"
    # A stopped run's other requests (report/failures.py): the JSON has them, with the kinds,
    # under loadgen.errors (upstream's keys stay upstream's); the console after the table.
    Figure("cancelled", "Cancelled requests:", "requests", _views(CAMPAIGN), spec="",
           short="cancelled"),
    Figure("not_sent", "Requests not sent:", "requests", _views(CAMPAIGN), spec="",
           short="not sent"),
    Figure("total_input_tokens", "Total input tokens:", "tokens", SHOWN, spec="", console=6,
           short="input tokens"),
    Figure("total_output_tokens", "Total generated tokens:", "tokens", SHOWN,
           runs="generation", spec="", shown="tokenizer", console=7, short="output tokens"),
    Figure("total_input_sequences", "Total input sequences:", "inputs", _views(JSON),
           runs="pooling", short="input sequences"),
    Figure("request_throughput", "Request throughput (req/s):", "req/s", TABLED, console=8,
           short="req/s"),
    Figure("request_goodput", "Request goodput (req/s):", "req/s", TABLED, runs="generation",
           shown="known", console=10, short="goodput req/s"),
    Figure("input_sequence_throughput", "Input throughput (inputs/s):", "inputs/s", SHOWN,
           runs="pooling", console=9, short="inputs/s"),
    Figure("output_throughput", "Output token throughput (tok/s):", "tok/s", TABLED,
           runs="generation", shown="tokenizer", console=11, short="output tok/s"),
    Figure("total_token_throughput", "Total token throughput (tok/s):", "tok/s", SHOWN,
           shown="tokenizer", console=15, short="total tok/s"),
    Figure("max_output_tokens_per_s", "Peak output token throughput (tok/s):", "tok/s", SHOWN,
           runs="generation", shown="tokenizer", console=12, after_detail=True,
           short="peak output tok/s"),
    Figure("max_concurrent_requests", "Peak concurrent requests:", "requests", SHOWN,
           runs="generation", console=13, after_detail=True, short="peak in flight"),
    Figure("rtfx", "RTFx (Inverse Real-Time Factor):", "audio s/s", SHOWN, runs="generation",
           shown="nonzero", console=14, after_detail=True, short="RTFx"),
    # The server's own count (loadgen/report/prefix_cache.py): a campaign's, not upstream's.
    Figure("prefix_cache_hit_rate", "Prefix cache hit rate (%):", "%",
           _views(CAMPAIGN, CAMPAIGN_TABLE),
           runs="generation", shown="known", short="prefix cache hit %"),
    # The server's own figures from its /metrics scraped during the run
    # (loadgen/report/server_figures.py): None where it exported no such series.
    Figure("server_kv_cache_mean_pct", "Server KV-cache usage, mean (%):", "%", SERVER,
           shown="known", short="server KV mean %"),
    Figure("server_kv_cache_peak_pct", "Server KV-cache usage, peak (%):", "%", SERVER,
           shown="known", short="server KV peak %"),
    Figure("server_waiting_peak", "Server waiting requests, peak:", "requests", SERVER,
           spec="", shown="known", short="server waiting peak"),
    Figure("server_queued_pct", "Server queued requests (% of the run):", "%", SERVER,
           shown="known", short="server queued %"),
    Figure("server_preemptions", "Server preemptions:", "requests", SERVER, spec="",
           shown="known", short="server preemptions"),
    Figure("server_prefix_cache_hit_rate", "Server prefix cache hit rate (%):", "%", SERVER,
           shown="known", short="server prefix hit %"),
)  # fmt: skip

# In upstream's order of its metric blocks and keys; --percentile-metrics selects among them.
LATENCIES: tuple[Latency, ...] = (
    Latency("ttft", "TTFT", "Time to First Token", TABLED, tokens=True),
    Latency("tpot", "TPOT", "Time per Output Token (excl. 1st token)", ALL, tokens=True),
    Latency("itl", "ITL", "Inter-token Latency", TABLED, tokens=True),
    Latency("e2el", "E2EL", "End-to-end Latency", ALL),
    Latency("client_queue_time", "Client Queue Time", "Client-side Queueing", SHOWN,
            concurrency=True),
    Latency("e2el_including_client_queue", "E2EL incl. Client Queue",
            "Queue-inclusive End-to-end Latency", SHOWN, concurrency=True, paced=True),
)  # fmt: skip
LATENCY_BY_KEY = {latency.key: latency for latency in LATENCIES}
FIGURE_BY_KEY = {figure.key: figure for figure in FIGURES}


def figures_in(view: str, pooling: bool) -> tuple[Figure, ...]:
    """The measured figures (the run's settings left out: a view writes those among the
    run's settings) a view shows for a pooling or a generation run, in the table's order."""
    return tuple(f for f in FIGURES if f.of == "totals" and view in f.views_for(pooling))


def console_figures(pooling: bool) -> tuple[Figure, ...]:
    """The rows of the console's block, settings included, in its order."""
    shown = [f for f in FIGURES if CONSOLE in f.views_for(pooling) and f.console is not None]
    return tuple(sorted(shown, key=lambda f: f.console or 0))


def latencies_in(view: str) -> tuple[Latency, ...]:
    """The latencies a view shows, in the table's order."""
    return tuple(latency for latency in LATENCIES if view in latency.views)
