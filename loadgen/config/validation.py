"""`RunConfig.validate()` (upstream's refusals, one line naming the flag) and
`RunConfig.ignored_flag_warnings()` (flags given where they have no effect).

A flag counts as given when it was on the command line (``RunConfig.given``, filled by the CLI
from click's parameter source), never because its value differs from the default: an explicit
``--custom-output-len 256`` with ``--dataset-name random`` warns, and ``--output-len 10``, which
sets ``custom_output_len``, does not.
"""

from __future__ import annotations

import importlib.util
import math

from loadgen.config.audio_rules import audio_problem
from loadgen.config.base import (
    ALL_ROWS_DATASETS,
    SYNTHETIC_DATASETS,
    RunConfigBase,
)
from loadgen.config.errors import ConfigError
from loadgen.config.flags import RUN_FLAGS, SUPPORTED_DATASETS, available_cores
from loadgen.config.parsers import parse_itl_thresholds
from loadgen.config.upstream import UPSTREAM_DATASETS
from loadgen.config.urls import check_server_url
from loadgen.datasets.bfcl import BFCL_PATH
from loadgen.datasets.hf_multimodal import IMAGE_PATHS, multimodal_backend_problem
from loadgen.datasets.random import parse_range_ratio
from loadgen.datasets.random_mm import item_count_range, parse_bucket_config, parse_limits
from loadgen.datasets.speed_bench import PREPARE_SCRIPT as SPEED_BENCH_PREPARE
from loadgen.payloads import (
    COMPLETIONS_BACKENDS,
    EMBEDDINGS_CHAT_BACKENDS,
    IMAGE_BACKENDS,
    SUPPORTED_BACKENDS,
    UPSTREAM_BACKENDS,
)
from loadgen.schedule import RAMP_UP_STRATEGIES

WORKERS_PER_CORE = 4  # beyond this, workers (about 60 MB each) only queue for the cores
PLOT_LIBRARIES = {
    "--plot-timeline": ("plotly", "pandas"),
    "--plot-dataset-stats": ("matplotlib",),
    "--format html": ("plotly",),  # loadgen report's page
}
PLOT_EXTRA = "pip install 'loadgen[plot]'"
MULTI_TURN_FLAGS = (
    "--multi-turn-num-turns",
    "--multi-turn-min-turns",
    "--multi-turn-max-turns",
    "--multi-turn-concurrency",
    "--multi-turn-delay-ms",
    "--multi-turn-delay-distribution",
    "--per-turn-input-len",
)


def missing_libraries(flag: str) -> list[str]:
    """The libraries a plot flag needs that are not installed."""
    return [name for name in PLOT_LIBRARIES[flag] if importlib.util.find_spec(name) is None]


class Validated(RunConfigBase):
    """RunConfig's checks and warnings (its fields come from the flag table)."""

    def ignored_flag_warnings(self) -> list[str]:
        """Warnings for flags given where they have no effect: a dataset's flags with another
        dataset and generation flags with a pooling backend (the table's ``readers``), and the
        rules below."""
        given = [flag for flag in RUN_FLAGS if flag.name in self.given]
        warnings = [
            f"{flag.name} has no effect with --dataset-name {self.dataset_name}"
            for flag in given
            if _outside(self.dataset_name, flag.readers, UPSTREAM_DATASETS)
        ]
        if self.dataset_name == "spec_bench" and "--seed" in self.given and self.seed != 0:
            warnings.append(
                f"--seed {self.seed} does not reach the {self.dataset_name} shuffle, which uses "
                "seed 0 as upstream's does"
            )
        if (
            "--chat-template-kwargs" in self.given
            and self.dataset_name in ("custom", "speed_bench")
            and not self.uses_chat_template
        ):
            why = "--skip-chat-template" if self.skip_chat_template else "--skip-tokenizer-init"
            warnings.append(f"--chat-template-kwargs has no effect with {why}")
        if self.self_timed_trace:
            warnings += [
                f"{flag} has no effect with a self-timed trace (--no-self-timed uses it)"
                for flag in ("--request-rate", "--burstiness", "--ramp-up-strategy")
                if flag in self.given
            ]
        if "--timeline-itl-thresholds" in self.given and not self.plot_timeline:
            warnings.append("--timeline-itl-thresholds has no effect without --plot-timeline")
        if "--use-beam-search" in self.given:
            warnings.append("--use-beam-search has no effect (vllm bench serve ignores it too)")
        warnings += [
            f"{flag.name} has no effect with --backend {self.backend}"
            for flag in given
            if _outside(self.backend, flag.readers, UPSTREAM_BACKENDS)
        ]
        return warnings

    def validate(self) -> None:
        """Reject values upstream rejects, with a one-line message naming the flag."""
        if self.backend not in SUPPORTED_BACKENDS:
            raise ConfigError(f"not supported yet: --backend {self.backend}")
        if problem := check_server_url(self.base_url, self.host, self.port, self.server_url):
            raise ConfigError(problem)
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
        hf = self.dataset_name == "hf" and self.dataset_path is not None
        hf_paths = self.hf_dataset().paths if hf else None
        if problem := audio_problem(
            self.backend, self.dataset_name, hf_paths, self.enable_multimodal_chat, self.given
        ):
            raise ConfigError(problem)
        if self.dataset_name == "custom_audio" and self.dataset_path is None:
            raise ConfigError("--dataset-name custom_audio needs --dataset-path (a JSONL file)")
        if self.dataset_name == "random-mm":
            self._validate_random_mm()
        if self.dataset_name == "custom_image":
            self._validate_custom_image()
        if self.dataset_name == "hf":
            if self.dataset_path is None:
                raise ConfigError("--dataset-name hf needs --dataset-path (a hub dataset id)")
            if BFCL_PATH in self.hf_dataset().paths:
                if self.backend != "openai-chat":
                    raise ConfigError(
                        "BFCL dataset requires the 'openai-chat' backend because it sends "
                        "per-request tool schemas via chat completions; got --backend "
                        f"{self.backend}"
                    )
            elif importlib.util.find_spec("datasets") is None:
                raise ConfigError(
                    "--dataset-name hf needs the datasets library: pip install 'loadgen[hf]'"
                )
            if self.hf_output_len is not None and self.hf_output_len < 1:
                raise ConfigError(f"--hf-output-len must be >= 1, got {self.hf_output_len}")
            if problem := multimodal_backend_problem(self.backend, self.hf_dataset().paths):
                raise ConfigError(problem)
            images = self.hf_dataset().paths[0] in IMAGE_PATHS
            if images and importlib.util.find_spec("PIL") is None:
                raise ConfigError("the hf image datasets need pillow: pip install 'loadgen[mm]'")
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
        if self.dataset_name == "speed_bench":
            if self.dataset_path is None:
                raise ConfigError(
                    "--dataset-name speed_bench needs --dataset-path (the directory of "
                    f"SPEED-Bench's subsets; fetch it with `curl -LsSf {SPEED_BENCH_PREPARE} | "
                    "python3 -`)"
                )
            if self.speed_bench_output_len < 1:
                raise ConfigError(
                    f"--speed-bench-output-len must be >= 1, got {self.speed_bench_output_len}"
                )
        if self.dataset_name == "burstgpt" and self.dataset_path is None:
            raise ConfigError("--dataset-name burstgpt needs --dataset-path (the BurstGPT CSV)")
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
        self._validate_placement()
        self._validate_multi_turn()
        self._validate_rust_extras()
        cores = available_cores()
        if self.ray is None and self.workers > WORKERS_PER_CORE * cores:
            raise ConfigError(
                f"--workers {self.workers} is more than {WORKERS_PER_CORE} per available core "
                f"({cores} here, so at most {WORKERS_PER_CORE * cores}): each worker is a process "
                "of about 60 MB, and more than the cores can run only adds timing noise"
            )
        self.selected_metrics()
        self.percentiles()
        try:
            parse_range_ratio(self.random_range_ratio)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _validate_multi_turn(self) -> None:
        """--multi-turn and its family: chat, random or sharegpt, turn counts that make sense."""
        family = [name for name in MULTI_TURN_FLAGS if name in self.given]
        if not self.multi_turn:
            if family:
                raise ConfigError(f"{family[0]} shapes conversations: give it with --multi-turn")
            return
        if self.backend != "openai-chat":
            raise ConfigError(
                "--multi-turn sends each conversation as chat messages: give --backend "
                "openai-chat --endpoint /v1/chat/completions"
            )
        if self.dataset_name not in ("random", "sharegpt"):
            raise ConfigError(
                f"--multi-turn builds conversations from --dataset-name random or sharegpt, "
                f"not {self.dataset_name}"
            )
        if (
            isinstance(self.max_concurrency, tuple)
            or isinstance(self.request_rate, tuple)
            or (self.num_runs > 1 or self.steady_state)
        ):
            raise ConfigError("--multi-turn runs one run: no lists, --num-runs or --steady-state")
        if "--multi-turn-concurrency" in self.given and "--max-concurrency" in self.given:
            raise ConfigError(
                "--multi-turn-concurrency is --max-concurrency for conversations: give one"
            )
        low = self.multi_turn_min_turns or self.multi_turn_num_turns
        high = self.multi_turn_max_turns or self.multi_turn_num_turns
        if self.dataset_name == "random" and low > high:
            raise ConfigError(
                f"--multi-turn-min-turns {low} is above --multi-turn-max-turns {high}"
            )

    def _validate_rust_extras(self) -> None:
        """The Rust client's --prompt-token-ids (completions only) and --dry-run (no -q)."""
        if self.prompt_token_ids and self.backend not in COMPLETIONS_BACKENDS:
            raise ConfigError(
                "--prompt-token-ids sends each prompt as token ids in the completions body's "
                f"prompt: give --backend openai or vllm, not {self.backend}"
            )
        if self.dry_run and self.quiet:
            raise ConfigError("--dry-run prints a plan, not a run's report: drop -q/--quiet")

    def _validate_placement(self) -> None:
        """--workers, and where workers run: --listen/--remote-workers/--key, --ray."""
        if self.workers < 0 or (self.workers == 0 and not self.remote_workers):
            raise ConfigError(
                f"--workers must be at least 1 (0 only with --remote-workers), got {self.workers}"
            )
        if self.ray is not None and (self.listen is not None or self.remote_workers):
            raise ConfigError(
                "--ray places every worker itself: give it without --listen and --remote-workers"
            )
        if self.workers_per_node is not None and self.ray is None:
            raise ConfigError("--workers-per-node places Ray actors: give it with --ray")
        if self.ray is not None and importlib.util.find_spec("ray") is None:
            raise ConfigError("--ray needs Ray, which is not installed: pip install 'loadgen[ray]'")
        joined = (self.listen is not None, self.remote_workers > 0, self.key is not None)
        if any(joined) and not all(joined):
            raise ConfigError(
                "workers that join by hand need all of --listen HOST:PORT, --remote-workers N "
                "and --key coordinator.key (from `loadgen keygen DIR`)"
            )

    def _validate_custom_image(self) -> None:
        """custom_image needs a file, a backend that sends images, a fixed output length, and
        pillow to inline images."""
        if self.dataset_path is None:
            raise ConfigError("--dataset-name custom_image needs --dataset-path (a .jsonl file)")
        if self.backend not in IMAGE_BACKENDS:
            raise ConfigError(
                f"Multi-modal content is not supported on backend {self.backend!r}; use one "
                f"of {list(IMAGE_BACKENDS)} (--dataset-name custom_image)"
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
            _, _, limits, _ = item_count_range(
                self.random_mm_base_items_per_request,
                self.random_mm_num_mm_items_range_ratio,
                parse_limits(self.random_mm_limit_mm_per_prompt),
                parse_bucket_config(self.random_mm_bucket_config),
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if limits.get("video", 0) > 0 and importlib.util.find_spec("cv2") is None:
            raise ConfigError(
                "--random-mm-bucket-config: video buckets (frames > 1) need OpenCV: "
                "pip install 'loadgen[mm]'"
            )

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
                raise ConfigError(f"{flag} needs {' and '.join(missing)}: {PLOT_EXTRA}")

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


def _outside(name: str, readers: tuple[str, ...], kind: tuple[str, ...]) -> bool:
    """Whether ``name`` (a dataset, or a backend) is not among the readers of its kind that a
    flag names; a flag that names none of that kind is read by all of them."""
    of_kind = [reader for reader in readers if reader in kind]
    return bool(of_kind) and name not in of_kind
