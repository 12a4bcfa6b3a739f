"""The live view's figures from record batches: rings, rolling percentiles, rates, in flight,
error kinds, worker loads, and the plain line that shows them."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from report_runs import POOLING_BACKEND, N, full_config, made_up_run, stopped_run

from loadgen.report.failures import error_kind
from loadgen.report.settings import settings_of
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines
from loadgen.session.live_figures import (
    LATENCY_WINDOW_NS,
    LiveFigureState,
    Ring,
    WorkerLoad,
    in_flight,
    load_between,
    percentiles,
    rate_over,
)
from loadgen.session.live_view import panel, plain_line
from workers.protocol import NOT_SENT_AT_DEADLINE, RECORD_DTYPE

MS = 1_000_000
S = 1_000_000_000


def batch(
    rows: list[tuple[int, int, list[int], bool, int]],
) -> tuple[np.ndarray, np.ndarray]:
    """RECORD_DTYPE rows and their events from (index, sent_ns, event instants, success,
    completion_tokens) tuples."""
    records = np.zeros(len(rows), dtype=RECORD_DTYPE)
    events: list[int] = []
    for row, (index, sent_ns, instants, ok, tokens) in zip(records, rows, strict=True):
        row["index"], row["sent_ns"], row["success"] = index, sent_ns, ok
        row["n_events"], row["completion_tokens"] = len(instants), tokens
        row["end_ns"] = instants[-1] if instants else sent_ns
        events += instants
    return records, np.array(events, dtype=np.int64)


def test_a_ring_keeps_the_newest_values_and_selects_by_instant() -> None:
    ring = Ring(4)
    ring.push(np.array([1, 2, 3]), np.array([10.0, 20.0, 30.0]))
    ring.push(np.array([4, 5, 6]), np.array([40.0, 50.0, 60.0]))
    assert sorted(ring.since(0).tolist()) == [30.0, 40.0, 50.0, 60.0]
    assert sorted(ring.since(5).tolist()) == [50.0, 60.0]
    ring.push(np.arange(10, 20), np.arange(10, 20, dtype=float))  # more than it holds
    assert sorted(ring.since(0).tolist()) == [16.0, 17.0, 18.0, 19.0]


def test_percentiles_are_in_ms_and_none_without_a_sample() -> None:
    assert percentiles(np.zeros(0)) is None
    figures = percentiles(np.arange(1, 101) / 1e3)  # 1..100 ms
    assert figures is not None
    assert figures.p50_ms == pytest.approx(50.5)
    assert figures.p99_ms == pytest.approx(99.01)


def test_error_kinds_are_the_first_words_before_a_colon() -> None:
    assert error_kind("HTTP 500 Internal Server Error: {json}") == "HTTP 500 Internal Server Error"
    assert error_kind("ClientConnectorError: Cannot connect to host") == "ClientConnectorError"
    assert error_kind("a b c d e f g h") == "a b c d e"
    assert error_kind("") == "(empty)"


def test_rates_span_the_window_or_the_sample_before() -> None:
    samples = deque([(0, 0, 0), (1 * S, 100, 1000), (6 * S, 600, 6000), (7 * S, 800, 8000)])
    req, tok = rate_over(samples, 5 * S)  # from the sample at 6 s: 1 s, 200 requests
    assert (req, tok) == (pytest.approx(200.0), pytest.approx(2000.0))
    req, _ = rate_over(deque([(0, 0, 0), (5_100 * MS, 510, 0)]), 5 * S)  # none in the window
    assert req == pytest.approx(100.0)
    assert rate_over(deque([(0, 0, 0)]), 5 * S) == (0.0, 0.0)


def test_in_flight_is_due_less_finished_within_the_cap() -> None:
    scheduled = np.array([0, 0, 0, 10, 20, 30]) * MS
    assert in_flight(scheduled, 15 * MS, finished=1, cap=10) == 3
    assert in_flight(scheduled, 15 * MS, finished=1, cap=2) == 2
    assert in_flight(scheduled, 40 * MS, finished=6, cap=10) == 0


def test_worker_loads_come_from_two_readings() -> None:
    before = {7: (0, 0, 0), 8: (0, 0, 0)}
    after = {7: (50 * MS, 10 * MS, 100 * MS), 8: (0, 0, 0), 9: (1, 1, 1)}
    loads = load_between(before, after)  # 8 has no newer reading, 9 no earlier one
    assert len(loads) == 1
    assert (loads[0].cpu_pct, loads[0].wait_pct) == (pytest.approx(50.0), pytest.approx(10.0))


def test_batches_give_counts_tokens_ttft_and_itl_of_successes_only() -> None:
    state = LiveFigureState(total=5, scheduled_ns=np.zeros(5, dtype=np.int64), cap=4)
    records, events = batch(
        [
            (0, 0, [10 * MS, 12 * MS, 14 * MS], True, 7),  # usage: 7 tokens
            (1, 5 * MS, [25 * MS, 26 * MS], True, -1),  # no usage: 2 events
            (2, 0, [100 * MS, 200 * MS], False, -1),  # failed mid-stream: left out
        ]
    )
    state.add_batch(records, events, {2: "HTTP 500 Internal Server Error: x"})
    figures = state.figures(1 * S)
    assert (figures.completed, figures.failed, figures.finished) == (2, 1, 3)
    assert figures.in_flight == 2  # 5 due, 3 finished, cap 4
    assert state.tokens == 9
    assert figures.output_tok_per_s == pytest.approx(9.0)  # 9 tokens over the first second
    assert figures.req_per_s == pytest.approx(2.0)
    assert figures.ttft is not None and figures.itl is not None
    assert (figures.ttft.p50_ms, figures.ttft.p99_ms) == (pytest.approx(15.0), pytest.approx(19.9))
    assert figures.itl.p50_ms == pytest.approx(2.0)  # 2, 2 and 1 ms: never 100 nor 11
    assert figures.itl.p99_ms == pytest.approx(2.0)
    assert figures.errors == [("HTTP 500 Internal Server Error", 1)]


def test_tokens_still_streaming_count_in_the_rate_before_any_answer_ends() -> None:
    state = LiveFigureState(total=4, scheduled_ns=np.zeros(4, dtype=np.int64), cap=None)
    state.streaming.update({0: 300, 1: 200})  # two workers' PROGRESS after the first second
    figures = state.figures(1 * S)
    assert (figures.completed, state.tokens) == (0, 0)
    assert figures.output_tok_per_s == pytest.approx(500.0)
    assert figures.req_per_s == 0.0
    state.streaming[0] = 0  # its answers ended: their tokens come in its records instead
    records, events = batch([(0, 0, [10 * MS] * 3, True, 600)])
    state.add_batch(records, events, {})
    assert state.figures(2 * S).output_tok_per_s == pytest.approx(400.0)  # 500 -> 900 tokens


def test_latencies_older_than_the_window_drop_out() -> None:
    state = LiveFigureState(total=2, scheduled_ns=np.zeros(2, dtype=np.int64), cap=None)
    state.add_batch(*batch([(0, 0, [10 * MS, 11 * MS], True, 2)]), {})
    late = LATENCY_WINDOW_NS + 1 * S
    state.add_batch(*batch([(1, late, [late + 40 * MS, late + 43 * MS], True, 2)]), {})
    figures = state.figures(late + 1 * S)
    assert figures.ttft is not None and figures.itl is not None
    assert figures.ttft.p99_ms == pytest.approx(40.0)
    assert figures.itl.p50_ms == pytest.approx(3.0)
    assert state.figures(late + LATENCY_WINDOW_NS + 1 * S).ttft is None


def test_a_batch_without_events_counts_its_failures() -> None:
    state = LiveFigureState(total=2, scheduled_ns=np.zeros(2, dtype=np.int64), cap=None)
    state.add_batch(*batch([(0, 0, [], False, -1), (1, 0, [], False, -1)]), {0: "a: x", 1: "a: y"})
    figures = state.figures(S)
    assert (figures.completed, figures.failed, figures.errors) == (0, 2, [("a", 2)])
    assert figures.ttft is None and figures.itl is None


def test_the_plain_line_holds_every_figure_and_the_started_mark() -> None:
    state = LiveFigureState(total=4, scheduled_ns=np.zeros(4, dtype=np.int64), cap=None)
    state.add_batch(*batch([(0, 0, [10 * MS, 12 * MS], True, 2)]), {})
    state.add_batch(*batch([(1, 0, [], False, -1)]), {1: "connect timeout: no connection"})
    line = plain_line(state.figures(2 * S, coordinator_cpu_pct=12.0))
    assert "%|" in line  # what tests and scripts wait for at t0, as with tqdm's bar
    for part in ("50%| 2/4 finished", "1 completed, 1 failed, 2 in flight", "0.5 req/s",
                 "1 output tok/s", "TTFT 10.0 / 10.0 ms", "ITL 2.0 / 2.0 ms",
                 "errors: connect timeout ×1", "coordinator CPU 12%"):  # fmt: skip
        assert part in line, (part, line)
    assert "\n" not in line


def test_batches_wait_for_the_next_fold_and_fold_together() -> None:
    state = LiveFigureState(total=3, scheduled_ns=np.zeros(3, dtype=np.int64), cap=None)
    state.add_batch(*batch([(0, 0, [10 * MS, 11 * MS], True, 2)]), {})
    state.add_batch(*batch([(1, 0, [20 * MS, 24 * MS], True, 2)]), {})
    state.add_batch(*batch([(2, 0, [], False, -1)]), {2: "lost: worker died"})
    assert state.completed == 0 and len(state.pending) == 3
    figures = state.figures(S)
    assert not state.pending
    assert (figures.completed, figures.failed, figures.errors) == (2, 1, [("lost", 1)])
    assert figures.itl is not None and figures.itl.p99_ms == pytest.approx(3.97)  # not 9


def test_the_panel_shows_the_same_figures() -> None:
    state = LiveFigureState(total=4, scheduled_ns=np.zeros(4, dtype=np.int64), cap=None)
    state.add_batch(*batch([(0, 0, [10 * MS, 12 * MS], True, 2)]), {})
    text = panel(state.figures(2 * S, [WorkerLoad(80.0, 5.0)], 12.0)).plain
    for part in ("25%| 1/4", "1 completed   0 failed   3 in flight", "TTFT 10.0 / 10.0 ms",
                 "errors            none",
                 "worker 0 CPU 80% (waits 5%), coordinator CPU 12%"):  # fmt: skip
        assert part in text, (part, text)


def test_the_final_line_shows_the_run_s_summary() -> None:
    """The last frame, drawn as the run ends, is of the whole run: the figures, names and
    error kinds its summary prints after it."""
    cfg = full_config()
    run = made_up_run(cfg)
    run.errors[N - 1] = "HTTP 500 Internal Server Error: boom"
    summary = summarize(settings_of(cfg), run)
    state = LiveFigureState(N, run.scheduled_ns, cfg.max_concurrency)
    starts = run.event_offsets
    for half in (slice(0, N // 2), slice(N // 2, N)):  # two batches, as the workers send them
        rows = run.records[half]
        events = run.event_ns[starts[half.start] : starts[half.stop]]
        errors = {i: e for i, e in run.errors.items() if half.start <= i < half.stop}
        state.add_batch(rows, events, errors)
    figures = state.figures(2 * S, final=True)
    totals = summary.totals
    assert (figures.completed, figures.failed) == (totals.completed, totals.failed)
    assert figures.run_s == totals.duration
    assert figures.req_per_s == pytest.approx(totals.request_throughput)
    assert figures.output_tok_per_s == pytest.approx(totals.output_throughput)
    assert figures.errors == sorted(summary.errors.by_kind.items())
    assert figures.latencies_of_run
    for name, shown in (("ttft", figures.ttft), ("itl", figures.itl)):
        stats = summary.latencies[name]
        assert shown is not None
        assert shown.p50_ms == pytest.approx(stats.median_ms)
        assert shown.p99_ms == pytest.approx(dict(stats.percentiles_ms)[99.0])
    line = plain_line(figures)
    itl = summary.latencies["itl"]
    for part in (
        f"{totals.completed} completed, {totals.failed} failed",
        f"run ({totals.duration:.2f} s) {totals.request_throughput:.2f} req/s, "
        f"{totals.output_throughput:.2f} output tok/s",
        f"run p50/p99: TTFT {summary.latencies['ttft'].median_ms:.2f} / ",
        f"ITL {itl.median_ms:.2f} / {dict(itl.percentiles_ms)[99.0]:.2f} ms",
        "errors: HTTP 500 Internal Server Error ×1",
    ):
        assert part in line, (part, line)
    console = "\n".join(console_lines(summary))  # the same names as the summary's rows
    for label in ("Successful requests:", "Request throughput (req/s):", "Mean TTFT (ms):"):
        assert label in console
    assert "now (5 s)" not in panel(figures).plain and "run (" in panel(figures).plain


def test_a_run_too_long_for_the_rings_keeps_its_last_10_s() -> None:
    state = LiveFigureState(total=2, scheduled_ns=np.zeros(2, dtype=np.int64), cap=None)
    state.ttft.pushed = len(state.ttft.values) + 1  # as after more requests than it holds
    state.add_batch(*batch([(0, 0, [10 * MS, 11 * MS], True, 2)]), {})
    figures = state.figures(20 * S, final=True)
    assert not figures.latencies_of_run and figures.ttft is None
    assert "last 10 s p50/p99: TTFT -" in plain_line(figures)


def test_a_pooling_run_s_final_line_names_its_e2el_and_no_tokens() -> None:
    cfg = full_config(backend=POOLING_BACKEND, goodput=None)
    run = made_up_run(cfg)
    summary = summarize(settings_of(cfg), run)
    state = LiveFigureState(N, run.scheduled_ns, cfg.max_concurrency, pooling=True)
    state.add_batch(run.records, run.event_ns, dict(run.errors))
    figures = state.figures(2 * S, final=True)
    e2el = summary.latencies["e2el"]
    assert figures.ttft is not None and figures.ttft.p50_ms == pytest.approx(e2el.median_ms)
    line = plain_line(figures)
    assert f"run p50/p99: E2EL {e2el.median_ms:.2f} / " in line
    assert f"{summary.totals.request_throughput:.2f} req/s |" in line
    assert "tok/s" not in line and "TTFT" not in line and "ITL" not in line
    assert "E2EL" in panel(figures).plain and "tok/s" not in panel(figures).plain


def test_error_kinds_are_listed_as_report_html_lists_them() -> None:
    state = LiveFigureState(total=3, scheduled_ns=np.zeros(3, dtype=np.int64), cap=None)
    rows = [(i, 0, [], False, -1) for i in range(3)]
    state.add_batch(*batch(rows), {0: "timeout: a", 1: "HTTP 500: b", 2: "timeout: c"})
    assert state.figures(S).errors == [("timeout", 2), ("HTTP 500", 1)]
    state.add_batch(*batch([(3, 0, [], False, -1)]), {3: "HTTP 500: d"})
    assert state.figures(2 * S).errors == [("HTTP 500", 2), ("timeout", 2)]  # ties by name


def test_a_stopped_run_s_last_frame_counts_as_its_summary() -> None:
    """Ctrl-C: the last frame counts the failed, the cancelled and the not sent apart, as the
    summary does, and lists the kinds of the failed alone."""
    cfg = full_config()
    run = stopped_run(cfg)
    summary = summarize(settings_of(cfg), run)
    state = LiveFigureState(N, run.scheduled_ns, cfg.max_concurrency)
    state.add_batch(run.records, run.event_ns, run.errors)
    figures = state.figures(2 * S, final=True)
    totals = summary.totals
    assert (figures.completed, figures.failed, figures.cancelled, figures.not_sent) == (
        totals.completed, totals.failed, totals.cancelled, totals.not_sent,
    )  # fmt: skip
    assert figures.finished == N and figures.in_flight == 0
    assert figures.errors == sorted(summary.errors.by_kind.items())
    assert "5 completed, 1 failed, 1 cancelled, 1 not sent, 0 in flight" in plain_line(figures)
    assert "5 completed   1 failed   1 cancelled   1 not sent   0 in flight" in (
        panel(figures).plain
    )


def test_a_run_bounded_by_time_shows_the_time_and_leaves_out_what_the_deadline_left() -> None:
    state = LiveFigureState(
        total=4, scheduled_ns=np.zeros(4, dtype=np.int64), cap=2, deadline_s=2.0
    )
    state.add_batch(*batch([(0, 0, [10 * MS, 12 * MS], True, 2)]), {})
    assert "25%| 1/4 finished" in plain_line(state.figures(S // 2))  # a quarter of the time
    unsent = {2: NOT_SENT_AT_DEADLINE, 3: NOT_SENT_AT_DEADLINE}
    state.add_batch(*batch([(1, 0, [30 * MS], True, 1), (2, -1, [], False, -1),
                            (3, -1, [], False, -1)]), unsent)  # fmt: skip
    figures = state.figures(3 * S)
    assert (figures.completed, figures.failed, figures.total, figures.errors) == (2, 0, 2, [])
    assert "100%| 2/2 finished" in plain_line(figures)
