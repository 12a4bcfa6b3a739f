"""The client's timing error against the server's records (loadgen/timing_error.py): the join,
statistics, verdicts, conclusion and rows on hand-made arrays (tests/e2e/test_calibrate_run.py
runs the real processes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from loadgen.mock.recorder import TimingRecorder, TimingRecords, TimingsSaveError
from loadgen.timing_error import (
    ClientRun,
    Comparison,
    StepVerdict,
    bound_of,
    compare,
    conclusion,
    error_stats,
    format_row,
    judge,
    stats_ms,
)
from loadgen.wake_floor import WakeFloor

MS = 1_000_000  # ns


def records(rows: list[tuple[str, int, list[int]]]) -> TimingRecords:
    """Server records from (id, arrival, event instants) rows, through the server's own writer."""
    recorder = TimingRecorder()
    for request_id, arrival, events in rows:
        recorder.add(request_id, arrival).extend(events)
    return TimingRecords.from_bytes(recorder.npz())


def client(
    ttfts_ms: list[float],
    itls_ms: list[list[float]],
    errors: list[str],
    starts_ms: list[float] | None = None,
) -> ClientRun:
    """A client run as parsed from a detailed result JSON (seconds there)."""
    result = {
        "ttfts": [t / 1000 for t in ttfts_ms],
        "itls": [[g / 1000 for g in gaps] for gaps in itls_ms],
        "errors": errors,
        "start_times": [s / 1000 for s in (starts_ms or [0.0] * len(ttfts_ms))],
    }
    return ClientRun.from_result(json.loads(json.dumps(result)))


def test_recorder_round_trip() -> None:
    server = records([("a", 5, [7, 9, 9]), ("b", 6, []), ("c", 8, [10])])
    assert server.request_ids.tolist() == ["a", "b", "c"]
    assert server.arrival_ns.tolist() == [5, 6, 8]
    assert server.event_offsets.tolist() == [0, 3, 3, 4]
    assert server.event_ns.dtype == np.int64
    assert server.events_of(0).tolist() == [7, 9, 9]
    assert server.events_of(1).tolist() == []
    empty = records([])
    assert (len(empty.request_ids), empty.event_offsets.tolist()) == (0, [0])


def test_recorder_saves_through_a_partial_file_and_says_why_it_cannot(tmp_path: Path) -> None:
    recorder = TimingRecorder()
    recorder.add("a", 5).extend([7, 9])
    path = tmp_path / "timings.npz"
    recorder.save(path)
    assert TimingRecords.load(path).events_of(0).tolist() == [7, 9]
    assert not (tmp_path / "timings.npz.partial").exists()
    with pytest.raises(TimingsSaveError, match=r"cannot write the timing records to .*missing"):
        recorder.save(tmp_path / "missing" / "timings.npz")


def test_compare_joins_by_id_and_pairs_gaps() -> None:
    # Server rows out of order, plus a request of another step that must be ignored.
    server = records(
        [
            ("s-1", 100 * MS, [110 * MS, 160 * MS, 210 * MS]),
            ("other-0", 0, [1, 2]),
            ("s-0", 0, [20 * MS, 70 * MS, 120 * MS]),
            ("s-2", 50 * MS, [60 * MS, 70 * MS]),
        ]
    )
    run = client(
        ttfts_ms=[21.0, 12.0, 0.0, 5.0],
        itls_ms=[[50.5, 49.5], [50.0, 51.0], [], [1.0]],
        errors=["", "", "HTTP 500", ""],
    )
    result = compare(run, server, "s-")
    assert (result.requests, result.failed) == (4, 1)
    assert result.unrecorded == 1  # s-3 succeeded on the client but the server has no record
    assert result.count_mismatches == 0
    assert result.events == 8  # s-0, s-1 and the failed s-2: all the server wrote
    assert result.span_s == pytest.approx(0.210)
    assert result.events_per_s == pytest.approx(8 / 0.210)
    np.testing.assert_allclose(result.ttft_error_s * 1000, [1.0, 2.0], atol=1e-9)
    np.testing.assert_allclose(result.gap_error_s * 1000, [0.5, -0.5, 0.0, 1.0], atol=1e-9)


def test_ttft_error_splits_into_send_leg_and_delivery() -> None:
    # Sent at 10 ms, the server saw it at 12 ms and wrote events at 20, 30 ms; the client read
    # them at 21 and 31.5 ms (TTFT 11 ms, gap 10.5 ms).
    server = records([("r0", 12 * MS, [20 * MS, 30 * MS])])
    result = compare(client([11.0], [[10.5]], [""], starts_ms=[10.0]), server, "r")
    np.testing.assert_allclose(result.send_leg_s * 1000, [2.0], atol=1e-9)
    np.testing.assert_allclose(result.delivery_s * 1000, [1.0, 1.5], atol=1e-9)
    # TTFT error (11 - 8 = 3 ms) = send leg (2 ms) + first delivery (1 ms).
    np.testing.assert_allclose(result.ttft_error_s * 1000, [3.0], atol=1e-9)


def test_compare_counts_event_mismatches_and_pairs_the_common_gaps() -> None:
    server = records([("x0", 0, [10 * MS, 20 * MS, 30 * MS])])
    result = compare(client([10.5], [[10.0]], [""]), server, "x")
    assert result.count_mismatches == 1
    np.testing.assert_allclose(result.gap_error_s, [0.0], atol=1e-12)
    np.testing.assert_allclose(result.ttft_error_s * 1000, [0.5], atol=1e-9)


def test_stats_and_verdicts() -> None:
    stats = stats_ms(np.arange(101) / 1000)
    assert (stats.p50_ms, stats.p99_ms, stats.max_ms) == pytest.approx((50, 99, 100))
    assert all(math.isnan(x) for x in vars(stats_ms(np.zeros(0))).values())

    def comparison(ttft_ms: list[float], gaps_ms: list[float], failed: int = 0) -> Comparison:
        return Comparison(
            requests=len(ttft_ms),
            failed=failed,
            unrecorded=0,
            count_mismatches=0,
            events=0,
            span_s=0.0,
            ttft_error_s=np.array(ttft_ms) / 1000,
            gap_error_s=np.array(gaps_ms) / 1000,
            send_leg_s=np.zeros(0),
            delivery_s=np.zeros(0),
        )

    good = comparison([0.1, 0.2], [-0.3, 0.3])
    ttft, gap = error_stats(good)
    assert gap.max_ms == pytest.approx(0.3)  # gap errors count by their size
    assert ttft.max_ms == pytest.approx(0.2)
    assert judge(64, good, 0.5).trusted
    verdict = judge(64, good, 0.5)
    assert (verdict.concurrency, verdict.bound_ms, verdict.lost) == (64, 0.5, 0)
    assert (verdict.ttft_p99_ms, verdict.gap_p99_ms) == pytest.approx((0.199, 0.3))
    assert not judge(64, comparison([0.1], [-0.6]), 0.5).trusted
    assert not judge(64, comparison([0.6], [0.0]), 0.5).trusted
    failed = judge(64, comparison([0.1], [0.1], failed=1), 0.5)
    assert (failed.lost, failed.trusted) == (1, False)
    assert not judge(64, comparison([], []), 0.5).trusted  # NaN p99s are never within
    assert math.isnan(comparison([], []).events_per_s)


def test_the_bound_is_the_floor_plus_a_margin_unless_given() -> None:
    floor = WakeFloor(timer_ms=np.linspace(0, 1, 101), datagram_ms=np.linspace(0, 2, 101))
    assert (floor.timer_p99_ms(), floor.datagram_p99_ms()) == pytest.approx((0.99, 1.98))
    assert floor.p99_ms() == pytest.approx(1.98)  # the larger of the two
    assert bound_of(floor, None) == pytest.approx(2.98)
    assert bound_of(floor, 0.5) == 0.5
    empty = WakeFloor(np.zeros(0), np.zeros(0))
    assert math.isnan(empty.p99_ms()) and math.isnan(bound_of(empty, None))
    half = WakeFloor(np.zeros(0), np.array([1.0, 1.0]))
    assert half.p99_ms() == 1.0  # one kind of sample is enough


def step(concurrency: int, ttft: float, gap: float = 0.5, bound: float = 3.0, lost: int = 0):
    """A step's verdict from its p99 figures (ms)."""
    return StepVerdict(concurrency, ttft, gap, bound, lost)


def test_conclusion_names_the_last_trusted_step_and_the_remedy() -> None:
    line = conclusion([step(64, 1.0), step(256, 2.5), step(1024, 86.5, gap=24.0)])
    assert line == (
        "Conclusion: trustworthy up to 256 streams on this machine; beyond, add --workers or "
        "cores (at 1024 streams the p99 errors were 86.50 ms (TTFT) and 24.00 ms (event gap) "
        "against 3.00 ms allowed)."
    )
    # Steps may come in any order; the gap error alone can fail a step.
    assert conclusion([step(256, 1.0, gap=4.0), step(64, 1.0)]).startswith(
        "Conclusion: trustworthy up to 64 streams on this machine; beyond, add --workers or cores"
    )


def test_conclusion_when_every_or_no_step_is_trusted() -> None:
    assert conclusion([step(64, 1.0), step(256, 2.0)]) == (
        "Conclusion: trustworthy up to 256 streams on this machine, the most tested; give "
        "--concurrency higher steps to find where it stops."
    )
    line = conclusion([step(64, 9.0), step(256, 12.0)])
    assert line.startswith("Conclusion: not trustworthy at any tested step on this machine (at 64")
    assert line.endswith("; add --workers or cores, or test fewer streams.")
    assert conclusion([]) == "Conclusion: no step was measured."


def test_conclusion_stops_at_the_first_untrusted_step() -> None:
    # A higher step that passes after a failing one is noise to recheck, not trust.
    line = conclusion([step(64, 1.0), step(256, 5.0), step(1024, 1.0)])
    assert line.startswith("Conclusion: trustworthy up to 64 streams on this machine; beyond,")
    assert line.endswith("; 1024 passed again, so rerun to confirm).")
    # Lost requests are the server's or the run's problem, not the client's speed.
    line = conclusion([step(64, 1.0), step(256, 1.0, lost=3)])
    assert line == (
        "Conclusion: trustworthy up to 64 streams on this machine; beyond, see the mock "
        "server's stderr (--work-dir keeps it) (at 256 streams 3 requests failed or went "
        "unrecorded)."
    )


def test_a_row_ends_with_its_verdict_or_stopped() -> None:
    server = records([("s-0", 0, [10 * MS, 20 * MS])])
    comparison = compare(client([10.2], [[10.1]], [""]), server, "s-")
    floor = WakeFloor(timer_ms=np.full(10, 0.1), datagram_ms=np.full(10, 0.2))
    verdict = judge(4, comparison, bound_of(floor, None))
    row = format_row(4, comparison, floor, verdict)
    assert row.split()[:3] == ["4", "1", "0"]
    assert row.split()[-2:] == ["1.20", "yes"]
    stopped = format_row(4, comparison, floor, verdict, stopped=True)
    # The same figures, and in the verdict's column (as wide as the word) no verdict.
    assert stopped == row[: -len("stopped")] + "stopped"


def test_compare_splits_the_ttft_error_into_the_servers_queue_and_the_clients_share() -> None:
    recorder = TimingRecorder()
    # Sent at 10 ms; read by the server at 12, its handler at 15, first token written at 16.
    recorder.pending["p0"] = (12 * MS, 1 * MS)
    recorder.add("p0", 15 * MS).extend([16 * MS, 26 * MS])
    recorder.add("p1", 40 * MS).extend([41 * MS, 51 * MS])  # no read stamp: not split
    server = TimingRecords.from_bytes(recorder.npz())
    assert server.read_ns is not None and server.read_ns.tolist() == [12 * MS, 0]
    assert server.accepted_ns is not None and server.accepted_ns.tolist() == [1 * MS, 0]
    # The client read the first token at 19 ms (TTFT 9) and at 39 + 4 for p1.
    run = client([9.0, 4.0], [[10.0], [10.0]], ["", ""], starts_ms=[10.0, 39.0])
    c = compare(run, server, "p")
    assert c.ttft_error_s * 1e3 == pytest.approx([9.0 - 1.0, 4.0 - 1.0])
    assert c.send_leg_s * 1e3 == pytest.approx([5.0, 1.0])  # the server's queue
    assert c.first_delivery_s is not None and c.first_delivery_s * 1e3 == pytest.approx([3.0, 2.0])
    # The two legs are the error, request for request.
    assert c.send_leg_s + c.first_delivery_s == pytest.approx(c.ttft_error_s)
    assert c.read_wait_s is not None and c.read_wait_s * 1e3 == pytest.approx([2.0])
    assert c.parse_queue_s is not None and c.parse_queue_s * 1e3 == pytest.approx([3.0])
