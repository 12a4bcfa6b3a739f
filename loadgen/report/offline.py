"""A report rebuilt from a records file, offline: no server, no workers, no tokenizer.

The run's configuration comes from the file; flags that only change reporting
(``--percentile-metrics``, ``--goodput``, ...) may be given again and win. Files are written
only when asked again: a report of old records never rewrites the run's result or plots.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadgen.config import (
    PLOT_EXTRA,
    ConfigError,
    RunConfig,
    missing_libraries,
    parse_itl_thresholds,
)
from loadgen.records.checks import check_settings, setting_names
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records
from loadgen.report.run_report import Report, build_report


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
    """The stored configuration with the reporting flags given again, checked as a run checks
    them."""
    defaults = {f.name: f for f in dataclasses.fields(RunConfig) if f.name in FILE_OUTPUTS}
    files = {name: field.default for name, field in defaults.items()}
    config = dataclasses.replace(stored_config(run, path), **{**files, **overrides})
    config.selected_metrics()
    config.percentiles()
    for flag, asked in (
        ("--plot-timeline", config.plot_timeline),
        ("--plot-dataset-stats", config.plot_dataset_stats),
    ):
        missing = missing_libraries(flag) if asked else []
        if missing:
            raise ConfigError(f"{flag} needs {' and '.join(missing)}: {PLOT_EXTRA}")
    if config.plot_timeline:
        try:
            parse_itl_thresholds(config.timeline_itl_thresholds)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return config


def rebuild_report(path: str, overrides: dict[str, Any], *, date: str) -> tuple[Report, RunConfig]:
    """The report of the run whose records are at ``path``, as the live run built it, and the
    configuration it was built with."""
    run = read_records(path)
    config = report_config(run, path, overrides)
    return build_report(config, run, date=date), config
