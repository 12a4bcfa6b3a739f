"""read_records over any truncation or corruption of a real records file: it returns the run
(or the part up to where a cut file stops) or raises RecordsFileError; nothing else, ever."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.checks import RecordsFileError
from loadgen.records.collected import Collected
from loadgen.records.event_source import materialized
from loadgen.records.model import RunEnd, RunStart
from loadgen.records.read import read_records
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats

N = 5
BUDGET = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def rows(indices: list[int], n_events: int) -> np.ndarray:
    out = np.zeros(len(indices), dtype=RECORD_DTYPE)
    out["index"] = indices
    out["released_ns"] = [i * 1_000 for i in indices]
    out["sent_ns"] = out["released_ns"] + 10
    out["end_ns"] = out["released_ns"] + 5_000
    out["n_events"] = n_events
    out["status"] = 200
    out["prompt_tokens"] = 4
    out["completion_tokens"] = n_events
    out["success"] = True
    out["server_queue_s"] = np.nan
    out["server_ttft_s"] = np.nan
    return out


def events(batch: np.ndarray) -> np.ndarray:
    return np.concatenate(
        [r["sent_ns"] + 100 * np.arange(1, r["n_events"] + 1) for r in batch]
    ).astype(np.int64)


def real_file() -> bytes:
    """A whole records file of 5 requests in three batches, with an error and a kept text."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.records.arrow"
        start = RunStart(
            loadgen_version="0.1.0", command_line=["loadgen", "run"],
            config={"backend": "openai", "headers": {}}, model_id="m", tokenizer_id="m",
            num_requests=N, num_workers=2, connections=0, schedule_sha256="ab", t0_ns=0,
            t0_wall="", counters_before=None,
        )  # fmt: skip
        writer = RecordsWriter(
            str(path), start, np.arange(N, dtype=np.int64), np.full(N, 3, dtype=np.int64),
            np.ones(N, dtype=np.int64), "r-",
        )  # fmt: skip
        writer.start(1, "2026-12-05T08:00:00", connections=2)
        batches = [rows([1, 0], 3), rows([3], 2), rows([2], 1)]
        for k, batch in enumerate(batches):
            writer.write(k % 2, batch, events(batch), {0: "boom"} if k == 0 else {}, {3: "hé"})
        records = np.zeros(N, dtype=RECORD_DTYPE)
        records[:] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
        records["index"] = np.arange(N)
        for batch in batches:
            records[batch["index"]] = batch
        worker = np.array([0, 0, 0, 1, -1], dtype=np.int16)
        collected = Collected(
            records=records, event_ns=np.zeros(0, np.int64),
            event_offsets=np.zeros(N + 1, np.int64), errors={4: "lost: worker 1 died"},
            texts={}, t0_ns=1, connections=2, worker=worker,
        )  # fmt: skip
        end = RunEnd(
            interrupted=False, worker_problems=[], worker_cpu_ns=[1, 2], worker_wall_ns=[3, 4],
            connection_stats=ConnectionStats(), loop_lag_ns=np.array([5], np.int64),
            output_lens=np.array([3, 3, 1, 2, 0], np.int64), counters_after=None,
            probe_latencies_s=None,
        )  # fmt: skip
        writer.finish(collected, end)
        return path.read_bytes()


DATA = real_file()


def outcome(tmp_path: Path, data: bytes) -> str:
    """What read_records makes of ``data``: "whole", "cut" or "refused"; anything else raises."""
    path = tmp_path / "fuzzed.records.arrow"
    path.write_bytes(data)
    try:
        run = read_records(str(path))
    except RecordsFileError as exc:
        assert "\n" not in str(exc)
        return "refused"
    assert run.num_requests == N
    values, offsets = materialized(run.event_source)  # its events read back from the file
    assert len(offsets) == N + 1 and offsets[-1] == len(values)
    assert offsets.tolist() == run.event_offsets.tolist()
    return "whole" if run.end is not None else "cut"


def test_the_file_reads_whole(tmp_path: Path) -> None:
    assert outcome(tmp_path, DATA) == "whole"


@BUDGET
@given(cut=st.integers(min_value=0, max_value=len(DATA)))
def test_any_truncation_reads_its_complete_batches_or_is_refused(tmp_path: Path, cut: int) -> None:
    assert outcome(tmp_path, DATA[:cut]) in {"whole", "cut", "refused"}


@BUDGET
@given(
    changes=st.lists(
        st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 255)), min_size=1, max_size=8
    )
)
def test_any_byte_corruption_reads_or_is_refused(
    tmp_path: Path, changes: list[tuple[int, int]]
) -> None:
    data = bytearray(DATA)
    for offset, value in changes:
        data[offset] = value
    outcome(tmp_path, bytes(data))


@BUDGET
@given(offset=st.integers(0, len(DATA) - 1), bit=st.integers(0, 7), cut=st.integers(0, len(DATA)))
def test_a_flipped_bit_in_a_cut_file_reads_or_is_refused(
    tmp_path: Path, offset: int, bit: int, cut: int
) -> None:
    data = bytearray(DATA)
    data[offset] ^= 1 << bit
    outcome(tmp_path, bytes(data[:cut]))
