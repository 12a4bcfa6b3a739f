"""A report is a pure function of a run's records: built in memory or from the records file,
it is the same, and reporting flags given again apply (no socket, no subprocess)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from report_runs import EVENTS, N, start_and_end

from loadgen.cli import cli
from loadgen.config import ConfigError, RunConfig
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.checks import RecordsFileError
from loadgen.records.collected import Collected
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records
from loadgen.report.offline import rebuild_report
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, report_config, settings_note, settings_of
from workers.protocol import RECORD_DTYPE


def config(**changes: object) -> RunConfig:
    return dataclasses.replace(
        RunConfig(workers=2, save_result=True, request_id_prefix="bench-x-"), **changes
    )


def a_run(cfg: RunConfig) -> tuple[RunRecords, Collected]:
    """N requests, 5 events 10 ms apart each, the last one failed; paced at 100/s."""
    records = np.zeros(N, dtype=RECORD_DTYPE)
    records["index"] = np.arange(N)
    records["cached_tokens"] = -1  # the server reported no prefix-cache hits
    records["released_ns"] = np.arange(N) * 10_000_000 + 50_000
    records["sent_ns"] = records["released_ns"] + 20_000
    records["n_events"] = EVENTS
    records["n_events"][-1] = 0
    records["status"] = 200
    records["status"][-1] = 500
    records["prompt_tokens"] = 30
    records["completion_tokens"] = EVENTS
    records["success"] = True
    records["success"][-1] = False
    records["server_queue_s"] = np.nan
    records["server_ttft_s"] = np.nan
    starts = records["sent_ns"][:-1]
    event_ns = (starts[:, None] + 30_000_000 + 10_000_000 * np.arange(EVENTS)).ravel()
    records["end_ns"] = records["sent_ns"] + 80_000_000
    collected = Collected(
        records=records,
        event_ns=event_ns.astype(np.int64),
        event_offsets=np.concatenate(([0], np.cumsum(records["n_events"]))).astype(np.int64),
        errors={N - 1: "HTTP 500: boom"},
        texts={},
        t0_ns=1_000,
        connections=4,
        worker=np.array([0, 1] * (N // 2), dtype=np.int16),
        t0_wall="2026-12-03T10:00:00",
    )
    start, end = start_and_end(cfg, records)
    run = RunRecords(
        start=start,
        end=end,
        records=records,
        worker=collected.worker,
        scheduled_ns=np.arange(N, dtype=np.int64) * 10_000_000,
        input_tokens=np.full(N, 29, dtype=np.int64),
        input_sequences=np.ones(N, dtype=np.int64),
        event_ns=collected.event_ns,
        event_offsets=collected.event_offsets,
        errors=collected.errors,
        texts={},
    )
    return run, collected


def write(run: RunRecords, collected: Collected, path: Path) -> None:
    """The records file the live run would have written, batch by batch."""
    writer = RecordsWriter(
        str(path), run.start, run.scheduled_ns, run.input_tokens, run.input_sequences, "bench-x-"
    )
    writer.start(run.start.t0_ns, run.start.t0_wall, run.start.connections)
    for half in (slice(0, N // 2), slice(N // 2, N)):
        rows = collected.records[half]
        events = collected.event_ns[
            collected.event_offsets[half.start] : collected.event_offsets[half.stop]
        ]
        writer.write(
            0,
            rows,
            events,
            {i: e for i, e in collected.errors.items() if half.start <= i < half.stop},
            {},
        )
    writer.finish(collected, run.end)  # type: ignore[arg-type]


def test_the_report_from_the_file_is_the_live_report(tmp_path: Path) -> None:
    cfg = config(request_rate=100.0, save_detailed=True)
    run, collected = a_run(cfg)
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    live = build_report(settings_of(cfg), output_of(cfg), run, date="20261203-100000")
    rebuilt = build_report(
        settings_of(cfg), output_of(cfg), read_records(str(path)), date="20261203-100000"
    )
    assert rebuilt.lines == live.lines
    assert rebuilt.result == live.result
    assert live.result is not None and live.result["completed"] == N - 1
    assert live.lines[-1].startswith(("client: OK", "client-bound"))
    assert (live.completed, live.first_error) == (N - 1, "HTTP 500: boom")


def test_reporting_flags_replace_the_stored_ones(tmp_path: Path) -> None:
    cfg = config(request_rate=100.0)
    run, collected = a_run(cfg)
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    report = rebuild_report(
        str(path),
        {
            "metric_percentiles": "50,90",
            "percentile_metrics": "ttft,e2el",
            "label": "again",
            "save_result": True,
        },
        date="20261203-110000",
    )
    assert report.result is not None
    assert {"p50_ttft_ms", "p90_ttft_ms", "p90_e2el_ms"} <= set(report.result)
    assert "p99_ttft_ms" not in report.result
    assert report.path == "again-100.0qps-model-20261203-110000.json"
    with pytest.raises(ConfigError, match="--metric-percentiles"):
        settings_of(report_config(read_records(str(path)), str(path), {"metric_percentiles": "x"}))


def test_a_report_writes_files_only_when_asked_again(tmp_path: Path) -> None:
    cfg = config(save_detailed=True, result_dir=str(tmp_path), plot_dataset_stats=True)
    run, collected = a_run(cfg)
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    report = rebuild_report(str(path), {}, date="d")
    assert report.result is None  # the run had --save-result; the report was not asked to
    settings, output = report.summary.settings, report.output
    assert (settings.save_detailed, output.result_dir, output.plot_dataset_stats) == (
        False,
        None,
        False,
    )
    assert (settings.percentiles, settings.request_rate) == ((99.0,), cfg.request_rate)


def test_a_file_of_another_version_reports_without_the_settings_it_does_not_share(
    tmp_path: Path,
) -> None:
    """Forged metadata: a setting of a newer loadgen is dropped, one an older loadgen did not
    store takes its default, and one note names both."""
    cfg = config(request_rate=100.0, metric_percentiles="50,99")
    run, collected = a_run(cfg)
    run.start.config["flag_from_the_future"] = 1
    del run.start.config["metric_percentiles"], run.start.config["burstiness"]
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    report = rebuild_report(str(path), {"save_result": True}, date="d")
    settings = report.summary.settings
    assert (settings.percentiles, settings.burstiness) == ((99.0,), 1.0)  # the defaults
    assert settings.request_rate == 100.0  # the settings both know are the run's
    assert report.result is not None and "p99_ttft_ms" in report.result
    assert "p50_ttft_ms" not in report.result
    assert settings_note(read_records(str(path)), "r.records.arrow") == (
        f"r.records.arrow was written by loadgen {run.start.loadgen_version}; settings this "
        "version does not know were dropped: flag_from_the_future; settings it did not store "
        "take their defaults: burstiness, metric_percentiles"
    )


def test_a_file_of_this_version_has_no_settings_note(tmp_path: Path) -> None:
    run, collected = a_run(config())
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    assert settings_note(read_records(str(path)), str(path)) is None


def test_a_setting_of_the_wrong_type_is_still_refused(tmp_path: Path) -> None:
    run, collected = a_run(config())
    run.start.config["num_prompts"] = "many"
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    with pytest.raises(RecordsFileError, match="its setting num_prompts is of the wrong type"):
        rebuild_report(str(path), {}, date="d")


def test_a_run_that_did_not_end_is_reported_as_interrupted(tmp_path: Path) -> None:
    cfg = config()
    run, _ = a_run(cfg)
    unfinished = dataclasses.replace(run, end=None)
    report = build_report(settings_of(cfg), output_of(cfg), unfinished, date="d")
    assert report.result is not None
    assert report.result["loadgen"]["interrupted"] is True
    assert report.result["loadgen"]["worker_problems"] == [
        "the run did not end: its records file stops before the end"
    ]
    assert report.result["total_output_tokens"] == (N - 1) * EVENTS  # from the server's usage
    assert report.lines[-1].startswith("client: not judged: the run did not end")
    assert report.result["loadgen"]["verdict"] == report.lines[-1]


def test_streams_that_ended_without_done_are_counted_and_warned_about() -> None:
    cfg = config()
    run, _ = a_run(cfg)
    report = build_report(settings_of(cfg), output_of(cfg), run, date="d")
    assert report.result is not None and report.result["loadgen"]["truncated_streams"] == 0
    assert not any("without data: [DONE]" in line for line in report.lines)
    run.records["truncated"][:2] = True
    report = build_report(settings_of(cfg), output_of(cfg), run, date="d")
    assert report.result is not None
    extra = list(report.result["loadgen"])
    assert extra[extra.index("resent_on_stale_connection") + 1] == "truncated_streams"
    assert report.result["loadgen"]["truncated_streams"] == 2
    assert report.result["completed"] == N - 1  # counted as upstream counts them
    warning = next(line for line in report.lines if "without data: [DONE]" in line)
    assert warning.startswith("warning: 2 streams ended without data: [DONE]; counted as upstream")
    assert report.lines.index(warning) < len(report.lines) - 1  # before the verdict


def test_loadgen_report_prints_the_settings_note_on_standard_error(tmp_path: Path) -> None:
    run, collected = a_run(config())
    run.start.config["flag_from_the_future"] = 1
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    result = CliRunner().invoke(cli, ["report", str(path)])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "flag_from_the_future" in line]
    assert notes == [
        f"note: {path} was written by loadgen {run.start.loadgen_version}; settings this "
        "version does not know were dropped: flag_from_the_future"
    ]
    assert "flag_from_the_future" not in result.stdout


def test_loadgen_compare_notes_a_side_written_by_another_version_once(tmp_path: Path) -> None:
    run, collected = a_run(config())
    base, other = tmp_path / "base.records.arrow", tmp_path / "other.records.arrow"
    write(run, collected, base)
    run.start.config["flag_from_the_future"] = 1
    write(run, collected, other)
    result = CliRunner().invoke(cli, ["compare", str(base), str(other), "--resamples", "0"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: {other} was written by loadgen {run.start.loadgen_version}; settings this "
        "version does not know were dropped: flag_from_the_future"
    ]
