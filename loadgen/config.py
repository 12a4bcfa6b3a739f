"""The configuration of one `loadgen run`, validated, with upstream's defaults.

Over 500 lines because ``RunConfig`` repeats every flag that cli.py declares, with its
validation; issue 13's flag table (one declaration per flag) turns this into a ``config/``
package derived from it.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass, field
from typing import Any

from loadgen.datasets.hf import HFDataset, find_hf_dataset
from loadgen.datasets.random import parse_range_ratio
from loadgen.datasets.random_mm import item_count_range, parse_bucket_config, parse_limits
from loadgen.datasets.registry import names, readers
from loadgen.payloads import EMBEDDINGS_CHAT_BACKENDS, POOLING_BACKENDS, SUPPORTED_BACKENDS
from loadgen.schedule import RAMP_UP_STRATEGIES

PLOT_LIBRARIES = {"--plot-timeline": ("plotly", "pandas"), "--plot-dataset-stats": ("matplotlib",)}


def missing_libraries(flag: str) -> list[str]:
    """The libraries a plot flag needs that are not installed."""
    return [name for name in PLOT_LIBRARIES[flag] if importlib.util.find_spec(name) is None]


def parse_itl_thresholds(value: str) -> tuple[float, float]:
    """``--timeline-itl-thresholds``: two comma-separated milliseconds, as seconds."""
    try:
        thresholds = [float(part.strip()) for part in value.split(",")]
    except ValueError as exc:
        raise ValueError(f"Invalid --timeline-itl-thresholds format: {exc}") from None
    if len(thresholds) != 2:
        raise ValueError(
            "Invalid --timeline-itl-thresholds format: "
            f"Expected 2 ITL threshold values, got {len(thresholds)}"
        )
    return thresholds[0] / 1000, thresholds[1] / 1000


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
SAMPLING_FIELDS = (
    "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty",
)  # fmt: skip
SUPPORTED_DATASETS = names()
RANDOM_MM_DEFAULTS: dict[str, Any] = {
    "base_items_per_request": 1,
    "num_mm_items_range_ratio": 0.0,
    "limit_mm_per_prompt": '{"image": 255, "video": 1}',
    "bucket_config": "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}",
}
SONNET_DEFAULTS = {"input_len": 550, "output_len": 150, "prefix_len": 200}
TIMED_TRACE_DEFAULTS: dict[str, Any] = {
    "chunk_hash_size": 16,
    "sec_multiplier": 1.0,
    "label_timestamp": "timestamp",
    "label_input_length": "input_length",
    "label_output_length": "output_length",
    "label_hash_ids": "hash_ids",
}
DEFAULT_SPEC_BENCH_OUTPUT_LEN = 256
# Built from the tokenizer alone: --dataset-path is refused.
SYNTHETIC_DATASETS = names(lambda dataset: dataset.synthetic)
PREFIX_REPETITION_DEFAULTS = {"prefix_len": 256, "suffix_len": 256, "num_prefixes": 10}
# (flag prefix, defaults): a dataset family's flags, which warn when given to another dataset.
FAMILY_FLAGS = (
    ("prefix-repetition-", PREFIX_REPETITION_DEFAULTS),
    ("random-mm-", RANDOM_MM_DEFAULTS),
    ("sonnet-", SONNET_DEFAULTS),
    ("timed-trace-", TIMED_TRACE_DEFAULTS),
)
DEFAULT_PREFIX_REPETITION_OUTPUT_LEN = 128
DEFAULT_CUSTOM_OUTPUT_LEN = 256
# Chat template applied unless --skip-chat-template (hf: for the datasets upstream templates).
TEMPLATED_DATASETS = names(lambda dataset: dataset.templated == "unless skipped")
# Upstream's custom datasets read --num-prompts 0 or less as every line of the file.
ALL_ROWS_DATASETS = names(lambda dataset: dataset.every_row)
# Upstream templates spec_bench prompts whatever --skip-chat-template says, with no kwargs.
ALWAYS_TEMPLATED_DATASETS = names(lambda dataset: dataset.templated == "always")


# The dataset fields --output-len sets (upstream's --output-len feeds each dataset's own flag).
OUTPUT_LEN_TARGETS = (
    "random_output_len",
    "custom_output_len",
    "sharegpt_output_len",
    "prefix_repetition_output_len",
    "spec_bench_output_len",
    "hf_output_len",
)


def flag_name(field_name: str) -> str:
    """The command-line flag of a RunConfig field: ``hf_output_len`` -> ``--hf-output-len``."""
    return "--" + field_name.replace("_", "-")


class ConfigError(ValueError):
    """A flag value that cannot be used; the message names the flag."""


class InputError(Exception):
    """An input the run cannot use (a dataset file's contents, the endpoint for the backend);
    the message names it. The CLI prints it as one line and exits 1."""


def available_cores() -> int:
    """CPU cores this process may run on (the default worker count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class RunConfig:
    """Everything `loadgen run` was asked to do."""

    backend: str = "openai"
    base_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    endpoint: str = "/v1/completions"
    model: str | None = None
    served_model_name: str | None = None
    tokenizer: str | None = None
    dataset_name: str = "random"
    dataset_path: str | None = None
    custom_output_len: int = DEFAULT_CUSTOM_OUTPUT_LEN
    spec_bench_output_len: int = DEFAULT_SPEC_BENCH_OUTPUT_LEN
    spec_bench_category: str | None = None
    hf_name: str | None = None
    hf_split: str | None = None
    hf_subset: str | None = None
    hf_output_len: int | None = None
    no_stream: bool = False
    blazedit_min_distance: float = 0.0
    blazedit_max_distance: float = 1.0
    sonnet_input_len: int = SONNET_DEFAULTS["input_len"]
    sonnet_output_len: int = SONNET_DEFAULTS["output_len"]
    sonnet_prefix_len: int = SONNET_DEFAULTS["prefix_len"]
    timed_trace_chunk_hash_size: int = TIMED_TRACE_DEFAULTS["chunk_hash_size"]
    timed_trace_sec_multiplier: float = TIMED_TRACE_DEFAULTS["sec_multiplier"]
    timed_trace_label_timestamp: str = TIMED_TRACE_DEFAULTS["label_timestamp"]
    timed_trace_label_input_length: str = TIMED_TRACE_DEFAULTS["label_input_length"]
    timed_trace_label_output_length: str = TIMED_TRACE_DEFAULTS["label_output_length"]
    timed_trace_label_hash_ids: str = TIMED_TRACE_DEFAULTS["label_hash_ids"]
    self_timed: bool | None = None  # None: on for timed_trace, as upstream
    probe_request_rate: float = 0.0
    plot_timeline: bool = False
    timeline_itl_thresholds: str = "25,50"
    plot_dataset_stats: bool = False
    sharegpt_output_len: int | None = None
    disable_shuffle: bool = False
    no_oversample: bool = False
    skip_chat_template: bool = False
    custom_ensure_client_side_data: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: str = "0.0"
    random_prefix_len: int = 0
    random_batch_size: int = 1
    random_mm_base_items_per_request: int = RANDOM_MM_DEFAULTS["base_items_per_request"]
    random_mm_num_mm_items_range_ratio: float = RANDOM_MM_DEFAULTS["num_mm_items_range_ratio"]
    random_mm_limit_mm_per_prompt: str = RANDOM_MM_DEFAULTS["limit_mm_per_prompt"]
    random_mm_bucket_config: str = RANDOM_MM_DEFAULTS["bucket_config"]
    enable_multimodal_chat: bool = False
    output_len: int | None = None  # --output-len, already applied to each dataset's length
    prefix_repetition_prefix_len: int = PREFIX_REPETITION_DEFAULTS["prefix_len"]
    prefix_repetition_suffix_len: int = PREFIX_REPETITION_DEFAULTS["suffix_len"]
    prefix_repetition_num_prefixes: int = PREFIX_REPETITION_DEFAULTS["num_prefixes"]
    prefix_repetition_output_len: int = DEFAULT_PREFIX_REPETITION_OUTPUT_LEN
    no_reranker: bool = False
    num_prompts: int = 1000
    seed: int = 0
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    ramp_up_strategy: str | None = None
    ramp_up_start_rps: int | None = None
    ramp_up_end_rps: int | None = None
    ignore_eos: bool = False
    extra_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    request_id_prefix: str | None = None
    logprobs: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    goodput: dict[str, float] | None = None
    label: str | None = None
    metadata: dict[str, str] | None = None
    append_result: bool = False
    profile: bool = False
    insecure: bool = False
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    trust_remote_code: bool = False  # no effect: tokenizer.json runs no code
    use_beam_search: bool = False  # no effect, upstream reads it nowhere either
    lora_modules: list[str] | None = None
    lora_assignment: str = "random"
    save_result: bool = False
    save_detailed: bool = False
    result_dir: str | None = None
    result_filename: str | None = None
    disable_tqdm: bool = False
    percentile_metrics: str | None = None
    metric_percentiles: str = "99"
    ready_check_timeout_sec: float = 0.0
    ready_check_interval_sec: float = 5.0
    server_tokenizer_timeout_sec: float = 300.0
    num_warmups: int = 0
    workers: int = field(default_factory=available_cores)
    mock: bool = False
    mock_ttft_ms: float = 0.0
    mock_itl_ms: float = 0.0

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

    @property
    def pooling(self) -> bool:
        """Whether the backend is a pooling one (embeddings, pooling): E2EL only, no output."""
        return self.backend in POOLING_BACKENDS

    def ignored_flag_warnings(self) -> list[str]:
        """Warnings for flags given where upstream ignores them: dataset flags of another
        dataset, and generation flags with a pooling backend."""

        def output_flag(value: int | None, default: int | None) -> bool:
            # --output-len sets every dataset's output length: that is not the flag given.
            return value != default and value != self.output_len

        flags_given = [  # (dataset flag, whether it was given)
            ("--custom-output-len", output_flag(self.custom_output_len, DEFAULT_CUSTOM_OUTPUT_LEN)),
            ("--sharegpt-output-len", output_flag(self.sharegpt_output_len, None)),
            (
                "--spec-bench-output-len",
                output_flag(self.spec_bench_output_len, DEFAULT_SPEC_BENCH_OUTPUT_LEN),
            ),
            ("--spec-bench-category", self.spec_bench_category is not None),
            (
                "--prefix-repetition-output-len",
                output_flag(
                    self.prefix_repetition_output_len, DEFAULT_PREFIX_REPETITION_OUTPUT_LEN
                ),
            ),
            ("--disable-shuffle", self.disable_shuffle),
            ("--no-oversample", self.no_oversample),
            ("--custom-ensure-client-side-data", self.custom_ensure_client_side_data),
            ("--skip-chat-template", self.skip_chat_template),
            ("--random-batch-size", self.random_batch_size != 1),
            ("--no-reranker", self.no_reranker),
            ("--hf-name", self.hf_name is not None),
            ("--hf-split", self.hf_split is not None),
            ("--hf-subset", self.hf_subset is not None),
            ("--hf-output-len", output_flag(self.hf_output_len, None)),
            ("--no-stream", self.no_stream),
            ("--blazedit-min-distance", self.blazedit_min_distance != 0.0),
            ("--blazedit-max-distance", self.blazedit_max_distance != 1.0),
            *(
                (f"--{prefix}{name.replace('_', '-')}", given)
                for prefix, defaults in FAMILY_FLAGS
                for name, given in self._given(defaults, prefix.replace("-", "_")).items()
            ),
            ("--enable-multimodal-chat", self.enable_multimodal_chat),
        ]
        warnings = [
            f"{flag} has no effect with --dataset-name {self.dataset_name}"
            for flag, given in flags_given
            if given and self.dataset_name not in readers(flag)
        ]
        if self.dataset_name == "spec_bench" and self.seed != 0:
            warnings.append(
                f"--seed {self.seed} does not reach the {self.dataset_name} shuffle, which uses "
                "seed 0 as upstream's does"
            )
        if self.chat_template_kwargs and not (
            self.uses_chat_template and self.dataset_name == "custom"
        ):
            if self.dataset_name != "custom":
                why = f"--dataset-name {self.dataset_name}"
            else:
                why = "--skip-chat-template" if self.skip_chat_template else "--skip-tokenizer-init"
            warnings.append(f"--chat-template-kwargs has no effect with {why}")
        if self.self_timed_trace:
            paced_by = [
                ("--request-rate", not math.isinf(self.request_rate)),
                ("--burstiness", self.burstiness != 1.0),
                ("--ramp-up-strategy", self.ramp_up_strategy is not None),
            ]
            warnings += [
                f"{flag} has no effect with a self-timed trace (--no-self-timed uses it)"
                for flag, given in paced_by
                if given
            ]
        if self.timeline_itl_thresholds != "25,50" and not self.plot_timeline:
            warnings.append("--timeline-itl-thresholds has no effect without --plot-timeline")
        if self.use_beam_search:
            warnings.append("--use-beam-search has no effect (vllm bench serve ignores it too)")
        if self.backend == "vllm-rerank" and self.extra_body:
            warnings.append("--extra-body has no effect with --backend vllm-rerank")
        if self.pooling:
            generation_only = [
                ("--goodput", self.goodput),
                ("--logprobs", self.logprobs is not None),
                *(
                    (f"--{n.replace('_', '-')}", getattr(self, n) is not None)
                    for n in SAMPLING_FIELDS
                ),
            ]
            warnings += [
                f"{flag} has no effect with --backend {self.backend}"
                for flag, given in generation_only
                if given
            ]
        return warnings

    def _given(self, defaults: dict[str, Any], prefix: str) -> dict[str, bool]:
        """Which of a dataset's flags (fields ``prefix + name``) differ from their defaults."""
        return {name: getattr(self, prefix + name) != value for name, value in defaults.items()}

    def validate(self) -> None:
        """Reject values upstream rejects, with a one-line message naming the flag."""
        if self.backend not in SUPPORTED_BACKENDS:
            raise ConfigError(f"not supported yet: --backend {self.backend}")
        if self.dataset_name not in SUPPORTED_DATASETS:
            raise ConfigError(f"not supported yet: --dataset-name {self.dataset_name}")
        if self.dataset_name in SYNTHETIC_DATASETS and self.dataset_path is not None:
            raise ConfigError(f"--dataset-path is not read by --dataset-name {self.dataset_name}")
        self._validate_pooling_inputs()
        if self.dataset_name == "sharegpt" and self.dataset_path is None:
            raise ConfigError("--dataset-name sharegpt needs --dataset-path (a ShareGPT JSON file)")
        if self.sharegpt_output_len is not None and self.sharegpt_output_len < 1:
            raise ConfigError(f"--sharegpt-output-len must be >= 1, got {self.sharegpt_output_len}")
        if self.self_timed is not None and self.dataset_name != "timed_trace":
            raise ConfigError(
                "--self-timed/--no-self-timed is only supported with --dataset-name=timed_trace"
            )
        if self.dataset_name == "timed_trace":
            if self.dataset_path is None:
                raise ConfigError("--dataset-name timed_trace needs --dataset-path (a JSONL trace)")
            if self.backend not in ("vllm", "openai"):
                raise ConfigError(
                    "timed_trace dataset passes pre-tokenized prompts (list[int]) and requires a "
                    f"completions backend ('vllm' or 'openai'), not --backend {self.backend}"
                )
        if self.dataset_name == "random-mm":
            self._validate_random_mm()
        if self.dataset_name == "custom_image":
            self._validate_custom_image()
        if self.dataset_name == "hf":
            if self.dataset_path is None:
                raise ConfigError("--dataset-name hf needs --dataset-path (a hub dataset id)")
            self.hf_dataset()
            if importlib.util.find_spec("datasets") is None:
                raise ConfigError(
                    "--dataset-name hf needs the datasets library: pip install 'loadgen[hf]'"
                )
            if self.hf_output_len is not None and self.hf_output_len < 1:
                raise ConfigError(f"--hf-output-len must be >= 1, got {self.hf_output_len}")
        if self.dataset_name == "sonnet":
            if self.dataset_path is None:
                raise ConfigError(
                    "--dataset-name sonnet needs --dataset-path (a text of poem lines)"
                )
            if self.skip_tokenizer_init:
                raise ConfigError(
                    "--dataset-name sonnet measures its prompts with the tokenizer's chat "
                    "template; --skip-tokenizer-init leaves none"
                )
        if self.dataset_name == "spec_bench":
            if self.dataset_path is None:
                raise ConfigError(
                    "--dataset-name spec_bench needs --dataset-path (Spec-Bench's question.jsonl)"
                )
            if self.spec_bench_output_len < 1:
                raise ConfigError(
                    f"--spec-bench-output-len must be >= 1, got {self.spec_bench_output_len}"
                )
        if self.dataset_name == "custom":
            if self.dataset_path is None:
                raise ConfigError("--dataset-name custom needs --dataset-path (a .jsonl file)")
            if self.custom_output_len < 1 and self.custom_output_len != -1:
                raise ConfigError(
                    f"--custom-output-len must be >= 1, or -1 for each line's output_tokens; "
                    f"got {self.custom_output_len}"
                )
        self._validate_plots()
        if not self.probe_request_rate >= 0 or math.isinf(self.probe_request_rate):
            raise ConfigError(
                f"--probe-request-rate must be a finite rate >= 0, got {self.probe_request_rate}"
            )
        if self.max_concurrency is not None and self.max_concurrency <= 0:
            raise ConfigError("--max-concurrency must be greater than 0")
        if not self.burstiness > 0:
            raise ConfigError(f"--burstiness must be > 0, got {self.burstiness}")
        if not self.request_rate > 0:
            raise ConfigError(f"--request-rate must be > 0, got {self.request_rate}")
        if self.num_prompts < 1 and self.dataset_name not in ALL_ROWS_DATASETS:
            raise ConfigError(f"--num-prompts must be at least 1, got {self.num_prompts}")
        if self.ramp_up_strategy is not None:
            self._validate_ramp_up()
        if self.tokenizer_mode not in ("auto", "hf"):
            raise ConfigError(f"not supported yet: --tokenizer-mode {self.tokenizer_mode}")
        if self.ready_check_timeout_sec < 0:
            raise ConfigError(
                f"--ready-check-timeout-sec must be >= 0, got {self.ready_check_timeout_sec:g}"
            )
        if not self.ready_check_interval_sec > 0:
            raise ConfigError(
                f"--ready-check-interval-sec must be > 0, got {self.ready_check_interval_sec:g}"
            )
        if not self.server_tokenizer_timeout_sec > 0:
            raise ConfigError(
                "--server-tokenizer-timeout-sec must be > 0, "
                f"got {self.server_tokenizer_timeout_sec:g}"
            )
        if self.num_warmups < 0:
            raise ConfigError(f"--num-warmups must be >= 0, got {self.num_warmups}")
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        self.selected_metrics()
        self.percentiles()
        try:
            parse_range_ratio(self.random_range_ratio)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _validate_custom_image(self) -> None:
        """custom_image needs a file, the chat backend, a fixed output length, and pillow to
        inline images."""
        if self.dataset_path is None:
            raise ConfigError("--dataset-name custom_image needs --dataset-path (a .jsonl file)")
        if self.backend != "openai-chat":
            raise ConfigError(
                f"Multi-modal content is not supported on backend {self.backend!r}; use one "
                "of ['openai-chat'] (--dataset-name custom_image)"
            )
        if self.custom_output_len < 1:
            raise ConfigError(
                f"--custom-output-len must be >= 1 with custom_image, got {self.custom_output_len}"
            )
        if self.custom_ensure_client_side_data and importlib.util.find_spec("PIL") is None:
            raise ConfigError(
                "--custom-ensure-client-side-data needs pillow: pip install 'loadgen[mm]'"
            )

    def _validate_random_mm(self) -> None:
        """Upstream's refusals for random-mm, and the image library installed."""
        if self.backend != "openai-chat":
            raise ConfigError(
                f"Multi-modal content (images) is not supported on backend {self.backend!r}; "
                "use one of ['openai-chat'] (--dataset-name random-mm)"
            )
        if self.random_batch_size != 1:
            raise ConfigError("--random-batch-size above 1 is not supported for random-mm")
        if importlib.util.find_spec("PIL") is None:
            raise ConfigError("--dataset-name random-mm needs pillow: pip install 'loadgen[mm]'")
        try:
            item_count_range(
                self.random_mm_base_items_per_request,
                self.random_mm_num_mm_items_range_ratio,
                parse_limits(self.random_mm_limit_mm_per_prompt),
                parse_bucket_config(self.random_mm_bucket_config),
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _validate_plots(self) -> None:
        """Upstream's threshold check, and the [plot] extra installed for the plots asked for."""
        if self.plot_timeline:
            try:
                parse_itl_thresholds(self.timeline_itl_thresholds)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        for flag, asked in (
            ("--plot-timeline", self.plot_timeline),
            ("--plot-dataset-stats", self.plot_dataset_stats),
        ):
            missing = missing_libraries(flag) if asked else []
            if missing:
                raise ConfigError(
                    f"{flag} needs {' and '.join(missing)}: pip install 'loadgen[plot]'"
                )

    def _validate_pooling_inputs(self) -> None:
        """Batched and query-document prompts exist only for pooling backends, and the rerank
        backend needs them."""
        if self.random_batch_size < 1:
            raise ConfigError(f"--random-batch-size must be >= 1, got {self.random_batch_size}")
        if not self.pooling and self.random_batch_size > 1:
            raise ConfigError(
                "--random-batch-size above 1 batches embedding inputs; it needs a pooling "
                f"backend (--backend openai-embeddings, ...), not {self.backend}"
            )
        if not self.pooling and self.dataset_name == "random-rerank":
            raise ConfigError(
                f"--dataset-name random-rerank needs a pooling backend (vllm-rerank, "
                f"openai-embeddings, ...), not {self.backend}"
            )
        batched = self.random_batch_size > 1 or self.dataset_name == "random-rerank"
        if batched and self.backend in EMBEDDINGS_CHAT_BACKENDS:
            raise ConfigError(
                f"--backend {self.backend} sends one chat message per request; batched inputs "
                "(--random-batch-size, random-rerank) need openai-embeddings, "
                "infinity-embeddings, vllm-pooling or vllm-rerank"
            )
        if self.backend == "vllm-rerank" and self.dataset_name != "random-rerank":
            raise ConfigError(
                "--backend vllm-rerank sends a query and documents per request: it needs "
                "--dataset-name random-rerank"
            )

    def _validate_ramp_up(self) -> None:
        """Upstream's ramp-up checks, in its order and words, plus the flags' values."""
        if self.ramp_up_strategy not in RAMP_UP_STRATEGIES:
            raise ConfigError(
                f"--ramp-up-strategy must be linear or exponential, got {self.ramp_up_strategy}"
            )
        start, end = self.ramp_up_start_rps, self.ramp_up_end_rps
        if not math.isinf(self.request_rate):
            raise ConfigError(
                "When using ramp-up, do not specify --request-rate. The request rate will be "
                "controlled by ramp-up parameters. Please remove the --request-rate argument."
            )
        if start is None or end is None:
            raise ConfigError(
                "When using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps "
                "must be specified"
            )
        values = f"(--ramp-up-start-rps {start}, --ramp-up-end-rps {end})"
        if start < 0 or end < 0:
            raise ConfigError(f"Ramp-up start and end RPS must be non-negative {values}")
        if start > end:
            raise ConfigError(f"Ramp-up start RPS must be less than end RPS {values}")
        if start == 0:
            # Upstream rejects 0 here only for exponential; a linear ramp from 0 passes its
            # checks and then fails its schedule's assertion ("Obtained non-positive request
            # rate 0.0."), as request 0 gets rate 0. Refuse both before the run starts.
            raise ConfigError(
                f"For {self.ramp_up_strategy} ramp-up, the start RPS cannot be 0 "
                "(--ramp-up-start-rps 0)"
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

    @property
    def api_url(self) -> str:
        """The URL every request is posted to."""
        return f"{self.server_url}{self.endpoint}"

    @property
    def server_url(self) -> str:
        """The server's base URL (``--base-url``, or built from ``--host`` and ``--port``)."""
        if self.base_url is not None:
            return self.base_url
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"http://{host}:{self.port}"
