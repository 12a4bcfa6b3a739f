"""``ReportOutput``: the files a run's report writes, and where (the result JSON, written or
appended, and the plots beside it). Built once from the configuration where a report is made
(``report.settings.output_of``); the views never read the configuration itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportOutput:
    """What a report writes: the result JSON (``--save-result`` or ``--append-result``, in
    ``--result-dir`` under upstream's name or ``--result-filename``) and the plots beside it.
    The defaults write nothing."""

    save_result: bool = False
    append_result: bool = False
    result_dir: str | None = None
    result_filename: str | None = None
    plot_timeline: bool = False
    plot_dataset_stats: bool = False
    # --timeline-itl-thresholds in seconds; None without --plot-timeline (not read then)
    itl_thresholds_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.plot_timeline and self.itl_thresholds_s is None:
            raise ValueError("--plot-timeline needs its --timeline-itl-thresholds")

    @property
    def writes_result(self) -> bool:
        """Whether the result JSON is written (or appended)."""
        return self.save_result or self.append_result


NO_FILES = ReportOutput()  # a report that is only read (report.html, compare): nothing written
