"""The report reads a run's token events from its records file a bounded chunk of requests at a
time (loadgen/records/events.py); every view it renders is byte-identical to the one the
in-memory computation (tests/report_reference.py: every event laid out whole, numpy over the
whole arrays) renders from the same file: the result JSON (--save-detailed's per-request ITLs
included), the console summary and the per-request rows. Several made-up runs, their batches
written out of order as workers send them, read in chunks of a few dozen events."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from report_reference import reference_summary
from report_runs import full_config, start_and_end

from loadgen.records import mapped
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.event_source import (
    ArrayEvents,
    EventSource,
    PickedEvents,
    ScaledEvents,
    prefetched,
)
from loadgen.records.events import RequestOrderEvents, event_chunks, file_events
from loadgen.records.read import read_records
from loadgen.report.exports import request_rows
from loadgen.report.metrics import Timings, TokensPerSecond, itl_stats, tokens_per_second
from loadgen.report.result_json import result_json
from loadgen.report.settings import settings_of
from loadgen.report.stats import sample_stats
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines
from workers.protocol import RECORD_DTYPE

CONFIG = full_config(metric_percentiles="25,50,90,99,99.9", save_detailed=True)
STEADY = dataclasses.replace(CONFIG, warmup_s=0.3, cooldown_s=0.3)
DATE = "20261206-000000"


class SmallChunks:
    """A source's events in chunks of at most ``size`` events (one request alone where it
    has more), whatever size a reader asks for: many chunk boundaries in a small run."""

    def __init__(self, source: EventSource, size: int) -> None:
        self.source, self.size = source, size
        self.counts = source.counts

    def chunks(self, max_events: int = 0) -> Iterator[tuple[int, int, np.ndarray]]:
        return self.source.chunks(self.size)

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        return self.source.ends()


def write_made_up_run(path: Path, seed: int) -> int:
    """A run of a few hundred requests, 0 to 80 token events each (gaps of 0 to 30 ms, ties
    included), one in ten failed after some events, in batches of 1 to 40 requests sent by
    two workers in random order; its number of requests."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    records = np.zeros(n, dtype=RECORD_DTYPE)
    records["index"] = np.arange(n)
    records["released_ns"] = np.sort(rng.integers(0, 2_000_000_000, n))
    records["sent_ns"] = records["released_ns"] + rng.integers(0, 5_000_000, n)
    records["n_events"] = rng.integers(0, 80, n)
    records["status"] = 200
    records["success"] = rng.random(n) > 0.1
    records["prompt_tokens"] = 30
    records["completion_tokens"] = records["n_events"]
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    events = []
    for i in range(n):
        gaps = rng.choice([0, 1_000, 999_999, 30_000_000], records["n_events"][i]) + rng.integers(
            0, 20_000_000, records["n_events"][i]
        )
        events.append(records["sent_ns"][i] + 5_000_000 + np.cumsum(gaps))
    records["end_ns"] = [
        e[-1] + 1000 if len(e) else s for e, s in zip(events, records["sent_ns"], strict=True)
    ]
    start, end = start_and_end(CONFIG, records)
    start = dataclasses.replace(start, num_requests=n)
    end = dataclasses.replace(end, output_lens=np.where(records["success"], records["n_events"], 0))
    writer = RecordsWriter(
        str(path), start, np.arange(n, dtype=np.int64), np.full(n, 29), np.ones(n), None
    )
    writer.start(start.t0_ns, start.t0_wall, start.connections)
    order = rng.permutation(n)
    cuts = np.cumsum(rng.integers(1, 40, n))
    for w, batch in enumerate(np.split(order, cuts[cuts < n])):
        rows = records[batch]
        flat = np.concatenate([events[i] for i in batch]).astype(np.int64)
        writer.write(w % 2, rows, flat, {}, {})
    collected = Collected(
        records=records,
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.zeros(0, np.int64),
        errors={},
        texts={},
        t0_ns=start.t0_ns,
        connections=start.connections,
        worker=np.zeros(n, np.int16),
    )
    writer.finish(collected, end)
    assert writer.failure is None
    return n


@pytest.mark.parametrize("config", [CONFIG, STEADY], ids=["paced", "steady-window"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_every_view_from_chunks_is_byte_identical_to_the_in_memory_one(
    tmp_path: Path, seed: int, config: object
) -> None:
    path = tmp_path / "run.records.arrow"
    write_made_up_run(path, seed)
    settings = settings_of(config)
    run = read_records(str(path))
    assert isinstance(run.events, RequestOrderEvents)  # the events stay in the file
    assert len(run.event_ns) == 0
    run = dataclasses.replace(run, events=SmallChunks(run.event_source, 37))
    chunked = summarize(settings, run)
    reference = reference_summary(settings, run)
    chunked_json = json.dumps(result_json(chunked, DATE))
    assert chunked_json == json.dumps(result_json(reference, DATE))
    assert console_lines(chunked) == console_lines(reference)
    assert request_rows(chunked, "r-") == request_rows(reference, "r-")
    # The figures are real: ITLs were read, and a steady window counted some of them.
    assert chunked.latencies["itl"].percentiles_ms[0][1] > 0
    assert len(json.loads(chunked_json)["itls"]) == run.num_requests
    if chunked.steady is not None:
        assert chunked.steady.metrics["median_itl_ms"] > 0


def test_chunks_hold_each_requests_events_in_request_order(tmp_path: Path) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 9)
    run = read_records(str(path))
    events = RequestOrderEvents(str(path), n)  # its own scan, as a run's report has it
    assert events.offsets.tolist() == run.event_offsets.tolist()
    pieces = list(events.chunks(max_events=100))
    assert len(pieces) > 10 and pieces[-1][1] == n
    whole, offsets = file_events(str(path), events.counts)  # batch by batch, in memory
    assert np.concatenate([p[2] for p in pieces]).tolist() == whole.tolist()
    assert [v.tolist() for _, _, v in run.event_source.chunks(100)] == [
        v.tolist() for _, _, v in pieces
    ]
    has = events.counts > 0
    for source in (events, run.event_source):
        first, last = source.ends()
        assert first[has].tolist() == whole[offsets[:-1][has]].tolist()
        assert last[has].tolist() == whole[offsets[1:][has] - 1].tolist()


def test_a_pass_lets_the_pages_it_read_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 4)
    events = RequestOrderEvents(str(path), n)
    want = [v.tolist() for _, _, v in events.chunks(max_events=50)]
    released: list[int] = []

    def release(self: mapped.MappedFile) -> None:
        released.append(self._read)
        self._read = 0

    monkeypatch.setattr(mapped, "RELEASE_BYTES", 4096)
    monkeypatch.setattr(mapped.MappedFile, "release", release)
    assert [v.tolist() for _, _, v in events.chunks(max_events=50)] == want
    total = int(events.counts.sum()) * 8
    # every 4 KiB read (once the last chunk passed it), then once more as the pass ends
    assert len(released) >= total // (4096 + 50 * 8) and all(r >= 4096 for r in released[:-1])


def test_a_file_shorter_than_when_it_was_read_is_refused_before_it_is_mapped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 5)
    events = RequestOrderEvents(str(path), n)
    with open(path, "r+b") as f:
        f.truncate(events.places.size - 8)  # a read past the new end would fault (SIGBUS)
    with pytest.raises(OSError, match="shorter than when it was read"):
        list(events.chunks())


def test_events_follow_their_file_and_say_when_it_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 6)
    events = RequestOrderEvents(str(path), n)
    whole = [v.tolist() for _, _, v in events.chunks()]
    moved = tmp_path / "final.records.arrow"
    path.rename(moved)
    events.moved_to(str(moved))  # the run gave the file the result's name
    assert [v.tolist() for _, _, v in events.chunks()] == whole
    events.moved_to(None)  # a temporary file, removed at the run's end
    with pytest.raises(FileNotFoundError, match="temporary records file"):
        list(events.chunks(max_events=10))


def test_every_sources_ends_are_the_first_and_last_event_its_chunks_hold(tmp_path: Path) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 8)
    run = read_records(str(path))
    keep = np.arange(n) % 3 != 1
    for source in (
        run.event_source,
        ArrayEvents(*file_events(str(path), run.event_source.counts)),
        ScaledEvents(run.event_source, 1e9),
        PickedEvents(ScaledEvents(run.event_source, 1e9), keep),
    ):
        counts = np.asarray(source.counts)
        whole = np.concatenate([v for _, _, v in source.chunks(max_events=30)])
        offsets = np.concatenate(([0], np.cumsum(counts)))
        has = counts > 0
        assert 0 < has.sum() < len(counts)  # requests without events too
        first, last = source.ends()
        assert first[has].tobytes() == whole[offsets[:-1][has]].tobytes()
        assert last[has].tobytes() == whole[offsets[1:][has] - 1].tobytes()
    assert ArrayEvents(np.zeros(0, np.int64), np.zeros(3, np.int64)).ends()[0].tolist() == [0, 0]


def test_the_itls_and_tokens_per_second_take_two_passes_over_the_events() -> None:
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 60, 3000)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    sent = np.sort(rng.random(len(counts)) * 50)
    values = np.concatenate(
        [s + np.cumsum(rng.integers(1, 30, c) / 1e3) for s, c in zip(sent, counts, strict=True)]
    )
    ok = rng.random(len(counts)) > 0.1
    passes = 0

    class Counted(ArrayEvents):
        def chunks(self, max_events: int = 0) -> Iterator[tuple[int, int, np.ndarray]]:
            nonlocal passes
            passes += 1
            return super().chunks(max_events=1000)

    events = Counted(values, offsets)
    itl_offsets = np.concatenate(([0], np.cumsum(np.maximum(counts - 1, 0))))
    timings = Timings(np.zeros(len(counts)), np.zeros(len(counts)), sent, itl_offsets, events)
    has = ok & (counts > 0)
    latency = np.where(has, values[np.maximum(offsets[1:] - 1, 0)] - sent, 0.0)[ok]
    tokens = TokensPerSecond(counts, ok, sent[ok], latency)
    got = itl_stats(timings, ok, [50, 90, 99], first_pass=tokens)
    assert passes == 2
    gaps = np.concatenate([np.diff(values[a:b]) for a, b in itertools.pairwise(offsets) if b > a])
    owner = np.repeat(ok, np.maximum(counts - 1, 0))
    assert got == sample_stats(gaps[owner], [50, 90, 99], scale=1000)
    owned = np.repeat(ok, counts)
    want = tokens_per_second(sent[ok], latency, values[owned])
    assert tokens.counts.tolist() == want.tolist() and tokens.peak() == want.max() > 0


def test_reading_a_file_lets_its_pages_go_a_window_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.records.arrow"
    write_made_up_run(path, 3)
    want = read_records(str(path))
    released = 0

    def release(self: mapped.MappedFile) -> None:
        nonlocal released
        released += 1

    monkeypatch.setattr(mapped, "RELEASE_BYTES", 4096)
    monkeypatch.setattr(mapped.MappedFile, "release", release)
    got = read_records(str(path))
    batches = len(list(event_chunks(str(path))))
    assert released > batches  # each window of ~4 KiB, and while the stream was read
    assert got.records.tobytes() == want.records.tobytes()
    assert got.event_offsets.tolist() == want.event_offsets.tolist()
    assert [v.tolist() for _, _, v in got.event_source.chunks(64)] == [
        v.tolist() for _, _, v in want.event_source.chunks(64)
    ]


def test_prefetched_items_come_in_order_and_closing_them_closes_their_source() -> None:
    closed = []

    def source(fail_at: int | None = None) -> Iterator[int]:
        try:
            for i in range(10):
                if i == fail_at:
                    raise OSError("the file went away")
                yield i
        finally:
            closed.append(True)

    assert list(prefetched(source())) == list(range(10))
    items = prefetched(source())
    assert [next(items), next(items)] == [0, 1]
    items.close()  # a reader that stops early
    assert closed == [True, True]
    with pytest.raises(OSError, match="went away"):
        list(prefetched(source(fail_at=3)))


def test_held_events_still_read_once_their_temporary_file_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "run.records.arrow"
    n = write_made_up_run(path, 6)
    events = RequestOrderEvents(str(path), n)
    whole = [v.tolist() for _, _, v in events.chunks(max_events=40)]
    events.hold()  # as a run does before its temporary records file is removed
    path.unlink()
    events.moved_to(None)
    assert [v.tolist() for _, _, v in events.chunks(max_events=40)] == whole
    assert [v.tolist() for _, _, v in events.chunks(max_events=40)] == whole  # each pass
