"""The steady window of --warmup-s and --cooldown-s, and a --duration run's requests as every
view counts them: pure functions over made-up runs."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from report_runs import N, full_config, made_up_run

from loadgen.records.event_source import materialized
from loadgen.records.model import RunRecords
from loadgen.report.campaign_summary import summary_metrics
from loadgen.report.exports import COLUMNS, STEADY_COLUMN, request_rows, write_csv
from loadgen.report.gate_keys import gate_problem
from loadgen.report.html_charts import over_time_figure
from loadgen.report.html_report import run_notes, run_over_time
from loadgen.report.result_json import result_json
from loadgen.report.settings import settings_of
from loadgen.report.steady import sent_by_deadline, steady_window, timed_window
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines, report_blocks
from workers.protocol import CANCELLED_AT_DEADLINE, NOT_SENT_AT_DEADLINE, UNSENT_ROW


def test_the_window_keeps_what_was_sent_after_the_warmup_and_ended_before_the_cooldown() -> None:
    send = np.array([0.0, 1.0, 2.0, 3.0, 4.0, -1.0])
    end = np.array([1.0, 2.0, 3.0, 4.0, 5.0, -1.0])
    window = timed_window(send, end, send >= 0, warmup_s=1.0, cooldown_s=1.0)
    assert window.kept.tolist() == [False, True, True, True, False, False]  # unsent: trimmed
    assert (window.start_s, window.end_s, window.duration_s, window.trimmed) == (1, 4, 3, 3)
    # no warm-up and no cool-down: every request sent, over the run's length
    whole = timed_window(send, end, send >= 0, 0.0, 0.0)
    assert whole.kept.sum() == 5 and whole.duration_s == 5.0
    # a window the run never reaches keeps nothing and has no length
    late = timed_window(send, end, send >= 0, 4.5, 1.0)
    assert late.kept.sum() == 0 and late.duration_s == 0.0
    nothing = timed_window(send[:0], end[:0], send[:0] >= 0, 1.0, 1.0)
    assert nothing.kept.sum() == 0


def test_the_campaign_rule_is_the_same_window_between_first_end_and_last_send() -> None:
    send = np.array([0.0, 0.5, 1.0, 1.5])
    end = np.array([1.0, 1.4, 2.0, 2.5])
    window = steady_window(send, end, send >= 0)
    assert (window.start_s, window.end_s) == (1.0, 1.5)
    assert window.kept.tolist() == [False, False, False, False]  # none ran wholly within it


def unsent(run: RunRecords, indices: list[int], why: str = NOT_SENT_AT_DEADLINE) -> RunRecords:
    """The run with ``indices`` never sent (their rows and events gone, the error ``why``)."""
    records = run.records.copy()
    counts = np.diff(run.event_offsets)
    keep_events = np.ones(len(run.event_ns), bool)
    for i in indices:
        keep_events[run.event_offsets[i] : run.event_offsets[i + 1]] = False
        records[i] = UNSENT_ROW
        records["index"][i] = i
        counts[i] = 0
    errors = {k: v for k, v in run.errors.items() if k not in indices}
    errors |= dict.fromkeys(indices, why)
    assert run.end is not None
    lens = run.end.output_lens.copy()
    lens[indices] = 0
    return dataclasses.replace(
        run,
        records=records,
        event_ns=run.event_ns[keep_events],
        event_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        errors=errors,
        end=dataclasses.replace(run.end, output_lens=lens),
    )


def test_requests_the_deadline_left_unsent_are_no_part_of_the_run() -> None:
    config = full_config(duration=0.06)
    run = made_up_run(config)
    cut = unsent(run, [3, 7])  # 7 was the failed one
    kept = sent_by_deadline(cut)
    assert kept.num_requests == N - 2 and kept.start.num_requests == N - 2
    assert kept.records["index"].tolist() == list(range(N - 2))
    assert kept.records["sent_ns"].tolist() == np.delete(run.records["sent_ns"], [3, 7]).tolist()
    assert kept.errors == {}
    # request 4 is now request 3, its events with it (read in chunks of a few events)
    kept_ns, kept_offsets = materialized(kept.event_source)
    assert kept_offsets.tolist() == kept.event_offsets.tolist()
    assert kept_ns[kept_offsets[3] : kept_offsets[4]].tolist() == (
        run.event_ns[run.event_offsets[4] : run.event_offsets[5]].tolist()
    )
    small = [values.tolist() for _, _, values in kept.event_source.chunks(max_events=3)]
    assert [t for chunk in small for t in chunk] == kept_ns.tolist()
    summary = summarize(settings_of(config), cut)
    assert (summary.totals.completed, summary.totals.failed) == (N - 2, 0)
    bound = summary.time_bound
    assert bound is not None and (bound.prepared, bound.not_sent, bound.cancelled) == (N, 2, 0)
    lines = console_lines(summary)
    assert "--duration 0.06 s: 6 of the 8 requests prepared were sent before the deadline" in lines
    keys = result_json(summary, "20261205-000000")["loadgen"]["time_bound"]
    assert keys == {
        "duration_s": 0.06,
        "grace_s": 30.0,
        "prepared": N,
        "not_sent_at_deadline": 2,
        "cancelled_at_grace": 0,
        "ran_out_s": None,  # paced: sending all that were scheduled is the plan
        "block_size": None,  # drawn at once (--duration-block not set)
        "block_seeds": None,
    }


def test_a_run_without_a_deadline_keeps_its_unsent_requests_as_failed() -> None:
    config = full_config()
    summary = summarize(
        settings_of(config), unsent(made_up_run(config), [3], why="not sent: stopped")
    )
    # Kept in the run: counted as not sent (never left the client), not dropped nor failed.
    assert (summary.totals.failed, summary.totals.not_sent) == (1, 1)
    assert summary.time_bound is None
    assert result_json(summary, "d")["loadgen"]["time_bound"] is None


def test_cancelled_at_the_grace_are_counted_apart() -> None:
    config = full_config(duration=0.06)
    run = made_up_run(config)
    run = dataclasses.replace(run, errors={N - 1: CANCELLED_AT_DEADLINE})
    bound = summarize(settings_of(config), run).time_bound
    assert bound is not None and (bound.not_sent, bound.cancelled) == (0, 1)
    assert any("1 in flight when --duration-grace-s 30 ran out" in line
               for line in console_lines(summarize(settings_of(config), run)))  # fmt: skip


def test_every_view_reports_the_steady_window_and_names_it() -> None:
    # sends 10 ms apart from 0.02 ms, each ending 80 ms later: the run ends at 150.07 ms
    config = full_config(warmup_s=0.02, cooldown_s=0.03)
    summary = summarize(settings_of(config), made_up_run(config))
    steady = summary.steady
    assert steady is not None
    assert steady.window.start_s == 0.02
    assert steady.window.end_s == pytest.approx(0.12007)
    assert steady.window.kept.tolist() == [False, False, True, True, True, False, False, False]
    assert steady.metrics["completed"] == 3 and steady.metrics["failed"] == 0
    assert steady.metrics["request_throughput"] == pytest.approx(3 / 0.10007)
    assert steady.metrics["mean_ttft_ms"] == pytest.approx(30.0)
    lines = console_lines(summary)
    title = next(line for line in lines if "Steady window" in line)
    assert "Steady window 0.02 s to 0.12 s" in title
    block = lines[lines.index(title) :]
    assert any(line.startswith("Requests in the window:") and line.split()[-1] == "3"
               for line in block)  # fmt: skip
    assert any(line.startswith("Request throughput (req/s):") for line in block)
    # report.html's tables come from the same blocks
    assert any("Steady window" in block.title for block in report_blocks(summary))
    # the JSON: loadgen.steady_window, upstream's keys keep the whole run
    result = result_json(summary, "d")
    window = result["loadgen"]["steady_window"]
    assert window["requests"] == 3 and window["trimmed"] == N - 3
    assert window["completed"] == 3 and isinstance(window["completed"], int)
    assert window["start_s"] == 0.02 and window["request_throughput"] == pytest.approx(29.98, 0.01)
    assert window["request_goodput"] is not None  # --goodput is set in full_config
    assert result["completed"] == N - 1


def test_no_window_without_warmup_or_cooldown() -> None:
    config = full_config()
    summary = summarize(settings_of(config), made_up_run(config))
    assert summary.steady is None
    assert result_json(summary, "d")["loadgen"]["steady_window"] is None
    assert not any("Steady window" in line for line in console_lines(summary))


def test_the_per_request_export_marks_the_window_and_report_html_shades_it() -> None:
    config = full_config(warmup_s=0.02, cooldown_s=0.03)
    summary = summarize(settings_of(config), made_up_run(config))
    rows = request_rows(summary, None)
    assert list(rows[0])[-1] == STEADY_COLUMN
    assert summary.steady is not None
    assert [row[STEADY_COLUMN] for row in rows] == summary.steady.window.kept.tolist()
    out = io.StringIO()
    write_csv(rows, out)
    header, first = out.getvalue().splitlines()[:2]
    assert header.endswith(",in_steady_window") and first.endswith(",false")
    # without a window the columns are the same as ever
    plain = summarize(settings_of(full_config()), made_up_run(full_config()))
    assert tuple(request_rows(plain, None)[0]) == COLUMNS
    shaded = over_time_figure([run_over_time("run", summary)])
    assert "steady window" in shaded
    assert "steady window" not in over_time_figure([run_over_time("run", plain)])


def test_the_window_figures_are_keys_fail_on_may_gate() -> None:
    gate = ("loadgen.steady_window.p99_ttft_ms>50", "loadgen.time_bound.not_sent_at_deadline>0")
    windowed = full_config(warmup_s=10.0, cooldown_s=5.0, duration=60.0, fail_on=gate)
    assert gate_problem(settings_of(windowed), dataclasses.asdict(windowed)) is None
    plain = full_config(fail_on=gate[:1])  # no window: no such key
    problem = gate_problem(settings_of(plain), dataclasses.asdict(plain))
    assert problem is not None and "no key loadgen.steady_window.p99_ttft_ms" in problem


def test_an_unpaced_run_that_sent_every_request_prepared_says_it_ran_out() -> None:
    config = full_config(duration=5.0, request_rate=float("inf"))
    summary = summarize(settings_of(config), made_up_run(config))
    bound = summary.time_bound
    assert bound is not None and bound.ran_out_s == pytest.approx(0.07007)
    assert (
        "--duration 5 s: all 8 requests prepared were sent, the last 0.07 s after t0: the run ran "
        "out of requests before the deadline (give --num-prompts more)"
    ) in console_lines(summary)
    # one left unsent: the deadline ended the run, not the count
    left = summarize(settings_of(config), unsent(made_up_run(config), [7])).time_bound
    assert left is not None and left.ran_out_s is None


def test_a_campaigns_summary_csv_counts_each_run_over_its_window() -> None:
    config = full_config(warmup_s=0.02, cooldown_s=0.03)
    summary = summarize(settings_of(config), made_up_run(config))
    assert summary.steady is not None
    metrics, trimmed = summary_metrics(summary)
    assert metrics == summary.steady.metrics and trimmed == N - 3
    # --steady-state asks for its own rule, which wins
    _, by_rule = summary_metrics(summary, steady=True)
    sent_s = summary.requests.results.sent_s
    assert by_rule == steady_window(sent_s, summary.requests.end_s, sent_s >= 0).trimmed


def test_report_html_says_what_the_deadline_did() -> None:
    config = full_config(duration=0.06)
    summary = summarize(settings_of(config), unsent(made_up_run(config), [3, 7]))
    assert "--duration 0.06 s: 6 of the 8 requests prepared were sent before the deadline" in (
        run_notes(summary)
    )


def test_requests_never_sent_for_another_reason_are_not_counted_as_sent() -> None:
    config = full_config(duration=0.06)
    run = made_up_run(config)
    gone = "not sent: worker 1 was gone when its block came"
    cut = unsent(unsent(run, [3]), [1, 5], gone)  # 3 left by the deadline, 1 and 5 by a worker
    summary = summarize(settings_of(config), cut)
    bound = summary.time_bound
    assert bound is not None and (bound.not_sent, bound.not_sent_otherwise) == (1, 2)
    assert (
        "--duration 0.06 s: 5 of the 8 requests prepared were sent before the deadline (2 more "
        "never left the client: a stop, or a worker gone)"
    ) in console_lines(summary)
