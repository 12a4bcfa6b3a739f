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
from loadgen.records.arrow_file import RecordsFileError, read_records
from loadgen.records.checks import check_settings
from loadgen.records.model import RunRecords
from loadgen.report.run_report import Report, build_report


def stored_config(run: RunRecords, path: str) -> RunConfig:
    """The RunConfig the run had, from its records file."""
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(run.start.config) - known)
    if unknown:
        raise RecordsFileError(
            f"{path} was written by loadgen {run.start.loadgen_version} with settings this "
            f"version does not know: {', '.join(unknown)}"
        )
    check_settings(run.start.config, RunConfig, path)
    values: dict[str, Any] = dict(run.start.config)
    if isinstance(values.get("given"), list):
        values["given"] = frozenset(values["given"])
    return RunConfig(**values)


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
