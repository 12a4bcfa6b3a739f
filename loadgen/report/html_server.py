"""The data of report.html's server panels: the series scraped from the server's ``/metrics``
(and ``--telemetry-url``) during a run, as lines on the run's clock.

Pure functions of ``MetricSeries`` (loadgen/records/server_series.py). A gauge is drawn as it
was sampled; a counter (a total since the server started) as its rate between two scrapes,
drawn at the later one (a drop, a restart, is a gap); a fraction as a percentage. Each panel
is drawn only where its series were recorded; a name with several label sets (two engines, two
GPUs) gets a line per set, named by the labels that tell them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.records.server_series import MetricSeries

MAX_LINES = 8  # per panel: a server with more engines or GPUs shows its first 8


@dataclass(frozen=True)
class ServerLine:
    """One line of a server panel: seconds after t0 and the values in the panel's unit."""

    label: str
    t_s: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class ServerPanel:
    """One server panel: its title, its y axis's unit and its lines."""

    title: str
    unit: str
    lines: list[ServerLine]


# (title, unit, [(common name, line label, how: gauge | counter | fraction)])
PANELS: tuple[tuple[str, str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Server: requests running and waiting", "requests",
     (("requests_running", "running", "gauge"), ("requests_waiting", "waiting", "gauge"))),
    ("Server: KV-cache usage", "%", (("kv_cache_usage", "KV cache used", "fraction"),)),
    ("Server: prefix-cache hit rate", "%",
     (("prefix_cache_hit_rate", "hit rate", "fraction"),)),
    ("Server: prompt and generation tokens per second", "tok/s",
     (("prompt_tokens", "prompt", "counter"), ("generation_tokens", "generation", "counter"))),
    ("Server: preemptions per second", "per s", (("preemptions", "preemptions", "counter"),)),
    ("GPU utilisation", "%", (("gpu_utilization_pct", "GPU", "gauge"),)),
    ("GPU power", "W", (("gpu_power_w", "GPU", "gauge"),)),
    ("GPU memory used", "MiB", (("gpu_memory_used_mib", "GPU", "gauge"),)),
    ("GPU temperature", "°C", (("gpu_temperature_c", "GPU", "gauge"),)),
)  # fmt: skip
HIT_RATE_PANEL = "Server: prefix-cache hit rate"


def counter_rate(t_s: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A counter's rate per second between consecutive samples, at the later instant; NaN
    where it went down (the server restarted) or no time passed."""
    t, v = np.asarray(t_s, dtype=float), np.asarray(totals, dtype=float)
    if len(t) < 2:
        return np.zeros(0), np.zeros(0)
    dt, dv = np.diff(t), np.diff(v)
    rate = np.divide(dv, dt, out=np.full(len(dt), np.nan), where=dt > 0)
    rate[dv < 0] = np.nan
    return t[1:], rate


def hit_rate_of(hits: MetricSeries, queries: MetricSeries) -> tuple[np.ndarray, np.ndarray]:
    """The prefix cache's hit rate (%) between two scrapes, from its hits and queries totals
    (vLLM V1's counters), at the later instant; NaN where no query came."""
    common, at_hits, at_queries = np.intersect1d(hits.t_ns, queries.t_ns, return_indices=True)
    h, q = hits.values[at_hits], queries.values[at_queries]
    if len(common) < 2:
        return np.zeros(0), np.zeros(0)
    dh, dq = np.diff(h), np.diff(q)
    rate = np.divide(100 * dh, dq, out=np.full(len(dq), np.nan), where=dq > 0)
    rate[(dh < 0) | (dq < 0)] = np.nan
    return common[1:] / 1e9, rate


def server_panels(series: Sequence[MetricSeries]) -> list[ServerPanel]:
    """The panels the recorded ``series`` fill, in ``PANELS``' order; none without them."""
    by_name: dict[str, list[MetricSeries]] = {}
    for one in series:
        by_name.setdefault(one.name, []).append(one)
    panels = []
    for title, unit, wanted in PANELS:
        lines = []
        for name, label, how in wanted:
            found = by_name.get(name, [])
            for one, suffix in zip(found, _label_suffixes(found), strict=True):
                t_s, values = one.t_ns / 1e9, one.values.astype(float)
                if how == "counter":
                    t_s, values = counter_rate(t_s, values)
                elif how == "fraction":
                    values = 100 * values
                if len(t_s):
                    lines.append(ServerLine(f"{label}{suffix}", t_s, values))
        if title == HIT_RATE_PANEL and not lines:
            lines = _hit_rate_lines(by_name)
        if lines:
            panels.append(ServerPanel(title, unit, lines[:MAX_LINES]))
    return panels


def _hit_rate_lines(by_name: dict[str, list[MetricSeries]]) -> list[ServerLine]:
    """The hit rate from the hits and queries counters of the same labels, where the server
    exports no rate of its own."""
    lines = []
    queries = {_key(q): q for q in by_name.get("prefix_cache_queries", [])}
    hits = by_name.get("prefix_cache_hits", [])
    for hit, suffix in zip(hits, _label_suffixes(hits), strict=True):
        if (query := queries.get(_key(hit))) is not None:
            t_s, rate = hit_rate_of(hit, query)
            if len(t_s):
                lines.append(ServerLine(f"hit rate{suffix}", t_s, rate))
    return lines


def _key(one: MetricSeries) -> tuple[Any, ...]:
    return (one.source, tuple(sorted(one.labels.items())))


def _label_suffixes(found: Sequence[MetricSeries]) -> list[str]:
    """What tells apart the series of one name: `` (engine=1)``; "" for a lone one."""
    if len(found) < 2:
        return [""] * len(found)
    keys = {k for one in found for k in one.labels}
    varying = sorted(k for k in keys if len({one.labels.get(k) for one in found}) > 1)
    sources = len({one.source for one in found}) > 1
    suffixes = []
    for one in found:
        parts = [f"{k}={one.labels.get(k, '')}" for k in varying]
        if sources:
            parts.append(one.source)
        suffixes.append(f" ({', '.join(parts)})" if parts else "")
    return suffixes


def why_no_panels(series: Sequence[MetricSeries] | None, asked: bool | None) -> str:
    """The line the page shows where a run has no server panel: why, as far as the records
    tell."""
    if series:
        names = sorted({one.name for one in series})[:6]
        return ("server metrics were recorded, but none of the series the page draws "
                f"(requests running or waiting, KV cache, prefix cache, tokens, preemptions): "
                f"{', '.join(names)}")  # fmt: skip
    if asked is False:
        return "server metrics were not recorded: the run had --no-server-metrics"
    if asked is None:
        return "server metrics were not recorded: these records predate the scraping"
    return "server metrics were not recorded: the server's /metrics did not answer before the run"
