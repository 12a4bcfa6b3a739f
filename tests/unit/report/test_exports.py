"""`loadgen report --format csv|jsonl`'s rows (loadgen/report/exports.py) and the result file's
whole lines (--append-result): pure functions over made-up records; files only in tmp_path."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

from loadgen.config import RunConfig
from loadgen.records.model import RunEnd, RunRecords, RunStart
from loadgen.report.exports import COLUMNS, itl_stats_ns, request_rows, write_csv, write_jsonl
from loadgen.report.result_json import write_result
from loadgen.report.run_report import build_report
from loadgen.report.run_summary import RunSummary
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summarize import summarize
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats

MS = 1_000_000


def three_requests() -> RunRecords:
    """Request 0: 4 events 10, 12, 16, 26 ms after its send at 1 ms; request 1: HTTP 500 with no
    event; request 2: never sent (its worker lost it)."""
    records = np.zeros(3, dtype=RECORD_DTYPE)
    records[2] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    records["index"] = np.arange(3)
    records["released_ns"][:2] = [500_000, 2 * MS]
    records["sent_ns"][:2] = [1 * MS, 2 * MS]
    records["end_ns"][:2] = [27 * MS, 3 * MS]
    records["n_events"] = [4, 0, 0]
    records["status"][:2] = [200, 500]
    records["prompt_tokens"][:2] = [30, -1]
    records["completion_tokens"][:2] = [4, -1]
    records["success"][:2] = [True, False]
    records["connect_ns"][:2] = [250_000, 0]
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    event_ns = np.array([11, 13, 17, 27], dtype=np.int64) * MS
    cfg = RunConfig(workers=1, request_id_prefix="bench-x-")
    start = RunStart(
        loadgen_version="0.1.0",
        command_line=["loadgen", "run"],
        config=dataclasses.asdict(cfg),
        model_id="m",
        tokenizer_id="m",
        num_requests=3,
        num_workers=1,
        connections=1,
        schedule_sha256="",
        t0_ns=0,
        t0_wall="2026-12-03T10:00:00",
        counters_before=None,
    )
    end = RunEnd(
        interrupted=False,
        worker_problems=[],
        worker_cpu_ns=[MS],
        worker_wall_ns=[100 * MS],
        connection_stats=ConnectionStats(),
        loop_lag_ns=np.zeros(1, np.int64),
        output_lens=np.array([4, 0, 0], np.int64),
        counters_after=None,
        probe_latencies_s=None,
    )
    return RunRecords(
        start=start,
        end=end,
        records=records,
        worker=np.array([0, 0, -1], np.int16),
        scheduled_ns=np.array([0, 2 * MS, 4 * MS], np.int64),
        input_tokens=np.array([29, 31, 33], np.int64),
        input_sequences=np.ones(3, np.int64),
        event_ns=event_ns,
        event_offsets=np.array([0, 4, 4, 4], np.int64),
        errors={1: "HTTP 500: boom", 2: "lost: its worker never reported it"},
        texts={},
    )


def summary_of(run: RunRecords) -> RunSummary:
    """The run's summary under the configuration it ran with."""
    return summarize(settings_of(RunConfig(**{**run.start.config, "given": frozenset()})), run)


def test_each_request_is_one_row_with_its_timings_and_tokens() -> None:
    rows = request_rows(summary_of(three_requests()), "bench-x-")
    assert [list(row) for row in rows] == [list(COLUMNS)] * 3
    ok, failed, lost = rows
    assert ok == {
        "index": 0, "request_id": "bench-x-0", "worker": 0, "status": 200, "success": True,
        "outcome": "completed", "scheduled_ms": 0.0, "released_ms": 0.5, "sent_ms": 1.0,
        "end_ms": 27.0,
        "client_queue_ms": 0.5, "connect_ms": 0.25, "ttft_ms": 10.0, "e2el_ms": 26.0,
        "events": 4, "itl_mean_ms": 5.333, "itl_p50_ms": 4.0, "itl_p99_ms": 9.88,
        "itl_max_ms": 10.0, "prompt_tokens": 30, "output_tokens": 4, "resent": False,
        "truncated": False, "error_kind": None, "error": None,
    }  # fmt: skip
    assert (failed["status"], failed["success"], failed["ttft_ms"], failed["e2el_ms"]) == (
        500, False, None, None,
    )  # fmt: skip
    assert (failed["prompt_tokens"], failed["error"]) == (31, "HTTP 500: boom")  # the dataset's
    assert lost["worker"] is None and lost["sent_ms"] is None and lost["end_ms"] is None
    # A lost request may have been sent: a failure, not "not sent".
    assert [row["outcome"] for row in rows] == ["completed", "failed", "failed"]
    assert [row["error_kind"] for row in rows] == [None, "HTTP 500", "lost"]
    assert (lost["status"], lost["scheduled_ms"], lost["events"]) == (0, 4.0, 0)


def test_the_rows_agree_with_the_report() -> None:
    """TTFT and E2EL are the report's own (from the send instant)."""
    run = three_requests()
    cfg = RunConfig(**{**run.start.config, "given": frozenset()})
    report = build_report(settings_of(cfg), output_of(cfg), run, date="d")
    row = request_rows(report.summary, "p-")[0]
    assert row["ttft_ms"] == round(report.timings.ttft_s[0] * 1000, 3)
    assert row["e2el_ms"] == round(report.timings.latency_s[0] * 1000, 3)
    assert row["itl_max_ms"] == round(report.timings.itls_of(0).max() * 1000, 3)


def test_csv_has_a_header_empty_fields_for_none_and_true_false() -> None:
    rows = request_rows(summary_of(three_requests()), None)
    out = io.StringIO()
    write_csv(rows, out)
    text = out.getvalue()
    assert text.splitlines()[0] == ",".join(COLUMNS) and text.endswith("\n")
    read = list(csv.DictReader(io.StringIO(text)))
    assert len(read) == 3
    assert (read[0]["success"], read[0]["ttft_ms"], read[0]["request_id"]) == ("true", "10.0", "")
    assert (read[2]["sent_ms"], read[2]["error"]) == ("", "lost: its worker never reported it")


def test_jsonl_is_one_object_a_line_with_nulls() -> None:
    rows = request_rows(summary_of(three_requests()), "p-")
    out = io.StringIO()
    write_jsonl(rows, out)
    lines = out.getvalue().split("\n")
    assert lines[-1] == "" and [json.loads(line) for line in lines[:-1]] == rows
    assert json.loads(lines[2])["sent_ms"] is None


def test_appended_results_are_whole_lines(tmp_path: Path) -> None:
    path = str(tmp_path / "r.json")
    write_result(path, {"run": 1}, append=True)
    write_result(path, {"run": 2}, append=True)
    assert Path(path).read_text() == '{"run": 1}\n{"run": 2}\n'


def test_an_append_after_a_file_without_its_last_newline_starts_a_new_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.json"
    write_result(str(path), {"run": 1})  # --save-result: upstream's file, no newline
    assert path.read_text() == '{"run": 1}'
    write_result(str(path), {"run": 2}, append=True)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"run": 1}, {"run": 2}]
    assert path.read_text().endswith("}\n")


def test_itl_statistics_are_numpys_per_request() -> None:
    """The vectorised per-request gaps agree with np.percentile/mean/max request by request,
    for requests of 0, 1, 2 and many events."""
    rng = np.random.default_rng(7)
    counts = np.array([0, 1, 2, 5, 0, 40, 3, 1, 17])
    offsets = np.concatenate(([0], np.cumsum(counts)))
    event_ns = np.concatenate(
        [i * 10**9 + np.cumsum(rng.integers(1, 10**7, size=c)) for i, c in enumerate(counts)]
    ).astype(np.int64)
    stats = itl_stats_ns(event_ns, offsets)
    for i, count in enumerate(counts):
        gaps = np.diff(event_ns[offsets[i] : offsets[i + 1]]).astype(float)
        if count < 2:
            assert all(np.isnan(stats[name][i]) for name in ("mean", "p50", "p99", "max"))
            continue
        expected = (gaps.mean(), np.percentile(gaps, 50), np.percentile(gaps, 99), gaps.max())
        got = tuple(stats[name][i] for name in ("mean", "p50", "p99", "max"))
        assert got == pytest.approx(expected, rel=1e-12)
