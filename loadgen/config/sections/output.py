"""`loadgen run`'s output section: the files a run writes (the result JSON, the records file,
the plots) and what it prints while it runs.
"""

from __future__ import annotations

import dataclasses

from loadgen.config.flag_terms import LOADGEN
from loadgen.flag import flag


@dataclasses.dataclass(frozen=True, kw_only=True)
class Output:
    """The output: which files are written where, and how much is printed."""

    # --- the result ---
    save_result: bool = flag(
        "--save-result", bool, False, reporting=True, help="Write the result JSON."
    )
    append_result: bool = flag(
        "--append-result",
        bool,
        False,
        reporting=True,
        help="Append the result JSON to the file as one line.",
    )
    save_records: bool | None = flag(
        "--save-records",
        bool,
        secondary="--no-save-records",
        help="Write every request's record beside the result JSON (NAME.records.arrow); on by "
        "default with --save-result or --append-result.",
    )
    result_dir: str | None = flag(
        "--result-dir", reporting=True, help="Directory of the result file (created)."
    )
    result_filename: str | None = flag(
        "--result-filename", reporting=True, help="Name of the result file."
    )
    plot_timeline: bool = flag(
        "--plot-timeline",
        bool,
        False,
        reporting=True,
        help="Write NAME.timeline.html beside the result file: each request's TTFT and ITLs "
        "(needs the [plot] extra).",
    )
    timeline_itl_thresholds: str = flag(
        "--timeline-itl-thresholds",
        default="25,50",
        reporting=True,
        help="Two ITLs in ms that colour the timeline's bars green, orange and red.",
    )
    plot_dataset_stats: bool = flag(
        "--plot-dataset-stats",
        bool,
        False,
        reporting=True,
        help="Write NAME.dataset_stats.png beside the result file: the prompt and output token "
        "counts (needs the [plot] extra).",
    )
    disable_tqdm: bool = flag("--disable-tqdm", bool, False, help="No progress bar.")
    # --- loadgen's own live metrics ---
    prometheus_port: int | None = flag(
        "--prometheus-port",
        int,
        None,
        minimum=1,
        maximum=65535,
        group=LOADGEN,
        help="Serve loadgen's live metrics (requests, in flight, tokens, TTFT/ITL/E2EL "
        "histograms, client CPU) at http://HOST:PORT/metrics during the run, for Prometheus.",
    )
    prometheus_host: str = flag(
        "--prometheus-host",
        default="127.0.0.1",
        group=LOADGEN,
        help="The address --prometheus-port listens on (0.0.0.0: every interface).",
    )
    quiet: bool = flag(
        "--quiet",
        bool,
        False,
        short="-q",
        group=LOADGEN,
        help="Print only the summary table and the client's verdict (no progress, notes or "
        "warnings); errors still go to stderr.",
    )
