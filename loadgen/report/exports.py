"""Per-request rows of a run's records, as ``loadgen report --format csv|jsonl`` writes them.

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

from loadgen.records.model import RunRecords

COLUMNS = (
    "index",
    "request_id",
    "worker",
    "status",
    "success",
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
    "error",
)
FORMATS = ("csv", "jsonl")


def _ms(ns: float) -> float:
    """Nanoseconds as milliseconds, to the microsecond."""
    return round(ns / 1e6, 3)


def _ms_or_none(ns: int | None) -> float | None:
    return None if ns is None else _ms(ns)


def _instant(ns: int) -> int | None:
    """A row's instant, or None where the records hold -1 (it never happened)."""
    return ns if ns >= 0 else None


def request_rows(
    run: RunRecords, output_lens: np.ndarray, request_id_prefix: str | None
) -> list[dict[str, Any]]:
    """One row per request (keys: COLUMNS); None where the request has no such value (never
    sent, no token event, failed)."""
    records = run.records
    offsets = run.event_offsets.tolist()
    events = run.event_ns
    rows = []
    for i, record in enumerate(records.tolist()):
        row = dict(zip(records.dtype.names, record, strict=True))
        sent = _instant(row["send_ns"])
        released = _instant(row["arrival_ns"])
        own = events[offsets[i] : offsets[i + 1]]
        gaps = np.diff(own)
        ok = bool(row["success"])
        timed = sent is not None and len(own) > 0
        ttft = _ms(int(own[0]) - sent) if timed else None
        e2el = _ms(int(own[-1]) - sent) if timed and ok else None
        queue = _ms(sent - released) if sent is not None and released is not None else None
        prompt = row["prompt_tokens"] if row["prompt_tokens"] >= 0 else int(run.prompt_lens[i])
        rows.append(
            {
                "index": i,
                "request_id": None if request_id_prefix is None else f"{request_id_prefix}{i}",
                "worker": int(run.worker[i]) if run.worker[i] >= 0 else None,
                "status": row["status"],
                "success": ok,
                "scheduled_ms": _ms(int(run.scheduled_ns[i])),
                "released_ms": _ms_or_none(released),
                "sent_ms": _ms_or_none(sent),
                "end_ms": _ms_or_none(_instant(row["end_ns"])),
                "client_queue_ms": queue,
                "connect_ms": _ms(row["connect_ns"]) if sent is not None else None,
                "ttft_ms": ttft,
                "e2el_ms": e2el,
                "events": len(own),
                "itl_mean_ms": _ms(float(gaps.mean())) if len(gaps) else None,
                "itl_p50_ms": _ms(float(np.percentile(gaps, 50))) if len(gaps) else None,
                "itl_p99_ms": _ms(float(np.percentile(gaps, 99))) if len(gaps) else None,
                "itl_max_ms": _ms(int(gaps.max())) if len(gaps) else None,
                "prompt_tokens": prompt,
                "output_tokens": int(output_lens[i]),
                "resent": bool(row["resent"]),
                "truncated": bool(row["truncated"]),
                "error": run.errors.get(i) or None,
            }
        )
    return rows


def write_csv(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    """The rows as CSV with a header line; an empty field for None, true/false for booleans."""
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
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
