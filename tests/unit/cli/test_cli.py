"""The argv rules `loadgen run` shares with upstream's FlexibleArgumentParser; no sockets."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner
from helpers import ROOT, config_given

from loadgen.cli import cli
from loadgen.cli.vllm_compat import normalize_argv
from loadgen.config import VLLM_BENCH_SERVE_FLAGS, ConfigError, RunConfig

KNOWN = {"--max-concurrency", "--header", "--result-filename", "--num-prompts"}


def test_underscores_become_dashes_in_the_flag_name_only() -> None:
    args = ["--max_concurrency", "8", "--result_filename=a_b.json", "--num_prompts=3"]
    assert normalize_argv(args, KNOWN) == [
        "--max-concurrency",
        "8",
        "--result-filename=a_b.json",
        "--num-prompts=3",
    ]


def test_header_takes_several_values_after_one_flag() -> None:
    args = ["--header", "a=1", "b=2", "--num-prompts", "3", "--header", "c=3"]
    assert normalize_argv(args, KNOWN) == [
        "--header", "a=1", "--header", "b=2", "--num-prompts", "3", "--header", "c=3",
    ]  # fmt: skip


def test_a_known_vllm_flag_that_is_not_built_yet_is_refused() -> None:
    with pytest.raises(click.UsageError, match="not supported yet: --dataset-path"):
        normalize_argv(["--dataset_path", "x"], KNOWN)


def test_flags_unknown_to_upstream_are_left_to_click() -> None:
    assert normalize_argv(["--no-such-flag"], KNOWN) == ["--no-such-flag"]
    assert normalize_argv(["--", "--dataset-path"], KNOWN) == ["--", "--dataset-path"]


def test_every_run_option_is_a_vllm_flag_or_a_documented_loadgen_one() -> None:
    run = cli.get_command(None, "run")
    own = {
        "--workers",
        "--mock",
        "--mock-ttft-ms",
        "--mock-itl-ms",
        "--mock-prefill-us-per-token",
        "--ready-check-interval-sec",
        "--server-tokenizer-timeout-sec",
        "--save-records",
        "--fail-fast",
        "--request-timeout",
        "--idle-timeout",
        "--connect-timeout",
        "--dataset-cache",
        "--fail-on",
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
        "--server-metrics",
        "--server-metrics-interval",
        "--telemetry-url",
        "--prometheus-port",
        "--prometheus-host",
    }
    options = {opt for p in run.params for opt in getattr(p, "opts", []) if opt.startswith("--")}
    assert options - own <= VLLM_BENCH_SERVE_FLAGS
    assert own <= options


def test_an_upstream_flag_not_built_is_refused_by_name() -> None:
    # Every upstream flag is built now; the refusal stays for the next one upstream adds.
    with pytest.raises(click.UsageError, match="not supported yet: --asr-max-audio-len-sec"):
        normalize_argv(["--asr_max_audio_len_sec", "5"], known=set())


def test_mock_and_base_url_are_exclusive() -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", "--base-url", "http://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--mock starts its own server" in result.output


@pytest.mark.parametrize("flag", ["--mock-ttft-ms", "--mock-prefill-us-per-token"])
def test_the_mocks_flags_need_mock(flag: str) -> None:
    result = CliRunner().invoke(cli, ["run", "--base-url", "http://127.0.0.1:1", flag, "5"])
    assert result.exit_code == 2
    assert f"{flag} sets the embedded mock server: add --mock" in result.output


def test_an_unknown_backend_is_refused_by_click() -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", "--backend", "nope"])
    assert result.exit_code == 2
    assert "Invalid value for '--backend'" in result.output


def ramp(strategy: str, start: str, end: str) -> list[str]:
    return ["--ramp-up-strategy", strategy, "--ramp-up-start-rps", start, "--ramp-up-end-rps", end]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [*ramp("linear", "1", "5"), "--request-rate", "10"],
            "When using ramp-up, do not specify --request-rate.",
        ),
        (
            ["--ramp_up_strategy", "linear", "--ramp_up_start_rps", "1"],
            "both --ramp-up-start-rps and --ramp-up-end-rps must be specified",
        ),
        (
            ramp("linear", "-1", "5"),
            "Ramp-up start and end RPS must be non-negative "
            "(--ramp-up-start-rps -1, --ramp-up-end-rps 5)",
        ),
        (
            ramp("linear", "9", "5"),
            "Ramp-up start RPS must be less than end RPS "
            "(--ramp-up-start-rps 9, --ramp-up-end-rps 5)",
        ),
        (
            ramp("exponential", "0", "5"),
            "For exponential ramp-up, the start RPS cannot be 0 (--ramp-up-start-rps 0)",
        ),
        (  # upstream accepts it, then fails on request 0's rate of 0
            ramp("linear", "0", "5"),
            "For linear ramp-up, the start RPS cannot be 0 (--ramp-up-start-rps 0)",
        ),
        (["--ramp-up-strategy", "step"], "Invalid value for '--ramp-up-strategy'"),
    ],
)
def test_bad_ramp_up_flags_exit_2_naming_the_flag(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_ramp_up_rps_without_a_strategy_are_ignored_as_upstream() -> None:
    RunConfig(ramp_up_start_rps=-3).validate()
    RunConfig(ramp_up_end_rps=7, request_rate=2.0).validate()


def test_sampling_flags_go_into_the_body_and_extra_body_wins() -> None:
    from loadgen.config import RunConfig
    from loadgen.payloads import build_body

    config = RunConfig(temperature=0.5, top_k=5, repetition_penalty=1.2, extra_body={"top_k": 7})
    extras = config.body_extras()
    assert extras == {"temperature": 0.5, "top_k": 7, "repetition_penalty": 1.2}
    body = build_body("openai", "m", "hi", 4, logprobs=None, ignore_eos=True, extra_body=extras)
    assert body["repetition_penalty"] == 1.2 and body["temperature"] == 0.5
    assert RunConfig().body_extras() is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--goodput", "ttft=5"], "Invalid format found for service level objectives."),
        (["--goodput", "ttft:5", "itl:3"], "Invalid metric name found, itl: 3.0."),
        (["--goodput", "e2el:-1"], "Invalid value found, e2el: -1.0."),
        (["--metadata", "novalue"], "use KEY=VALUE"),
        (["--tokenizer-mode", "mistral"], "not supported yet: --tokenizer-mode mistral"),
    ],
)
def test_bad_goodput_and_metadata_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_lora_assignment_round_robin_and_seeded_random() -> None:
    from loadgen.payloads import lora_assignment

    assert lora_assignment(["a", "b", "c"], 7, "round-robin", 0) == list("abcabca")
    first = lora_assignment(["a", "b"], 200, "random", 3)
    assert first == lora_assignment(["a", "b"], 200, "random", 3)
    assert first != lora_assignment(["a", "b"], 200, "random", 4)
    assert 70 < first.count("a") < 130


def test_one_or_more_flags_need_a_value_zero_or_more_do_not() -> None:
    known = KNOWN | {"--goodput", "--lora-modules", "--metadata", "--seed"}
    with pytest.raises(click.UsageError, match="--goodput expects at least one value"):
        normalize_argv(["--goodput", "--num-prompts", "3"], known)
    with pytest.raises(click.UsageError, match="--lora-modules expects at least one value"):
        normalize_argv(["--lora_modules"], known)
    assert normalize_argv(["--metadata", "--seed", "1"], known) == ["--seed", "1"]


def test_pooling_backends_report_e2el_and_send_no_generation_fields() -> None:
    config = config_given(
        backend="openai-embeddings",
        temperature=0.5,
        logprobs=2,
        goodput={"e2el": 100.0},
        extra_body={"dimensions": 8},
    )
    config.validate()
    assert config.pooling and not RunConfig().pooling
    assert config.selected_metrics() == ["e2el"]
    assert RunConfig().selected_metrics() == ["ttft", "tpot", "itl"]
    assert config.body_extras() == {"dimensions": 8}  # upstream sends no sampling parameters
    assert config.ignored_flag_warnings() == [
        "--logprobs has no effect with --backend openai-embeddings",
        "--goodput has no effect with --backend openai-embeddings",
        "--temperature has no effect with --backend openai-embeddings",
    ]
    assert config_given(temperature=0.5, logprobs=2).ignored_flag_warnings() == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"random_batch_size": 0}, "--random-batch-size must be >= 1, got 0"),
        ({"random_batch_size": 2}, "--random-batch-size above 1 batches embedding inputs"),
        ({"dataset_name": "random-rerank"}, "--dataset-name random-rerank needs a pooling"),
        ({"backend": "vllm-rerank"}, "--backend vllm-rerank sends a query and documents"),
        (
            {"backend": "openai-embeddings-chat", "random_batch_size": 4},
            "--backend openai-embeddings-chat sends one chat message per request",
        ),
        (
            {"backend": "vllm-rerank", "dataset_name": "random-rerank", "dataset_path": "x"},
            "--dataset-path is not read by --dataset-name random-rerank",
        ),
    ],
)
def test_batched_and_rerank_inputs_need_a_fitting_backend(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(**fields).validate()


def test_rerank_and_batch_configs_that_work() -> None:
    RunConfig(backend="vllm-rerank", dataset_name="random-rerank", random_batch_size=8).validate()
    RunConfig(backend="openai-embeddings", random_batch_size=8).validate()
    config = config_given(backend="vllm-rerank", dataset_name="random-rerank", extra_body={"a": 1})
    assert config.ignored_flag_warnings() == [
        "--extra-body has no effect with --backend vllm-rerank"
    ]
    assert config_given(no_reranker=True, random_batch_size=1).ignored_flag_warnings() == [
        "--no-reranker has no effect with --dataset-name random"
    ]


def test_flags_upstream_accepts_without_effect_are_accepted_with_a_note() -> None:
    assert config_given(use_beam_search=True).ignored_flag_warnings() == [
        "--use-beam-search has no effect (vllm bench serve ignores it too)"
    ]
    RunConfig(trust_remote_code=True).validate()  # nothing to trust: tokenizer.json runs no code


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"self_timed": True}, "--self-timed/--no-self-timed is only supported with"),
        ({"self_timed": False, "dataset_name": "custom", "dataset_path": "x.jsonl"}, "only"),
        ({"dataset_name": "timed_trace"}, "--dataset-name timed_trace needs --dataset-path"),
        (
            {"dataset_name": "timed_trace", "dataset_path": "t", "backend": "openai-chat"},
            r"requires a completions backend \('vllm' or 'openai'\)",
        ),
    ],
)
def test_timed_trace_refusals_are_upstreams(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(**fields).validate()


def test_a_self_timed_trace_ignores_the_rate_flags_and_says_so() -> None:
    config = config_given(
        dataset_name="timed_trace", dataset_path="t", request_rate=5.0, burstiness=2.0
    )
    config.validate()
    assert config.self_timed_trace
    assert config.ignored_flag_warnings() == [
        "--request-rate has no effect with a self-timed trace (--no-self-timed uses it)",
        "--burstiness has no effect with a self-timed trace (--no-self-timed uses it)",
    ]
    rate_paced = RunConfig(dataset_name="timed_trace", dataset_path="t", self_timed=False)
    assert not rate_paced.self_timed_trace
    assert config_given(timed_trace_chunk_hash_size=512).ignored_flag_warnings() == [
        "--timed-trace-chunk-hash-size has no effect with --dataset-name random"
    ]


@pytest.mark.parametrize("rate", [-1.0, float("inf"), float("nan")])
def test_probe_rate_must_be_a_finite_rate(rate: float) -> None:
    with pytest.raises(ConfigError, match="--probe-request-rate must be a finite rate >= 0"):
        RunConfig(probe_request_rate=rate).validate()


def test_plot_flags_check_their_values_and_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    import loadgen.config.validation

    with pytest.raises(ConfigError, match="Expected 2 ITL threshold values, got 3"):
        RunConfig(plot_timeline=True, timeline_itl_thresholds="1,2,3").validate()
    with pytest.raises(ConfigError, match="Invalid --timeline-itl-thresholds format"):
        RunConfig(plot_timeline=True, timeline_itl_thresholds="a,b").validate()
    assert config_given(timeline_itl_thresholds="5,9").ignored_flag_warnings() == [
        "--timeline-itl-thresholds has no effect without --plot-timeline"
    ]
    monkeypatch.setattr(loadgen.config.validation.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"--plot-timeline needs plotly and pandas: pip install"):
        RunConfig(plot_timeline=True).validate()
    with pytest.raises(ConfigError, match=r"--plot-dataset-stats needs matplotlib"):
        RunConfig(plot_dataset_stats=True).validate()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, r"Multi-modal content \(images\) is not supported on backend 'openai'"),
        ({"backend": "openai-chat", "random_batch_size": 2}, "--random-batch-size above 1"),
        (
            {"backend": "openai-chat", "random_mm_bucket_config": "{(8, 8): 1.0}"},
            "Invalid bucket key",
        ),
        (
            {"backend": "openai-chat", "random_mm_num_mm_items_range_ratio": 2.0},
            "must be in",
        ),
    ],
)
def test_random_mm_refusals(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(dataset_name="random-mm", **fields).validate()


def test_output_len_sets_every_target_and_the_docs_name_them_all(monkeypatch) -> None:
    import re

    from loadgen.cli import run as run_cli
    from loadgen.config import OUTPUT_LEN_TARGETS, flag_name

    seen: list = []
    monkeypatch.setattr(run_cli, "run", lambda config: seen.append(config) or 0)
    result = CliRunner().invoke(cli, ["run", "--mock", "--output-len", "7"])
    assert result.exit_code == 0, result.output
    assert all(getattr(seen[0], name) == 7 for name in OUTPUT_LEN_TARGETS)
    compat = (ROOT / "docs" / "compat.md").read_text()
    row = next(line for line in compat.splitlines() if line.startswith("| `--output-len` |"))
    named = re.findall(r"`(--[a-z-]+-output-len)`", row.split("Copied into", 1)[1])
    assert named == [flag_name(name) for name in OUTPUT_LEN_TARGETS]
    help_text = CliRunner().invoke(cli, ["run", "--help"]).output
    unwrapped = re.sub(r"-\s+", "-", " ".join(help_text.split()))  # click wraps at hyphens too
    assert ", ".join(map(flag_name, OUTPUT_LEN_TARGETS)) + ")" in unwrapped


def test_off_a_terminal_the_libraries_progress_bars_are_off(monkeypatch) -> None:
    from loadgen import cli as cli_module

    for name in cli_module.LIBRARY_BARS_OFF:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.argv", ["loadgen", "--version"])
    with pytest.raises(SystemExit):
        cli_module.main()  # stderr is pytest's capture here: not a terminal
    assert all(os.environ[name] == "1" for name in cli_module.LIBRARY_BARS_OFF)
