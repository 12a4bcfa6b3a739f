"""`loadgen run`'s report section: what the report computes and says (the percentiles and
metrics, goodput's SLOs, the gates, the result JSON's label and metadata). `loadgen report` may
take each of them again on saved records.
"""

from __future__ import annotations

import dataclasses

from loadgen.backends import GENERATION_BACKENDS
from loadgen.config.errors import ConfigError
from loadgen.config.flag_terms import LOADGEN
from loadgen.config.gates import parse_fail_on
from loadgen.config.parsers import parse_goodput, parse_metadata
from loadgen.flag import flag


@dataclasses.dataclass(frozen=True, kw_only=True)
class Report:
    """The report: its percentiles and metrics, goodput, gates, label and metadata."""

    goodput: dict[str, float] | None = flag(
        "--goodput",
        default=(),
        parse=parse_goodput,
        multiple=True,
        nargs="+",
        metavar="KEY:VALUE",
        readers=GENERATION_BACKENDS,
        reporting=True,
        help="SLOs in ms for goodput (ttft, tpot, e2el); several values may follow one flag.",
    )
    label: str | None = flag(
        "--label",
        reporting=True,
        help="JSON label and file-name prefix (default backend).",
    )
    metadata: dict[str, str] | None = flag(
        "--metadata",
        default=(),
        parse=parse_metadata,
        multiple=True,
        nargs="*",
        metavar="KEY=VALUE",
        reporting=True,
        help="String fields added to the result JSON; several values may follow one flag.",
    )
    save_detailed: bool = flag(
        "--save-detailed",
        bool,
        False,
        reporting=True,
        help="Keep per-request arrays in the JSON.",
    )
    percentile_metrics: str | None = flag(
        "--percentile-metrics",
        reporting=True,
        help="Comma list of ttft,tpot,itl,e2el,client_queue_time,"
        "e2el_including_client_queue (default ttft,tpot,itl).",
    )
    metric_percentiles: str = flag(
        "--metric-percentiles",
        default="99",
        reporting=True,
        help='Comma list of percentiles, e.g. "50,90,99,99.9".',
    )
    fail_on: tuple[str, ...] = flag(
        "--fail-on",
        default=(),
        parse=parse_fail_on,
        multiple=True,
        metavar="CONDITION",
        group=LOADGEN,
        reporting=True,
        help="An SLO gate, e.g. 'p99_ttft_ms>500' or 'failed>0': KEY OP NUMBER on a numeric "
        "key of the result JSON (nested: loadgen.send_lag_ms.p99). Repeatable; a run that "
        "breaches any exits 3 and prints the breached ones last.",
    )

    def percentiles(self) -> list[float]:
        """The percentiles to report (``--metric-percentiles``)."""
        try:
            values = [float(p) for p in self.metric_percentiles.split(",")]
        except ValueError:
            raise ConfigError(
                f"--metric-percentiles must be comma-separated numbers, got "
                f"'{self.metric_percentiles}'"
            ) from None
        if any(not 0 <= p <= 100 for p in values):
            raise ConfigError("--metric-percentiles must lie in [0, 100]")
        return values
