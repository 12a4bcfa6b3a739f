"""The argv rules `loadgen run` shares with upstream's FlexibleArgumentParser; no sockets."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from loadgen.cli import cli, normalize_argv
from loadgen.vllm_flags import VLLM_BENCH_SERVE_FLAGS

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
    run = cli.commands["run"]
    own = {"--workers", "--mock", "--mock-ttft-ms", "--mock-itl-ms", "--ready-check-interval-sec"}
    options = {opt for p in run.params for opt in getattr(p, "opts", []) if opt.startswith("--")}
    assert options - own <= VLLM_BENCH_SERVE_FLAGS
    assert own <= options


def test_unsupported_flag_exit_code_is_2() -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", "--plot_timeline"])
    assert result.exit_code == 2
    assert "not supported yet: --plot-timeline" in result.output


def test_mock_and_base_url_are_exclusive() -> None:
    result = CliRunner().invoke(cli, ["run", "--mock", "--base-url", "http://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--mock starts its own server" in result.output


def test_upstream_choices_not_built_yet_are_refused_by_name() -> None:
    for args, message in (
        (["--backend", "vllm-rerank"], "not supported yet: --backend vllm-rerank"),
        (["--dataset-name", "sharegpt"], "not supported yet: --dataset-name sharegpt"),
    ):
        result = CliRunner().invoke(cli, ["run", "--mock", *args])
        assert result.exit_code == 2
        assert message in result.output
    result = CliRunner().invoke(cli, ["run", "--mock", "--backend", "nope"])
    assert result.exit_code == 2
    assert "Invalid value for '--backend'" in result.output
