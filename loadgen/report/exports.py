"""Per-request rows of a run's summary, as ``loadgen report --format csv|jsonl`` writes them.

One row per request, in request order, with the timings the report computes (TTFT, E2EL and
the ITLs measured from the send instant, as upstream) and the token counts it uses; the
columns are documented in docs/records.md ("Per-request exports").
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import Any, TextIO

import numpy as np

from loadgen.records.event_source import EventSource
from loadgen.report.failures import OUTCOMES, error_kind
from loadgen.report.run_summary import RunSummary

COLUMNS = (
    "index",
    "request_id",
    "worker",
    "status",
    "success",
    "outcome",
    "scheduled_ms",
    "released_ms",
    "sent_ms",
    "end_ms",
    "client_queue_ms",
    "connect_ms",
    "ttft_ms",
    "e2el_ms",
    "events",
    "itl_mean_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "itl_max_ms",
    "prompt_tokens",
    "output_tokens",
    "resent",
    "truncated",
    "error_kind",
    "error",
)
STEADY_COLUMN = "in_steady_window"  # with --warmup-s or --cooldown-s: the window keeps it
FORMATS = ("csv", "jsonl")


def itl_stats_ns(event_ns: np.ndarray, event_offsets: np.ndarray) -> dict[str, np.ndarray]:
    """Each request's mean, p50, p99 and max gap between consecutive token events, in ns;
    NaN for a request with fewer than two events. Percentiles interpolate linearly, as
    numpy's default (and the report's)."""
    counts = np.diff(event_offsets)
    n = len(counts)
    gap_counts = np.maximum(counts - 1, 0)
    owner = np.repeat(np.arange(n), counts)
    within = owner[1:] == owner[:-1]  # gaps that do not straddle two requests
    gaps = np.diff(event_ns).astype(np.float64)[within]
    gaps = gaps[np.lexsort((gaps, owner[1:][within]))]  # sorted within each request
    starts = np.concatenate(([0], np.cumsum(gap_counts)[:-1])).astype(np.int64)
    has = gap_counts > 0
    out = {name: np.full(n, np.nan) for name in ("mean", "p50", "p99", "max")}
    if not has.any():
        return out
    first, count = starts[has], gap_counts[has]
    out["mean"][has] = np.add.reduceat(gaps, first) / count
    out["max"][has] = gaps[first + count - 1]
    for name, q in (("p50", 50), ("p99", 99)):
        position = (count - 1) * (q / 100)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, count - 1)
        below, above = gaps[first + low], gaps[first + high]
        out[name][has] = below + (above - below) * (position - low)
    return out


def event_figures_ns(events: EventSource) -> dict[str, np.ndarray]:
    """Each request's first and last token event (ns; 0 without one) and ``itl_stats_ns``'
    figures, from the events a chunk of requests at a time (each request's figures are its
    own: the same as over the whole array)."""
    counts_all = np.asarray(events.counts, dtype=np.int64)
    n = len(counts_all)
    out = {name: np.full(n, np.nan) for name in ("mean", "p50", "p99", "max")}
    out["first"] = np.zeros(n, np.int64)
    out["last"] = np.zeros(n, np.int64)
    for start, end, values in events.chunks():
        counts = counts_all[start:end]
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        has = counts > 0
        out["first"][start:end][has] = values[offsets[:-1][has]]
        out["last"][start:end][has] = values[offsets[1:][has] - 1]
        for name, figures in itl_stats_ns(values, offsets).items():
            out[name][start:end] = figures
    return out


def _ms(ns: np.ndarray) -> list[float | None]:
    """Nanoseconds as milliseconds to the microsecond; None where NaN (no such value)."""
    values = np.round(np.asarray(ns, dtype=np.float64) / 1e6, 3)
    return [None if v != v else v for v in values.tolist()]  # v != v: NaN


def _where(valid: np.ndarray, ns: np.ndarray) -> np.ndarray:
    return np.where(valid, ns, np.nan)


def request_rows(summary: RunSummary, request_id_prefix: str | None) -> list[dict[str, Any]]:
    """One row per request of a run's summary (keys: COLUMNS); None where the request has no
    such value (never sent, no token event, failed)."""
    requests, results = summary.requests, summary.requests.results
    records, offsets, n = requests.rows, results.event_offsets, results.num_requests
    counts = np.diff(offsets)
    sent_ns, released_ns = records["sent_ns"], records["released_ns"]
    sent, released = sent_ns >= 0, released_ns >= 0
    ok = records["success"].astype(bool)
    timed = sent & (counts > 0)
    itl = event_figures_ns(requests.events)
    first_ns, last_ns = itl["first"], itl["last"]
    columns: dict[str, list[Any]] = {
        "index": list(range(n)),
        "request_id": [
            None if request_id_prefix is None else f"{request_id_prefix}{i}" for i in range(n)
        ],
        "worker": [w if w >= 0 else None for w in requests.worker.tolist()],
        "status": records["status"].tolist(),
        "success": ok.tolist(),
        "outcome": [OUTCOMES[o] for o in summary.errors.outcome.tolist()],
        "scheduled_ms": _ms(requests.scheduled_ns),
        "released_ms": _ms(_where(released, released_ns)),
        "sent_ms": _ms(_where(sent, sent_ns)),
        "end_ms": _ms(_where(records["end_ns"] >= 0, records["end_ns"])),
        "client_queue_ms": _ms(_where(sent & released, sent_ns - released_ns)),
        "connect_ms": _ms(_where(sent, records["connect_ns"])),
        "ttft_ms": _ms(_where(timed, first_ns - sent_ns)),
        "e2el_ms": _ms(_where(timed & ok, last_ns - sent_ns)),
        "events": counts.tolist(),
        "itl_mean_ms": _ms(itl["mean"]),
        "itl_p50_ms": _ms(itl["p50"]),
        "itl_p99_ms": _ms(itl["p99"]),
        "itl_max_ms": _ms(itl["max"]),
        "prompt_tokens": results.prompt_lens.tolist(),  # the server's count, else the dataset's
        "output_tokens": np.asarray(results.output_lens).tolist(),
        "resent": records["resent"].astype(bool).tolist(),
        "truncated": records["truncated"].astype(bool).tolist(),
        "error_kind": [error_kind(e) if e else None for e in summary.errors.per_request],
        "error": [error or None for error in summary.errors.per_request],
    }
    names: tuple[str, ...] = COLUMNS
    if summary.steady is not None:  # --warmup-s, --cooldown-s: one more column, last
        columns[STEADY_COLUMN] = summary.steady.window.kept.tolist()
        names = (*COLUMNS, STEADY_COLUMN)
    table = zip(*(columns[name] for name in names), strict=True)
    return [dict(zip(names, values, strict=True)) for values in table]


def write_csv(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    """The rows as CSV with a header line (COLUMNS, and STEADY_COLUMN where the rows have
    it); an empty field for None, true/false for booleans."""
    rows = list(rows)
    names = list(rows[0]) if rows else list(COLUMNS)
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _csv_value(value) for key, value in row.items()})


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def write_jsonl(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    """The rows as JSON Lines: one object per line, null for None."""
    for row in rows:
        out.write(json.dumps(row) + "\n")


def write_rows(rows: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    """The rows in ``fmt`` (one of FORMATS)."""
    (write_csv if fmt == "csv" else write_jsonl)(rows, out)
