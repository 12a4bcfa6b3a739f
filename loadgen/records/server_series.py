"""The series scraped from the server's ``/metrics`` and ``--telemetry-url`` during a run.

A scraper (loadgen/server/scraper.py) hands over its samples in chunks; the records file keeps
each chunk as it comes (arrow_file.py: the custom metadata of an empty batch, key
``loadgen.series``), and ``series_of`` puts a run's chunks back together as one
``MetricSeries`` per source, name and labels. A chunk as JSON::

    {"source": "http://host:8000/metrics", "t_ns": [t, ...],
     "series": [{"name": "requests_running", "labels": {"engine": "0"}, "values": "<b64>"}]}

``t_ns`` are the scrapes' instants, ns after t0 on the run's clock (as the records' columns);
``values`` are little-endian float64, one per instant, NaN where the page lacked the series.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_CHUNK_SCRAPES = 100_000  # a chunk claiming more instants is refused, as a damaged file


class SeriesError(ValueError):
    """A chunk that is not one a scraper wrote (a damaged or forged records file)."""


@dataclass(frozen=True)
class MetricSeries:
    """One scraped series: where from, its (common or own) name and labels, and its samples."""

    source: str  # the URL scraped
    name: str  # a common name (loadgen/server/metric_names.py) or the exporter's own
    labels: dict[str, str]
    t_ns: np.ndarray  # int64, ns after t0
    values: np.ndarray  # float64, one per instant


def chunk_json(
    source: str, t_ns: list[int], samples: list[dict[tuple[str, Any], float]]
) -> dict[str, Any]:
    """A chunk of one source's scrapes: their instants and, per series seen in any of them,
    its values (NaN where a scrape lacked it)."""
    keys: dict[tuple[str, Any], None] = {}
    for scrape in samples:
        keys.update(dict.fromkeys(scrape))
    series = []
    for key in keys:
        values = np.array([scrape.get(key, np.nan) for scrape in samples], dtype="<f8")
        name, labels = key
        series.append(
            {
                "name": name,
                "labels": dict(labels),
                "values": base64.b64encode(values.tobytes()).decode(),
            }
        )
    return {"source": source, "t_ns": list(t_ns), "series": series}


def series_of(chunks: Iterable[Any]) -> list[MetricSeries]:
    """A run's chunks (parsed JSON, in file order) as one series per source, name and labels,
    in the order first seen; SeriesError when a chunk is not one a scraper wrote."""
    parts: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[tuple[Any, Any]]] = {}
    for chunk in chunks:
        source, t_ns, series = _checked_chunk(chunk)
        for entry in series:
            name, labels, values = _checked_entry(entry, len(t_ns))
            key = (source, name, tuple(sorted(labels.items())))
            parts.setdefault(key, []).append((t_ns, values))
    out = []
    for (source, name, pairs), pieces in parts.items():
        t_ns = np.concatenate([t for t, _ in pieces])
        values = np.concatenate([v for _, v in pieces])
        kept = ~np.isnan(values)
        out.append(MetricSeries(source, name, dict(pairs), t_ns[kept], values[kept]))
    return out


def _checked_chunk(chunk: Any) -> tuple[str, np.ndarray, list[Any]]:
    if not isinstance(chunk, dict):
        raise SeriesError("a server-metrics chunk is not a JSON object")
    source, t_ns, series = chunk.get("source"), chunk.get("t_ns"), chunk.get("series")
    if not isinstance(source, str) or not isinstance(t_ns, list) or not isinstance(series, list):
        raise SeriesError("a server-metrics chunk lacks its source, t_ns or series")
    if len(t_ns) > MAX_CHUNK_SCRAPES or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in t_ns
    ):
        raise SeriesError("a server-metrics chunk's t_ns are not instants")
    return source, np.array(t_ns, dtype=np.int64), series


def _checked_entry(entry: Any, n: int) -> tuple[str, dict[str, str], np.ndarray]:
    if not isinstance(entry, dict):
        raise SeriesError("a server-metrics series is not a JSON object")
    name, labels, encoded = entry.get("name"), entry.get("labels"), entry.get("values")
    if (
        not isinstance(name, str)
        or not isinstance(labels, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        or not isinstance(encoded, str)
        or len(encoded) > 4 * (8 * n + 2) // 3 + 4
    ):
        raise SeriesError("a server-metrics series lacks its name, labels or values")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise SeriesError(f"server metric {name}: its values are not base64") from None
    if len(raw) != 8 * n:
        raise SeriesError(f"server metric {name}: {len(raw) // 8} values for {n} instants")
    return name, labels, np.frombuffer(raw, dtype="<f8").astype(np.float64)
