"""`loadgen run`'s flags: read from the fields of `RunConfig`'s sections (loadgen/config/sections/),
where each is declared once, and put in the order of ``--help``.

The click options and their ``--help`` sections (loadgen/cli/), the "has no effect with ..."
warnings (validation.py, from ``readers`` and the flags given) and the flag table of
docs/compat.md (checked by tests/unit/test_flag_table.py) all come from ``RUN_FLAGS``. Options
appear in ``--help`` in its order: first those of no group, then each group of ``HELP_GROUPS``.
"""

from __future__ import annotations

from loadgen.config.flag_terms import (
    GROUP_TITLES,
    OUTPUT_LEN_TARGETS,
    SAMPLING,
    SUPPORTED_DATASETS,
    available_cores,
)
from loadgen.config.sections import SECTIONS
from loadgen.flag import Flag, by_name, flags_of

__all__ = [
    "COMMON_FLAGS",
    "FLAGS",
    "HELP_GROUPS",
    "HELP_ORDER",
    "OUTPUT_LEN_TARGETS",
    "RUN_FLAGS",
    "SAMPLING_FIELDS",
    "SHORTHANDS",
    "SUPPORTED_DATASETS",
    "available_cores",
]

# The flags in upstream's order (`vllm bench serve --help`: its options, then its argument
# groups), loadgen's own among them: the order of --help, of the click options and of the
# table. The sections group the fields by what they are about, which is not upstream's order.
HELP_ORDER = (
    "--backend",
    "--base-url",
    "--host",
    "--port",
    "--endpoint",
    "--insecure",
    "--header",
    "--model",
    "--served-model-name",
    "--tokenizer",
    "--tokenizer-mode",
    "--trust-remote-code",
    "--skip-tokenizer-init",
    "--dataset-name",
    "--dataset-path",
    "--disable-shuffle",
    "--no-oversample",
    "--skip-chat-template",
    "--no-stream",
    "--self-timed",
    "--chat-template-kwargs",
    "--input-len",
    "--output-len",
    "--enable-multimodal-chat",
    "--num-prompts",
    "--seed",
    "--request-rate",
    "--burstiness",
    "--max-concurrency",
    "--ramp-up-strategy",
    "--ramp-up-start-rps",
    "--ramp-up-end-rps",
    "--ignore-eos",
    "--logprobs",
    "--use-beam-search",
    "--extra-body",
    "--request-id-prefix",
    "--goodput",
    "--lora-modules",
    "--lora-assignment",
    "--profile",
    "--save-result",
    "--append-result",
    "--save-records",
    "--label",
    "--metadata",
    "--save-detailed",
    "--result-dir",
    "--result-filename",
    "--probe-request-rate",
    "--server-metrics",
    "--server-metrics-interval",
    "--telemetry-url",
    "--prometheus-port",
    "--prometheus-host",
    "--plot-timeline",
    "--timeline-itl-thresholds",
    "--plot-dataset-stats",
    "--disable-tqdm",
    "--percentile-metrics",
    "--metric-percentiles",
    "--ready-check-timeout-sec",
    "--ready-check-interval-sec",
    "--server-tokenizer-timeout-sec",
    "--num-warmups",
    "--workers",
    "--listen",
    "--remote-workers",
    "--key",
    "--ray",
    "--workers-per-node",
    "--multi-turn",
    "--multi-turn-num-turns",
    "--multi-turn-min-turns",
    "--multi-turn-max-turns",
    "--multi-turn-concurrency",
    "--multi-turn-delay-ms",
    "--multi-turn-delay-distribution",
    "--per-turn-input-len",
    "--dry-run",
    "--max-model-len",
    "--prompt-token-ids",
    "--request-timeout",
    "--idle-timeout",
    "--connect-timeout",
    "--fail-fast",
    "--dataset-cache",
    "--fail-on",
    "--mock",
    "--mock-ttft-ms",
    "--mock-itl-ms",
    "--mock-prefill-us-per-token",
    "--num-runs",
    "--steady-state",
    "--duration",
    "--duration-grace-s",
    "--duration-block",
    "--warmup-s",
    "--cooldown-s",
    "--same-prompts",
    "--reset-prefix-cache",
    "--slo",
    "--search",
    "--search-start",
    "--search-max",
    "--search-tolerance",
    "--search-repeats",
    "--quiet",
    "--custom-output-len",
    "--custom-ensure-client-side-data",
    "--spec-bench-output-len",
    "--spec-bench-category",
    "--sonnet-input-len",
    "--sonnet-output-len",
    "--sonnet-prefix-len",
    "--sharegpt-output-len",
    "--timed-trace-chunk-hash-size",
    "--timed-trace-sec-multiplier",
    "--timed-trace-label-timestamp",
    "--timed-trace-label-input-length",
    "--timed-trace-label-output-length",
    "--timed-trace-label-hash-ids",
    "--random-input-len",
    "--random-output-len",
    "--random-range-ratio",
    "--random-prefix-len",
    "--random-batch-size",
    "--no-reranker",
    "--random-mm-base-items-per-request",
    "--random-mm-num-mm-items-range-ratio",
    "--random-mm-limit-mm-per-prompt",
    "--random-mm-bucket-config",
    "--blazedit-min-distance",
    "--blazedit-max-distance",
    "--asr-max-audio-len-sec",
    "--asr-min-audio-len-sec",
    "--hf-subset",
    "--hf-split",
    "--hf-name",
    "--hf-output-len",
    "--bfcl-categories",
    "--prefix-repetition-prefix-len",
    "--prefix-repetition-suffix-len",
    "--prefix-repetition-num-prefixes",
    "--prefix-repetition-output-len",
    "--speed-bench-dataset-subset",
    "--speed-bench-output-len",
    "--speed-bench-category",
    "--top-p",
    "--top-k",
    "--min-p",
    "--temperature",
    "--frequency-penalty",
    "--presence-penalty",
    "--repetition-penalty",
)


def in_help_order(flags: list[Flag]) -> tuple[Flag, ...]:
    """``flags`` in ``HELP_ORDER``; a field declared twice, or a flag missing from the order or
    listed there without a field, is refused."""
    names = [flag.name for flag in flags]
    if len(set(names)) != len(names) or len({flag.field for flag in flags}) != len(flags):
        raise ValueError("a run flag or field is declared twice")
    if set(names) != set(HELP_ORDER) or len(HELP_ORDER) != len(names):
        unlisted = sorted(set(names) - set(HELP_ORDER))
        unknown = sorted(set(HELP_ORDER) - set(names))
        raise ValueError(f"HELP_ORDER lacks {unlisted} and lists no field's {unknown}")
    return tuple(sorted(flags, key=lambda flag: HELP_ORDER.index(flag.name)))


RUN_FLAGS = in_help_order([flag for section in SECTIONS for flag in flags_of(section)])
FLAGS = by_name(RUN_FLAGS)  # each flag under each of its spellings
SHORTHANDS = tuple(flag for flag in RUN_FLAGS if flag.sets)  # --input-len, --output-len
SAMPLING_FIELDS = tuple(flag.field for flag in RUN_FLAGS if flag.group == SAMPLING)
# The flags most runs use, shown first by --help (each once: not again in its own section).
COMMON_FLAGS = (
    "--mock",
    "--base-url",
    "--model",
    "--backend",
    "--dataset-name",
    "--num-prompts",
    "--random-input-len",
    "--random-output-len",
    "--max-concurrency",
    "--request-rate",
    "--workers",
    "--save-result",
)
assert set(COMMON_FLAGS) <= set(HELP_ORDER), "COMMON_FLAGS names a flag no field declares"
# Each --help section's flags, in the table's order.
HELP_GROUPS: dict[str, tuple[str, ...]] = {
    title: tuple(flag.name for flag in RUN_FLAGS if flag.group == title) for title in GROUP_TITLES
}
