"""A run's configuration: `RunConfig`, its sections, the flag table read from them, and its
validation.

sections/ declares every `loadgen run` flag once, as a field of a section (server, dataset,
traffic, output, report) with its `Flag` (loadgen/flag.py); run_config.py's frozen `RunConfig`
inherits them; flags.py reads the table back (``RUN_FLAGS``, in --help's order); base.py and
validation.py hold RunConfig's methods; parsers.py the flag-value parsers; upstream.py the flag
list of `vllm bench serve`. No click here: the CLI (loadgen/cli/) turns the table into click
options.
"""

from loadgen.config.base import (
    ALL_ROWS_DATASETS,
    ALWAYS_TEMPLATED_DATASETS,
    DEFAULT_PERCENTILE_METRICS,
    DEFAULT_POOLING_PERCENTILE_METRICS,
    PERCENTILE_METRICS,
    SYNTHETIC_DATASETS,
    TEMPLATED_DATASETS,
)
from loadgen.config.errors import ConfigError, InputError
from loadgen.config.flags import (
    COMMON_FLAGS,
    FLAGS,
    HELP_GROUPS,
    OUTPUT_LEN_TARGETS,
    RUN_FLAGS,
    SAMPLING_FIELDS,
    SUPPORTED_DATASETS,
    available_cores,
)
from loadgen.config.parsers import GOODPUT_METRICS, parse_itl_thresholds
from loadgen.config.run_config import RunConfig
from loadgen.config.upstream import UPSTREAM_DATASETS, VLLM_BENCH_SERVE_FLAGS
from loadgen.flag import Flag, flag_name
from loadgen.plot_extra import PLOT_EXTRA, PLOT_LIBRARIES, missing_libraries

__all__ = [
    "ALL_ROWS_DATASETS",
    "ALWAYS_TEMPLATED_DATASETS",
    "COMMON_FLAGS",
    "DEFAULT_PERCENTILE_METRICS",
    "DEFAULT_POOLING_PERCENTILE_METRICS",
    "FLAGS",
    "GOODPUT_METRICS",
    "HELP_GROUPS",
    "OUTPUT_LEN_TARGETS",
    "PERCENTILE_METRICS",
    "PLOT_EXTRA",
    "PLOT_LIBRARIES",
    "RUN_FLAGS",
    "SAMPLING_FIELDS",
    "SUPPORTED_DATASETS",
    "SYNTHETIC_DATASETS",
    "TEMPLATED_DATASETS",
    "UPSTREAM_DATASETS",
    "VLLM_BENCH_SERVE_FLAGS",
    "ConfigError",
    "Flag",
    "InputError",
    "RunConfig",
    "available_cores",
    "flag_name",
    "missing_libraries",
    "parse_itl_thresholds",
]
