"""A run's server figures, from the series scraped off the server's ``/metrics`` during it
(loadgen/records/server_series.py), by their common names (loadgen/server/metric_names.py):

- **KV-cache usage**, mean and peak over the scrapes, in % (``kv_cache_usage``, a fraction);
- **waiting requests**, their peak and the share of the scrapes that found any (the server
  queued requests for that part of the run);
- **preemptions**: how much the counter grew over the run (SGLang's retractions);
- **prefix-cache hit rate**: the growth of the hits counter over that of the lookups (vLLM's
  queries), or, where the server counts no lookups, of its prompt tokens (SGLang's).

The gauges' figures (KV cache, waiting) count the scrapes taken while the run went (after t0,
up to its last request's end): the scrape at t0 and the final one after the run find an idle
server, and would dilute a short run's means. The counters' growth counts every scrape, those
two included: their difference is the whole run's. A series the server did not export gives
no figure (None), never 0. Several label sets of one
name (a server with several engines) are one series: summed per scrape for counts and
counters, averaged for the KV cache. Pure functions of the series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loadgen.records.server_series import MetricSeries


@dataclass(frozen=True)
class ServerFigures:
    """The server's figures over a run (None where it exported no such series)."""

    kv_cache_usage_mean: float | None = None  # %
    kv_cache_usage_peak: float | None = None  # %
    requests_waiting_peak: float | None = None
    queued_share: float | None = None  # % of the scrapes that found requests waiting
    preemptions: float | None = None  # counted over the run
    prefix_cache_hit_rate: float | None = None  # % of the lookups (or prompt tokens)

    @property
    def empty(self) -> bool:
        """Whether no figure is known."""
        return all(value is None for value in vars(self).values())


def server_figures(
    series: Sequence[MetricSeries] | None,
    window_s: tuple[float, float] | None = None,
    run_s: float | None = None,
) -> ServerFigures | None:
    """The figures of a run's scraped series (None when none was scraped or none of them is a
    known server series); ``window_s``: only the scrapes from its start to its end (s after
    t0), a campaign's steady window; ``run_s``: the run's length, the gauges' scrapes those
    after t0 up to it (module docstring)."""
    if not series:
        return None
    if window_s is not None:
        series = [_within(s, *window_s) for s in series]
    during = series if run_s is None else [_within(s, 1e-9, run_s) for s in series]
    kv = _per_scrape(during, "kv_cache_usage", mean=True)
    waiting = _per_scrape(during, "requests_waiting", mean=False)
    figures = ServerFigures(
        kv_cache_usage_mean=None if kv is None else 100.0 * float(kv.mean()),
        kv_cache_usage_peak=None if kv is None else 100.0 * float(kv.max()),
        requests_waiting_peak=None if waiting is None else float(waiting.max()),
        queued_share=None if waiting is None else 100.0 * float((waiting > 0).mean()),
        preemptions=_growth(series, "preemptions"),
        prefix_cache_hit_rate=_hit_rate(series),
    )
    return None if figures.empty else figures


def _within(s: MetricSeries, start_s: float, end_s: float) -> MetricSeries:
    kept = (s.t_ns >= start_s * 1e9) & (s.t_ns <= end_s * 1e9)
    return MetricSeries(s.source, s.name, s.labels, s.t_ns[kept], s.values[kept])


def _named(series: Sequence[MetricSeries], name: str) -> list[MetricSeries]:
    """The series of ``name`` with samples, from one source: the first that has them (the
    server's /metrics comes before any --telemetry-url)."""
    found = [s for s in series if s.name == name and len(s.values)]
    return [s for s in found if s.source == found[0].source] if found else []


def _per_scrape(series: Sequence[MetricSeries], name: str, *, mean: bool) -> np.ndarray | None:
    """One value per scrape of ``name``: its label sets' values at that scrape summed (or
    averaged, ``mean``); None when no scrape had it."""
    named = _named(series, name)
    if not named:
        return None
    t_ns = np.concatenate([s.t_ns for s in named])
    values = np.concatenate([s.values for s in named])
    instants, index = np.unique(t_ns, return_inverse=True)
    sums = np.bincount(index, weights=values, minlength=len(instants))
    return sums / np.bincount(index, minlength=len(instants)) if mean else sums


def _growth(series: Sequence[MetricSeries], name: str) -> float | None:
    """How much the counter ``name`` grew over the scrapes (a counter reset by a restart
    counts from 0 again); None when no scrape had it."""
    named = _named(series, name)
    if not named:
        return None
    total = 0.0
    for s in named:
        values = s.values[np.argsort(s.t_ns, kind="stable")]
        steps = np.diff(values)
        total += float(np.where(steps >= 0, steps, values[1:]).sum())
    return total


def _hit_rate(series: Sequence[MetricSeries]) -> float | None:
    """The prefix cache's hits over its lookups during the run, in % (module docstring)."""
    hits = _growth(series, "prefix_cache_hits")
    if hits is None:
        return None
    lookups = _growth(series, "prefix_cache_queries")
    if lookups is None:
        lookups = _growth(series, "prompt_tokens")
    return 100.0 * hits / lookups if lookups else None


def figure_keys(figures: ServerFigures | None) -> dict[str, float | None]:
    """The figures under the metric table's keys (``Totals``' fields, summary.csv's columns)."""
    f = figures if figures is not None else ServerFigures()
    return {
        "server_kv_cache_mean_pct": f.kv_cache_usage_mean,
        "server_kv_cache_peak_pct": f.kv_cache_usage_peak,
        "server_waiting_peak": f.requests_waiting_peak,
        "server_queued_pct": f.queued_share,
        "server_preemptions": f.preemptions,
        "server_prefix_cache_hit_rate": f.prefix_cache_hit_rate,
    }


def window_keys(
    series: Sequence[MetricSeries] | None, start_s: float, end_s: float
) -> dict[str, float]:
    """The figures over a steady window (s after t0) under the metric table's keys, NaN where
    there is none (as the window's other figures)."""
    figures = server_figures(series, (start_s, end_s))
    return {k: math.nan if v is None else v for k, v in figure_keys(figures).items()}
