"""The report's one door to the run's configuration: what a report reads of a ``RunConfig``
(``Settings``, in every ``RunSummary``) and what it writes (``ReportOutput``), each built once
where a report is made (the live run, ``loadgen report``, a campaign's page, compare), from the
run's configuration or from the one its records file stores.

No other module of loadgen/report/ imports loadgen.config (setup.cfg's contract
``report-reads-its-settings``); a setting a view needs is a field of ``Settings`` first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadgen.config import RUN_FLAGS, ConfigError, RunConfig, parse_itl_thresholds
from loadgen.plot_extra import PLOT_EXTRA, missing_libraries
from loadgen.records.checks import check_settings, setting_names
from loadgen.records.model import RunRecords
from loadgen.report.report_output import ReportOutput
from loadgen.report.run_summary import Settings


def settings_of(config: RunConfig) -> Settings:
    """What the report reads of the configuration (ConfigError for a bad
    ``--percentile-metrics`` or ``--metric-percentiles``)."""
    return Settings(
        backend=config.backend,
        label=config.label,
        num_prompts=config.num_prompts,
        metadata=config.metadata,
        request_rate=config.rate,
        burstiness=config.burstiness,
        max_concurrency=config.concurrency,
        ramp_up_strategy=config.ramp_up_strategy,
        ramp_up_start_rps=config.ramp_up_start_rps,
        ramp_up_end_rps=config.ramp_up_end_rps,
        self_timed=config.self_timed_trace,
        pooling=config.pooling,
        tokenizer=not config.skip_tokenizer_init,
        save_detailed=config.save_detailed,
        metrics=tuple(config.selected_metrics()),
        percentiles=tuple(config.percentiles()),
        goodput=config.goodput,
        server_url=config.server_url,
        endpoint=config.endpoint,
        mock=config.mock,
        fail_on=tuple(config.fail_on or ()),
        probes=config.probe_request_rate > 0,
        steady_state=config.steady_state,
        duration=config.duration,
        duration_grace_s=config.duration_grace_s,
        warmup_s=config.warmup_s,
        cooldown_s=config.cooldown_s,
        seed=config.seed,
        duration_block=config.duration_block,
        search=config.search,
        slo=tuple(config.slo or ()),
    )


def output_of(config: RunConfig) -> ReportOutput:
    """The files the configuration asks the report to write (ConfigError for a bad
    ``--timeline-itl-thresholds`` with ``--plot-timeline``)."""
    thresholds = None
    if config.plot_timeline:
        try:
            thresholds = parse_itl_thresholds(config.timeline_itl_thresholds)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return ReportOutput(
        save_result=config.save_result,
        append_result=config.append_result,
        result_dir=config.result_dir,
        result_filename=config.result_filename,
        plot_timeline=config.plot_timeline,
        plot_dataset_stats=config.plot_dataset_stats,
        itl_thresholds_s=thresholds,
    )


def stored_config(run: RunRecords, path: str) -> RunConfig:
    """The RunConfig the run had, from its records file. A file of another loadgen version
    still reads: a setting this one does not know is dropped, one it lacks takes its default
    (``settings_note`` says which)."""
    check_settings(run.start.config, RunConfig, path)
    unknown, _ = setting_names(run.start.config, RunConfig)
    values: dict[str, Any] = {k: v for k, v in run.start.config.items() if k not in unknown}
    if isinstance(values.get("given"), list):
        values["given"] = frozenset(values["given"])
    return RunConfig(**values)


def stored_settings(run: RunRecords, path: str) -> Settings:
    """The Settings of the run whose records are at ``path``, as it ran."""
    return settings_of(stored_config(run, path))


def settings_note(run: RunRecords, path: str) -> str | None:
    """One note naming the settings of a records file that this loadgen reads otherwise than
    the one that wrote it (dropped, or at their defaults); None when they agree."""
    unknown, missing = setting_names(run.start.config, RunConfig)
    parts = []
    if unknown:
        parts.append(f"settings this version does not know were dropped: {', '.join(unknown)}")
    if missing:
        parts.append(f"settings it did not store take their defaults: {', '.join(missing)}")
    if not parts:
        return None
    return f"{path} was written by loadgen {run.start.loadgen_version}; " + "; ".join(parts)


# What writes files: off, or at its default, unless the report's own command line says so.
FILE_OUTPUTS = (
    "save_result",
    "append_result",
    "save_detailed",
    "result_dir",
    "result_filename",
    "plot_timeline",
    "plot_dataset_stats",
)


def report_config(run: RunRecords, path: str, overrides: dict[str, Any]) -> RunConfig:
    """The stored configuration with the reporting flags given again, their files off unless
    given; a plot flag whose libraries are missing is refused here, a bad value of another
    reporting flag where its ``Settings`` and ``ReportOutput`` are built, as a run's are."""
    defaults = {f.name: f for f in dataclasses.fields(RunConfig) if f.name in FILE_OUTPUTS}
    files = {name: field.default for name, field in defaults.items()}
    config = dataclasses.replace(stored_config(run, path), **{**files, **overrides})
    for flag, asked in (
        ("--plot-timeline", config.plot_timeline),
        ("--plot-dataset-stats", config.plot_dataset_stats),
    ):
        missing = missing_libraries(flag) if asked else []
        if missing:
            raise ConfigError(f"{flag} needs {' and '.join(missing)}: {PLOT_EXTRA}")
    return config


# Fields that differ from run to run without changing the traffic: where the server listened
# (a --mock run's port is picked at random), the run's request-id prefix (random by default),
# the names the run was given, and what was written where.
NOT_TRAFFIC = frozenset(
    {"base_url", "host", "port", "request_id_prefix", "label", "metadata", "save_result",
     "append_result", "save_records", "save_detailed", "result_dir", "result_filename",
     "disable_tqdm", "quiet", "dry_run", "fail_on", "key", "listen"}
)  # fmt: skip
# Each traffic setting's flag, by field (compare names the ones two runs' stored
# configurations differ in); reporting flags (--percentile-metrics, --goodput...) are left out:
# the report of the records applies them afresh.
TRAFFIC_FLAGS = {
    flag.field: flag.name
    for flag in RUN_FLAGS
    if not flag.reporting and flag.field not in NOT_TRAFFIC
}
