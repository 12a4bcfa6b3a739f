"""What the report reads of a configuration: ``Settings`` and ``ReportOutput``, built once by
loadgen/report/settings.py from a live RunConfig or from the one a records file stores (no
socket, no subprocess)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_report_offline import a_run, config, write

from loadgen.config import ConfigError, RunConfig
from loadgen.records.read import read_records
from loadgen.report.report_output import NO_FILES, ReportOutput
from loadgen.report.result_json import result_path
from loadgen.report.settings import output_of, report_config, settings_of, stored_settings


def test_the_settings_carry_what_the_report_reads_of_the_flags() -> None:
    cfg = RunConfig(
        request_rate=10.0,
        max_concurrency=4,
        ramp_up_strategy="linear",
        ramp_up_start_rps=1,
        ramp_up_end_rps=5,
        percentile_metrics="ttft,e2el",
        metric_percentiles="50,99.9",
        probe_request_rate=1.0,
        steady_state=True,
        skip_tokenizer_init=True,
        fail_on=("failed>0",),
    )
    settings = settings_of(cfg)
    assert (settings.request_rate, settings.max_concurrency) == (10.0, 4)
    assert (settings.ramp_up_start_rps, settings.ramp_up_end_rps) == (1, 5)
    assert (settings.metrics, settings.percentiles) == (("ttft", "e2el"), (50.0, 99.9))
    assert settings.probes and settings.steady_state and not settings.tokenizer
    assert not settings.self_timed and settings.fail_on == ("failed>0",)
    assert settings_of(RunConfig()).metrics == ("ttft", "tpot", "itl")  # upstream's default
    with pytest.raises(ConfigError, match="--percentile-metrics: unknown metric 'ttfb'"):
        settings_of(RunConfig(percentile_metrics="ttfb"))


def test_the_output_parses_the_timeline_thresholds_once_and_only_for_the_timeline() -> None:
    plotted = output_of(RunConfig(plot_timeline=True, timeline_itl_thresholds="10,40"))
    assert plotted.itl_thresholds_s == (0.01, 0.04)
    assert output_of(RunConfig(timeline_itl_thresholds="x")).itl_thresholds_s is None
    with pytest.raises(ConfigError, match="Expected 2 ITL threshold values, got 3"):
        output_of(RunConfig(plot_timeline=True, timeline_itl_thresholds="1,2,3"))
    with pytest.raises(ValueError, match="--timeline-itl-thresholds"):
        ReportOutput(plot_timeline=True)
    assert not NO_FILES.writes_result and ReportOutput(append_result=True).writes_result


def test_the_result_path_reads_the_settings_and_the_output() -> None:
    cfg = RunConfig(label="nightly", request_rate=5.0, max_concurrency=8)
    path = result_path(settings_of(cfg), output_of(cfg), "org/model", "20261205-100000")
    assert path == "nightly-5.0qps-concurrency8-model-20261205-100000.json"
    placed = dataclasses.replace(cfg, result_dir="out", result_filename="r.json")
    assert result_path(settings_of(placed), output_of(placed), "org/model", "d") == "out/r.json"


def test_a_records_file_gives_back_the_settings_the_run_had(tmp_path: Path) -> None:
    cfg = config(request_rate=100.0, metric_percentiles="50,99", goodput={"ttft": 50.0})
    run, collected = a_run(cfg)
    path = tmp_path / "r.records.arrow"
    write(run, collected, path)
    stored = read_records(str(path))
    assert stored_settings(stored, str(path)) == settings_of(cfg)
    again = report_config(stored, str(path), {"metric_percentiles": "90"})
    assert settings_of(again).percentiles == (90.0,)
    assert output_of(again) == NO_FILES  # a report writes files only when asked again
