"""Scraped server metrics in the records file: written in chunks as they come, read back as one
series per source, name and labels; an older file reads as none; a damaged chunk is refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from test_records_file import events as row_events
from test_records_file import rows, write_run, writer

from loadgen.records.arrow_file import MAGIC_LEN, SERIES_KEY
from loadgen.records.checks import RecordsFileError
from loadgen.records.read import read_records
from loadgen.records.server_series import chunk_json

URL = "http://127.0.0.1:8000/metrics"
DCGM = "http://gpu1:9400/metrics"
ENGINE = (("engine", "0"),)


def chunks() -> list[dict]:
    """Two chunks of the server's scrapes (the waiting queue appears in the second) and one of
    a DCGM exporter's."""
    first = chunk_json(
        URL,
        [0, 1_000_000_000],
        [{("requests_running", ENGINE): 1.0}, {("requests_running", ENGINE): 4.0}],
    )
    second = chunk_json(
        URL,
        [2_000_000_000],
        [{("requests_running", ENGINE): 8.0, ("requests_waiting", ENGINE): 3.0}],
    )
    gpu = chunk_json(
        DCGM,
        [500_000_000, 1_500_000_000],
        [
            {("gpu_power_w", (("gpu", "0"),)): 300.0, ("gpu_power_w", (("gpu", "1"),)): 90.0},
            {("gpu_power_w", (("gpu", "0"),)): 610.0},
        ],
    )
    return [first, second, gpu]


def test_chunks_written_during_the_run_read_back_as_series(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-05T10:00:00", connections=1)
    first, second, gpu = chunks()
    out.write_series(first)
    batch = rows([0, 1], 2)
    out.write(0, batch, row_events(batch), {}, {})
    out.write_series(gpu)
    out.write_series(second)
    out.close()  # a run cut short keeps the chunks written so far
    run = read_records(str(path))
    assert run.records["n_events"].tolist()[:2] == [2, 2]
    series = {(s.source, s.name, tuple(s.labels.items())): s for s in run.server_metrics or []}
    assert list(series) == [
        (URL, "requests_running", ENGINE),
        (DCGM, "gpu_power_w", (("gpu", "0"),)),
        (DCGM, "gpu_power_w", (("gpu", "1"),)),
        (URL, "requests_waiting", ENGINE),
    ]
    running = series[(URL, "requests_running", ENGINE)]
    assert running.t_ns.tolist() == [0, 1_000_000_000, 2_000_000_000]
    assert running.values.tolist() == [1.0, 4.0, 8.0]
    waiting = series[(URL, "requests_waiting", ENGINE)]
    assert (waiting.t_ns.tolist(), waiting.values.tolist()) == ([2_000_000_000], [3.0])
    # A scrape that lacked a series leaves no sample of it, rather than a NaN.
    gpu1 = series[(DCGM, "gpu_power_w", (("gpu", "1"),))]
    assert (gpu1.t_ns.tolist(), gpu1.values.tolist()) == ([500_000_000], [90.0])


def test_a_file_without_scrapes_reads_as_no_server_metrics(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    write_run(path)  # as every file written before scraping existed
    assert read_records(str(path)).server_metrics is None


def test_older_readers_skip_the_chunks(tmp_path: Path) -> None:
    """The chunks are empty batches: a reader that knows nothing of them (pandas, pyarrow)
    sees the same rows."""
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-05T10:00:00", connections=1)
    out.write_series(chunks()[0])
    batch = rows([0], 1)
    out.write(0, batch, row_events(batch), {}, {})
    out.close()
    assert ipc.open_file(str(path)).read_all().num_rows == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda c: {**c, "t_ns": ["0", 1]},
        lambda c: {**c, "source": None},
        lambda c: {k: v for k, v in c.items() if k != "series"},
        lambda c: {**c, "series": [{**c["series"][0], "values": "!!not base64!!"}]},
        lambda c: {
            **c,
            "series": [{**c["series"][0], "values": base64.b64encode(b"\0" * 8).decode()}],
        },
        lambda c: {**c, "series": [{**c["series"][0], "labels": {"gpu": 0}}]},
        lambda c: [c],
    ],
    ids=["t_ns", "source", "no-series", "not-base64", "too-few-values", "labels", "not-object"],
)
def test_a_damaged_chunk_is_refused_in_one_line(tmp_path: Path, change) -> None:
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-05T10:00:00", connections=1)
    bad = change(chunks()[0])
    assert out._writer is not None
    out._write(out._empty_batch, {SERIES_KEY: json.dumps(bad).encode()})
    out.close()
    with pytest.raises(RecordsFileError, match=r"r\.records\.arrow"):
        read_records(str(path))


def test_the_chunk_key_is_in_the_stream_a_crash_leaves(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    out = writer(path)
    out.start(1, "2026-12-05T10:00:00", connections=1)
    out.write_series(chunks()[0])
    data = path.read_bytes()  # no footer: the process died here
    stream = ipc.open_stream(pa.BufferReader(pa.py_buffer(data[MAGIC_LEN:])))
    _, custom = stream.read_next_batch_with_custom_metadata()
    assert custom is not None and SERIES_KEY in custom
    run = read_records(str(path))
    assert run.end is None
    assert [s.values.tolist() for s in run.server_metrics or []] == [[1.0, 4.0]]
    assert np.array_equal(run.server_metrics[0].t_ns, [0, 1_000_000_000])  # type: ignore[index]
