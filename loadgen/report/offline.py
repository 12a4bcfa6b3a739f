"""A report rebuilt from a records file, offline: no server, no workers, no tokenizer.

The run's configuration comes from the file; flags that only change reporting
(``--percentile-metrics``, ``--goodput``, ...) may be given again and win. Files are written
only when asked again: a report of old records never rewrites the run's result or plots
(``settings.report_config``).
"""

from __future__ import annotations

from typing import Any

from loadgen.records.read import read_records
from loadgen.report.run_report import Report, build_report
from loadgen.report.settings import output_of, report_config, settings_of


def rebuild_report(path: str, overrides: dict[str, Any], *, date: str) -> Report:
    """The report of the run whose records are at ``path``, as the live run built it, with the
    reporting flags in ``overrides`` (its settings are ``report.summary.settings``, its files
    ``report.output``)."""
    run = read_records(path)
    config = report_config(run, path, overrides)
    return build_report(settings_of(config), output_of(config), run, date=date)
