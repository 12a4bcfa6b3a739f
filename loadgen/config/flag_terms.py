"""The terms the sections of `loadgen run`'s flags share (loadgen/config/sections/): the
``--help`` section titles, the readers several flags have, upstream's range refusals, the
sampling-parameter field, and the default worker count.
"""

from __future__ import annotations

import os
from typing import Any

from loadgen.backends import GENERATION_BACKENDS
from loadgen.config.upstream import UPSTREAM_BACKENDS
from loadgen.datasets.registry import names
from loadgen.flag import flag

SUPPORTED_DATASETS = names()

# The dataset fields --output-len sets (upstream's --output-len feeds each dataset's own flag).
OUTPUT_LEN_TARGETS = (
    "random_output_len",
    "custom_output_len",
    "sharegpt_output_len",
    "prefix_repetition_output_len",
    "spec_bench_output_len",
    "hf_output_len",
)


def available_cores() -> int:
    """CPU cores this process may run on (the default worker count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --help sections in upstream's order: its ungrouped options first ("Options"), then its
# argument groups (add_dataset_parser's dataset groups, then "sampling parameters"); loadgen's
# own flags last. Flags not built yet are listed by name in a final section.
CUSTOM = "custom dataset options"
SPEC_BENCH = "spec bench dataset options"
SONNET = "sonnet dataset options"
SHAREGPT = "sharegpt dataset options"
TIMED_TRACE = "timed-trace dataset options"
RANDOM = "random dataset options"
RANDOM_MM = "random multimodal dataset options extended from random dataset"
BLAZEDIT = "blazedit dataset options"
ASR = "asr dataset options"
HF = "hf dataset options"
PREFIX_REPETITION = "prefix repetition dataset options"
BFCL = "BFCL dataset options"
SPEED_BENCH = "speed bench dataset options"
SAMPLING = "sampling parameters"
LOADGEN = "loadgen options (not in vllm bench serve)"
GROUP_TITLES = (
    CUSTOM, SPEC_BENCH, SONNET, SHAREGPT, TIMED_TRACE, RANDOM, RANDOM_MM, BLAZEDIT, ASR, HF, BFCL,
    PREFIX_REPETITION, SPEED_BENCH, SAMPLING, LOADGEN,
)  # fmt: skip

# Readers shared by several flags.
# --no-oversample (hf too: upstream's HuggingFaceDataset honours it and --disable-shuffle).
FILE_DATASETS = (
    "custom", "custom_image", "custom_audio", "sharegpt", "spec_bench", "speed_bench", "hf",
)  # fmt: skip
# Upstream's refusals of a value out of a flag's range (validate() checks them, not click).
AT_LEAST = "{name} must be >= {minimum:g}, got {value}"
ABOVE = "{name} must be > {minimum:g}, got {value}"
NOT_RERANK = tuple(backend for backend in UPSTREAM_BACKENDS if backend != "vllm-rerank")


def sampling(name: str, kind: type, help: str) -> Any:
    """The field of a sampling parameter: sent when given, by the generation backends only."""
    return flag(name, kind, help=help, group=SAMPLING, readers=GENERATION_BACKENDS)
