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

from loadgen.backends import BACKENDS, COMPLETIONS_BACKENDS
from loadgen.config.audio_rules import audio_problem
from loadgen.config.base import ALL_ROWS_DATASETS, RunConfigBase
from loadgen.config.errors import ConfigError
from loadgen.config.flags import RUN_FLAGS, SUPPORTED_DATASETS, available_cores
from loadgen.config.parsers import parse_itl_thresholds
from loadgen.config.sections.traffic import RAMP_UP_RATES_MISSING
from loadgen.config.upstream import UPSTREAM_BACKENDS, UPSTREAM_DATASETS
from loadgen.config.urls import check_server_url
from loadgen.datasets.registry import check_dataset
from loadgen.plot_extra import PLOT_EXTRA, missing_libraries
from loadgen.schedule import RAMP_UP_STRATEGIES

WORKERS_PER_CORE = 4  # beyond this, workers (about 60 MB each) only queue for the cores
SEARCH_FLAGS = ("--search-start", "--search-max", "--search-tolerance", "--search-repeats")
MULTI_TURN_FLAGS = (
    "--multi-turn-num-turns",
    "--multi-turn-min-turns",
    "--multi-turn-max-turns",
    "--multi-turn-concurrency",
    "--multi-turn-delay-ms",
    "--multi-turn-delay-distribution",
    "--per-turn-input-len",
)


class Validated(RunConfigBase):
    """RunConfig's checks and warnings (its fields come from the sections)."""

    given: frozenset[str]  # RunConfig's field (run_config.py): the flags given

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
        if self.search is None:
            warnings += [
                f"{flag} has no effect without --search"
                for flag in SEARCH_FLAGS
                if flag in self.given
            ]
        warnings += [
            f"{flag.name} has no effect with --backend {self.backend}"
            for flag in given
            if _outside(self.backend, flag.readers, UPSTREAM_BACKENDS)
        ]
        return warnings

    def validate(self) -> None:
        """Reject values upstream rejects, with a one-line message naming the flag: a value the
        flag table refuses (its range or its check), what the dataset refuses (its registry
        entry's checks), and here the rules that span several flags."""
        if self.backend not in BACKENDS:
            raise ConfigError(f"not supported yet: --backend {self.backend}")
        if problem := check_server_url(self.base_url, self.host, self.port, self.server_url):
            raise ConfigError(problem)
        if self.dataset_name not in SUPPORTED_DATASETS:
            raise ConfigError(f"not supported yet: --dataset-name {self.dataset_name}")
        for flag in RUN_FLAGS:
            if problem := flag.value_problem(getattr(self, flag.field)):
                raise ConfigError(problem)
        self._validate_pooling_inputs()
        if self.self_timed is not None and self.dataset_name != "timed_trace":
            raise ConfigError(
                "--self-timed/--no-self-timed is only supported with --dataset-name=timed_trace"
            )
        hf = self.dataset_name == "hf" and self.dataset_path is not None
        hf_paths = self.hf_dataset().paths if hf else None
        if problem := audio_problem(
            self.backend, self.dataset_name, hf_paths, self.enable_multimodal_chat, self.given
        ):
            raise ConfigError(problem)
        if self.probe_request_rate > 0 and BACKENDS[self.backend].multipart:
            raise ConfigError(
                f"--probe-request-rate sends JSON probes; --backend {self.backend} takes uploads"
            )
        try:
            check_dataset(self)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self._validate_plots()
        if self.num_prompts < 1 and self.dataset_name not in ALL_ROWS_DATASETS:
            raise ConfigError(f"--num-prompts must be at least 1, got {self.num_prompts}")
        if self.ramp_up_strategy is not None:
            self._validate_ramp_up()
        self._validate_placement()
        self._validate_duration()
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

    def _validate_duration(self) -> None:
        """--duration and the steady window: flags that bound or trim a run by time."""
        if self.duration is None:
            if "--duration-grace-s" in self.given:
                raise ConfigError("--duration-grace-s is for a --duration run: give --duration")
            if "--duration-block" in self.given:
                raise ConfigError("--duration-block is for a --duration run: give --duration")
            return
        if self.ramp_up_strategy is not None:
            raise ConfigError(
                "--ramp-up-strategy ramps the rate over --num-prompts requests, not over "
                "--duration: give one of them"
            )
        if self.multi_turn:
            raise ConfigError("--duration does not bound --multi-turn runs: give --num-prompts")
        if self.warmup_s + self.cooldown_s >= self.duration:
            raise ConfigError(
                f"--warmup-s {self.warmup_s:g} and --cooldown-s {self.cooldown_s:g} leave no "
                f"steady window in --duration {self.duration:g} s"
            )

    def _validate_multi_turn(self) -> None:
        """--multi-turn and its family: chat, random or sharegpt, turn counts that make sense."""
        family = [name for name in MULTI_TURN_FLAGS if name in self.given]
        if not self.multi_turn:
            if family:
                raise ConfigError(f"{family[0]} shapes conversations: give it with --multi-turn")
            return
        if self.backend != "openai-chat":
            raise ConfigError(
                "--multi-turn sends each conversation as chat messages: give --backend openai-chat"
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
        if batched and not BACKENDS[self.backend].batches:
            raise ConfigError(
                f"--backend {self.backend} sends one chat message per request; batched inputs "
                "(--random-batch-size, random-rerank) need openai-embeddings, "
                "infinity-embeddings, vllm-pooling or vllm-rerank"
            )
        if BACKENDS[self.backend].query_documents and self.dataset_name != "random-rerank":
            raise ConfigError(
                f"--backend {self.backend} sends a query and documents per request: it needs "
                "--dataset-name random-rerank"
            )

    def _validate_ramp_up(self) -> None:
        """Upstream's ramp-up checks, in its order and words, plus the flags' values."""
        if self.ramp_up_strategy not in RAMP_UP_STRATEGIES:
            raise ConfigError(
                f"--ramp-up-strategy must be linear or exponential, got {self.ramp_up_strategy}"
            )
        start, end = self.ramp_up_start_rps, self.ramp_up_end_rps
        if isinstance(self.request_rate, tuple) or not math.isinf(self.request_rate):
            raise ConfigError(
                "When using ramp-up, do not specify --request-rate. The request rate will be "
                "controlled by ramp-up parameters. Please remove the --request-rate argument."
            )
        if start is None or end is None:
            raise ConfigError(RAMP_UP_RATES_MISSING)
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
