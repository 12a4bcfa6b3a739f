"""What `RunConfig`'s fields imply across its sections: the datasets' traits, the request
extras and the reported metrics (what one section implies is a method of that section).

`RunConfig` (run_config.py) inherits the sections' fields through this class, and its checks
from `validation.Validated`.
"""

from __future__ import annotations

from typing import Any

from loadgen.config.errors import ConfigError
from loadgen.config.flags import SAMPLING_FIELDS, SHORTHANDS
from loadgen.config.sections import Dataset, Output, Report, Server, Traffic
from loadgen.datasets.registry import HFDataset, find_hf_dataset, names

PERCENTILE_METRICS = (
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "client_queue_time",
    "e2el_including_client_queue",
)
DEFAULT_PERCENTILE_METRICS = "ttft,tpot,itl"
DEFAULT_POOLING_PERCENTILE_METRICS = "e2el"
# Built from the tokenizer alone: --dataset-path is refused.
SYNTHETIC_DATASETS = names(lambda dataset: dataset.synthetic)
# Chat template applied unless --skip-chat-template (hf: for the datasets upstream templates).
TEMPLATED_DATASETS = names(lambda dataset: dataset.templated == "unless skipped")
# Upstream's custom datasets read --num-prompts 0 or less as every line of the file.
ALL_ROWS_DATASETS = names(lambda dataset: dataset.every_row)
# Upstream templates spec_bench prompts whatever --skip-chat-template says, with no kwargs.
ALWAYS_TEMPLATED_DATASETS = names(lambda dataset: dataset.templated == "always")


# The sections last to first: a dataclass's fields come in reverse method resolution order, so
# RunConfig's start with the server's.
class RunConfigBase(Report, Output, Traffic, Dataset, Server):
    """RunConfig's values derived from several sections (not a dataclass: RunConfig is)."""

    @property
    def uses_chat_template(self) -> bool:
        """Whether prompts are templated client-side, as upstream templates them: not without
        a tokenizer (--skip-tokenizer-init), as upstream does not either."""
        templated = self.dataset_name in TEMPLATED_DATASETS and not self.skip_chat_template
        if self.dataset_name == "hf":
            how = self.hf_dataset().templated
            templated = how == "always" or (how == "unless skipped" and templated)
        templated = templated or self.dataset_name in ALWAYS_TEMPLATED_DATASETS
        return templated and not self.skip_tokenizer_init

    def hf_dataset(self) -> HFDataset:
        """The supported hub dataset --dataset-path or --hf-name names (ConfigError if none)."""
        try:
            return find_hf_dataset(self.dataset_path or "", self.hf_name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def self_timed_trace(self) -> bool:
        """Whether requests go at the trace's own instants (timed_trace unless --no-self-timed)."""
        return self.dataset_name == "timed_trace" and self.self_timed is not False

    @property
    def sends_ignore_eos(self) -> bool:
        """--ignore-eos, or upstream's forcing: random datasets with a generation backend, and
        timed_trace."""
        forcing = ("always",) if self.pooling else ("always", "unless pooling")
        return self.ignore_eos or self.dataset_name in names(
            lambda dataset: dataset.forces_ignore_eos in forcing
        )

    def body_extras(self) -> dict[str, Any] | None:
        """What every request body gets on top of upstream's fields: the sampling flags that
        were given, then --extra-body, which wins on a clash (upstream's precedence)."""
        fields = () if self.pooling else SAMPLING_FIELDS  # upstream sends none for pooling
        sampling = {n: getattr(self, n) for n in fields if getattr(self, n) is not None}
        return {**sampling, **(self.extra_body or {})} or None

    def selected_metrics(self) -> list[str]:
        """The metrics that get mean/median/std/percentiles (``--percentile-metrics``)."""
        default = DEFAULT_POOLING_PERCENTILE_METRICS if self.pooling else DEFAULT_PERCENTILE_METRICS
        names = (self.percentile_metrics or default).split(",")
        for name in names:
            if name not in PERCENTILE_METRICS:
                allowed = ", ".join(PERCENTILE_METRICS)
                raise ConfigError(f"--percentile-metrics: unknown metric '{name}' ({allowed})")
        return names

    def __post_init__(self) -> None:
        """--input-len and --output-len: a value given goes into the fields it sets (before
        the config is used, so the one write to a frozen config's fields)."""
        for flag in SHORTHANDS:
            value = getattr(self, flag.field)
            if value is not None:
                for target in flag.sets:
                    object.__setattr__(self, target, value)
