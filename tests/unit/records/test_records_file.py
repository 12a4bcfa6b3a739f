"""The records file: written batch by batch, read back exactly, readable after a crash, small,
self-describing, free of secrets, and loadable by pandas in one call."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from loadgen.records.arrow_file import (
    COLUMNS,
    FORMAT_VERSION,
    START_KEY,
    RecordsWriter,
    move,
    records_path,
)
from loadgen.records.checks import RecordsFileError
from loadgen.records.collected import Collected
from loadgen.records.event_source import materialized
from loadgen.records.model import RunEnd, RunRecords, RunStart
from loadgen.records.read import read_records
from loadgen.records.redact import redact_argv, redact_config, redact_url
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats

N = 6


def start(**changes: object) -> RunStart:
    fields = dict(
        loadgen_version="0.1.0",
        command_line=["loadgen", "run", "--mock"],
        config={"backend": "openai", "request_rate": float("inf"), "headers": {}},
        model_id="loadgen-mock",
        tokenizer_id="loadgen-mock",
        num_requests=N,
        num_workers=2,
        connections=0,
        schedule_sha256="ab" * 8,
        t0_ns=0,
        t0_wall="",
        counters_before="# HELP x\nx 1\n",
    )
    fields.update(changes)
    return RunStart(**fields)  # type: ignore[arg-type]


def rows(indices: list[int], n_events: int) -> np.ndarray:
    """Worker records for ``indices``: request i released at i ms, each with n_events events."""
    out = np.zeros(len(indices), dtype=RECORD_DTYPE)
    out["index"] = indices
    out["released_ns"] = [i * 1_000_000 for i in indices]
    out["sent_ns"] = out["released_ns"] + 1000
    out["end_ns"] = out["released_ns"] + 50_000_000
    out["n_events"] = n_events
    out["status"] = 200
    out["prompt_tokens"] = 10
    out["completion_tokens"] = [-1 if i == 1 else n_events for i in indices]
    out["success"] = True
    out["truncated"] = [i == 3 for i in indices]  # ended without [DONE]
    out["server_queue_s"] = [np.nan if i % 2 else 0.001 * i for i in indices]
    out["server_ttft_s"] = np.nan
    return out


def events(batch: np.ndarray) -> np.ndarray:
    """Each request's events: 1 ms apart from its send."""
    return np.concatenate(
        [r["sent_ns"] + 1_000_000 * np.arange(1, r["n_events"] + 1) for r in batch]
    ).astype(np.int64)


def end(output_lens: np.ndarray) -> RunEnd:
    return RunEnd(
        interrupted=False,
        worker_problems=["worker 1 died (exit code -9)"],
        worker_cpu_ns=[5, 6],
        worker_wall_ns=[10, 12],
        connection_stats=ConnectionStats(preopened_at_t0=4, resent=1),
        loop_lag_ns=np.array([100, 2_000_000, 35], dtype=np.int64),
        output_lens=output_lens,
        counters_after="# HELP x\nx 2\n",
        probe_latencies_s=[0.01, 0.02],
        probe_failures=1,
    )


def writer(path: Path, **start_changes: object) -> RecordsWriter:
    return RecordsWriter(
        str(path),
        start(**start_changes),
        scheduled_ns=np.arange(N, dtype=np.int64) * 1_000_000,
        input_tokens=np.full(N, 9, dtype=np.int64),
        input_sequences=np.ones(N, dtype=np.int64),
        request_id_prefix="bench-abc-",
    )


def collected_of(
    batches: list[tuple[int, np.ndarray]], errors: dict[int, str], texts: dict[int, str]
) -> Collected:
    """The run's Collected of N requests after ``batches`` (worker, rows) were reported:
    the others unsent rows of no worker."""
    records = np.zeros(N, dtype=RECORD_DTYPE)
    records[:] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    records["index"] = np.arange(N)
    worker = np.full(N, -1, dtype=np.int16)
    for w, batch in batches:
        records[batch["index"]] = batch
        worker[batch["index"]] = w
    return Collected(
        records=records,
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.zeros(N + 1, np.int64),
        errors=errors,
        texts=texts,
        t0_ns=123_456,
        connections=8,
        worker=worker,
    )


def write_run(path: Path) -> tuple[list[np.ndarray], Collected, RunEnd]:
    """Requests 3, 0, 1 from worker 0 and 4 from worker 1 (two batches); 2 and 5 lost."""
    out = writer(path)
    out.start(123_456, "2026-12-03T10:00:00.000001", connections=8)
    first, second = rows([3, 0, 1], 4), rows([4], 2)
    out.write(0, first, events(first), {1: "boom"}, {1: "some text"})
    out.write(1, second, events(second), {}, {})
    collected = collected_of(
        [(0, first), (1, second)],
        errors={1: "boom", 2: "lost: worker 1 died", 5: "lost: worker 1 died"},
        texts={1: "some text"},
    )
    assert collected.worker.tolist() == [0, 0, -1, 0, 1, -1]
    run_end = end(np.array([4, 3, 0, 4, 2, 0], dtype=np.int64))
    out.finish(collected, run_end)
    return [first, second], collected, run_end


def test_a_run_reads_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    batches, collected, run_end = write_run(path)
    run = read_records(str(path))
    assert run.start == start(t0_ns=123_456, t0_wall="2026-12-03T10:00:00.000001", connections=8)
    assert run.end is not None
    assert run.end.output_lens.tolist() == [4, 3, 0, 4, 2, 0]
    assert run.end.loop_lag_ns.tolist() == [100, 2_000_000, 35]
    assert run.end.connection_stats == ConnectionStats(preopened_at_t0=4, resent=1)
    assert (run.end.probe_latencies_s, run.end.probe_failures) == ([0.01, 0.02], 1)
    assert run.end.worker_problems == run_end.worker_problems
    # Row i is request i, every field as the workers sent it (NaN and -1 included).
    assert run.records.tobytes() == collected.records.tobytes()
    assert run.worker.tolist() == [0, 0, -1, 0, 1, -1]
    assert run.scheduled_ns.tolist() == [i * 1_000_000 for i in range(N)]
    assert run.errors == collected.errors
    assert run.texts == {1: "some text"}
    event_ns, offsets = materialized(run.event_source)  # read from the file, request-major
    assert offsets.tolist() == run.event_offsets.tolist()
    for batch in batches:
        split = np.split(events(batch), np.cumsum(batch["n_events"])[:-1])
        for row, got in zip(batch, split, strict=True):
            i = row["index"]
            assert event_ns[offsets[i] : offsets[i + 1]].tolist() == got.tolist()


def test_pandas_reads_it_in_one_call_with_nulls_for_none(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    write_run(path)
    frame = pd.read_feather(path)
    assert len(frame) == N
    by_index = frame.set_index("index").sort_index()
    assert by_index.loc[0, "request_id"] == "bench-abc-0"
    assert list(by_index.loc[3, "events_ns"]) == [3_001_000 + k * 1_000_000 for k in range(1, 5)]
    assert pd.isna(by_index.loc[1, "completion_tokens"])  # -1: the server reported no usage
    assert pd.isna(by_index.loc[2, "sent_ns"]) and pd.isna(by_index.loc[2, "worker"])
    assert by_index.loc[2, "error"] == "lost: worker 1 died"
    assert pd.isna(by_index.loc[1, "server_queue_s"]) and by_index.loc[0, "server_queue_s"] == 0
    assert by_index["truncated"].tolist() == [False, False, False, True, False, False]


def test_a_file_from_before_the_truncated_column_reads_as_none_truncated(tmp_path: Path) -> None:
    # Adding a column kept the format version: a file written without it still reads.
    path = tmp_path / "r.records.arrow"
    write_run(path)
    reader = ipc.open_file(str(path))
    batches = [reader.get_batch_with_custom_metadata(i) for i in range(reader.num_record_batches)]
    schema = reader.schema.remove(reader.schema.get_field_index("truncated"))
    old = tmp_path / "old.records.arrow"
    with ipc.new_file(str(old), schema) as out:
        for batch, custom in batches:
            columns = [batch.column(name) for name in schema.names]
            out.write_batch(pa.record_batch(columns, schema=schema), custom_metadata=custom)
    run = read_records(str(old))
    assert run.records["truncated"].tolist() == [0] * N
    assert run.records["success"].tolist() == read_records(str(path)).records["success"].tolist()


def test_self_describing_with_a_format_version(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    write_run(path)
    meta = json.loads(ipc.open_file(str(path)).schema.metadata[START_KEY])
    assert meta["format"] == "loadgen-records"
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["config"]["request_rate"] == float("inf")


def test_a_crashed_run_keeps_every_batch_written(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-03T10:00:00", connections=1)
    first = rows([0, 1], 3)
    out.write(0, first, events(first), {}, {})
    size_after_first = path.stat().st_size
    second = rows([2], 3)
    out.write(0, second, events(second), {}, {})
    # The process dies here: no end batch, no footer; and the last write was cut short.
    data = path.read_bytes()
    path.write_bytes(data[: size_after_first + (len(data) - size_after_first) // 2])
    run = read_records(str(path))
    assert run.end is None
    assert run.records["success"].tolist() == [1, 1, 0, 0, 0, 0]
    assert run.errors[2].startswith("lost:")


def test_a_closed_run_without_an_end_is_read_as_not_ended(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-03T10:00:00", connections=1)
    first = rows([0], 2)
    out.write(0, first, events(first), {}, {})
    out.close()  # what run() does when the run stops on an exception
    run = read_records(str(path))
    assert run.end is None
    assert run.records["n_events"].tolist() == [2, 0, 0, 0, 0, 0]


def test_costs_8_bytes_an_event_plus_a_fixed_amount_per_request(tmp_path: Path) -> None:
    def size(n_events: int) -> int:
        path = tmp_path / f"r{n_events}.records.arrow"
        out = writer(path)
        out.start(1, "2026-12-03T10:00:00", connections=1)
        for k in range(0, N, 2):  # three batches, as workers send them
            batch = rows([k, k + 1], n_events)
            out.write(0, batch, events(batch), {}, {})
        out.close()
        return path.stat().st_size

    assert size(1001) - size(1) == N * 1000 * 8


def test_no_secret_in_the_file(tmp_path: Path) -> None:
    secret = "sk-very-secret"
    path = tmp_path / "r.records.arrow"
    config = redact_config(
        {"headers": {"Authorization": f"Bearer {secret}"}, "base_url": f"http://u:{secret}@h"}
    )
    argv = redact_argv(
        ["loadgen", "run", "--header", f"Authorization=Bearer {secret}", f"x-key={secret}",
         f"--header=k={secret}", "--base-url", f"http://u:{secret}@h:8000", "--num-prompts", "5"]
    )  # fmt: skip
    out = writer(path, config=config, command_line=argv)
    out.start(1, "t", 0)
    out.close()
    assert secret.encode() not in path.read_bytes()
    assert argv[-2:] == ["--num-prompts", "5"]
    assert "http://u:***@h:8000" in argv
    assert redact_url("http://h:8000/v1") == "http://h:8000/v1"


def test_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    other = tmp_path / "other.arrow"
    with pa.OSFile(str(other), "wb") as sink, ipc.new_file(sink, pa.schema([("a", pa.int8())])):
        pass
    with pytest.raises(RecordsFileError, match="not a loadgen records file"):
        read_records(str(other))
    text = tmp_path / "result.json"
    text.write_text("{}")
    with pytest.raises(RecordsFileError, match="not a loadgen records file"):
        read_records(str(text))
    with pytest.raises(RecordsFileError, match="No such file"):
        read_records(str(tmp_path / "missing.records.arrow"))


def test_named_beside_the_result_and_never_over_another_run(tmp_path: Path) -> None:
    assert records_path("d/openai-1.0qps-m-20261203-101010.json") == (
        "d/openai-1.0qps-m-20261203-101010.records.arrow"
    )
    first, second = tmp_path / "a.records.arrow", tmp_path / "b.records.arrow"
    first.write_text("1")
    second.write_text("2")
    target = tmp_path / "result.records.arrow"
    assert move(str(first), str(target)) == str(target)
    assert move(str(second), str(target)) == str(tmp_path / "result-2.records.arrow")
    assert target.read_text() == "1"


def test_a_record_field_has_one_name_from_the_worker_to_the_report():
    columns = {name for name, _ in COLUMNS}
    # Every field of the worker's row is the column of its name (n_events: events_ns' length).
    assert set(RECORD_DTYPE.names) - {"n_events"} <= columns
    # So is every per-request array of a run (the flat events, errors and texts aside, and the
    # scraped server metrics, a series of their own).
    aside = {"start", "end", "records", "event_ns", "event_offsets", "events", "errors", "texts"}
    aside.add("server_metrics")
    assert {field.name for field in dataclasses.fields(RunRecords)} - aside <= columns
