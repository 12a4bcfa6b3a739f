"""Each option is declared once, as a field of RunConfig's sections (loadgen/config/sections/)
or of MockConfig (loadgen/mock/config.py) with its flag: the flag tables read from them
(RUN_FLAGS, MOCK_FLAGS), the click options, the fields' types, the warnings and docs/compat.md's
flag tables agree. No server and no run: `run` is replaced.

docs/compat.md is written by hand (its notes say more than the table) and checked here: a row
per upstream flag, `supported` exactly for the flags in the table, and a row under "loadgen's
own flags" for each flag of the table that upstream lacks.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
import typing

import click
import pytest
from click.testing import CliRunner
from helpers import ROOT

from loadgen.cli import cli
from loadgen.cli import run as run_cli
from loadgen.cli.mock_server import mock_server_command
from loadgen.cli.options import click_type
from loadgen.cli.run import run_command
from loadgen.config import (
    FLAGS,
    OUTPUT_LEN_TARGETS,
    RUN_FLAGS,
    UPSTREAM_DATASETS,
    VLLM_BENCH_SERVE_FLAGS,
    RunConfig,
)
from loadgen.config.flags import HELP_ORDER
from loadgen.config.sections import SECTIONS
from loadgen.config.upstream import UPSTREAM_BACKENDS
from loadgen.flag import Flag, flags_of
from loadgen.flag import flag as declare
from loadgen.mock.config import MOCK_FLAGS, MockConfig

COMPAT = ROOT / "docs" / "compat.md"
REPORTING = {
    "--save-result", "--append-result", "--result-dir", "--result-filename", "--save-detailed",
    "--label", "--metadata", "--percentile-metrics", "--metric-percentiles", "--goodput",
    "--plot-timeline", "--timeline-itl-thresholds", "--plot-dataset-stats", "--fail-on",
    "--warmup-s", "--cooldown-s",
}  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "config_class"), [(RUN_FLAGS, RunConfig), (MOCK_FLAGS, MockConfig)]
)
def test_each_flag_is_one_field_of_the_config_of_the_type_it_implies(flags, config_class) -> None:
    """A field's declared type is the one its flag gives: what ``parse`` returns, or else the
    flag's value type (a tuple when it repeats, None allowed when it has no default)."""
    names = [spelling for flag in flags for spelling in flag.names]
    assert len(names) == len(set(names))
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    assert {flag.field for flag in flags} == {name for name in fields if name != "given"}
    assert len(flags) == len(fields) - (config_class is RunConfig)
    hints = typing.get_type_hints(config_class)
    for flag in flags:
        assert fields[flag.field].metadata["flag"] is flag
        implied = flag.annotation if flag.parse is None else parse_returns(flag)
        assert hints[flag.field] == implied, flag.name
        assert flag.alias == "--" + flag.name[2:].replace("-", "_")


def parse_returns(flag: Flag) -> object:
    """The type a flag's ``parse`` is declared to return."""
    assert flag.parse is not None
    return typing.get_type_hints(flag.parse)["return"]


def test_the_run_flags_come_in_upstreams_order_and_each_section_in_its_own() -> None:
    assert [flag.name for flag in RUN_FLAGS] == list(HELP_ORDER)
    fields = [field.name for field in dataclasses.fields(RunConfig)]
    in_sections = [field.name for section in SECTIONS for field in dataclasses.fields(section)]
    assert fields == [*in_sections, "given"]


def test_a_field_whose_flag_names_another_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Config:
        headers: dict[str, str] = declare("--header", default=(), multiple=True, parse=dict)

    with pytest.raises(ValueError, match=r"^Config.headers: --header is the flag of header; "):
        flags_of(Config)


def test_a_config_is_frozen_and_replace_makes_a_new_one() -> None:
    config = RunConfig(output_len=9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = "m"  # type: ignore[misc]
    served = dataclasses.replace(config, model="m")
    assert (served.model, config.model, served.custom_output_len) == ("m", None, 9)


@pytest.mark.parametrize(
    ("command", "flags", "config_class"),
    [(run_command, RUN_FLAGS, RunConfig), (mock_server_command, MOCK_FLAGS, MockConfig)],
)
def test_the_click_defaults_are_the_configs(command, flags, config_class) -> None:
    context = command.make_context(command.name, [])  # the callbacks parse the defaults
    config = config_class()
    for flag in flags:
        option = next(p for p in command.params if p.name == flag.field)
        shorts = [flag.short] if flag.short else []
        assert option.opts == [flag.name, *shorts]
        assert option.secondary_opts == list(flag.names[1:])
        assert option.default == flag.default or (flag.multiple and option.default is None)
        if flag.default_factory is None:  # --workers: the cores, counted when a config is made
            assert context.params[flag.field] == getattr(config, flag.field), flag.name
        else:
            assert context.params[flag.field] is None
        assert option.multiple == flag.multiple and option.is_flag == flag.is_switch


def test_every_reader_is_an_upstream_dataset_or_backend() -> None:
    for flag in RUN_FLAGS:
        assert set(flag.readers) <= set(UPSTREAM_DATASETS) | set(UPSTREAM_BACKENDS), flag.name


def test_reporting_flags_are_the_ones_loadgen_report_may_take_again() -> None:
    assert {flag.name for flag in RUN_FLAGS if flag.reporting} == REPORTING
    assert not FLAGS["--save-records"].reporting


def test_save_records_is_declared_beside_the_output_flags() -> None:
    flag = FLAGS["--no-save-records"]
    assert flag.name == "--save-records" and flag.field == "save_records"
    assert RunConfig().save_records is None and flag.group is None
    assert "NAME.records.arrow" in flag.help


def test_output_len_sets_the_dataset_lengths_from_the_table() -> None:
    assert FLAGS["--output-len"].sets == OUTPUT_LEN_TARGETS
    config = RunConfig(output_len=9, input_len=5)
    assert all(getattr(config, name) == 9 for name in OUTPUT_LEN_TARGETS)
    assert config.random_input_len == 5


def test_the_config_methods_read_only_fields_and_methods() -> None:
    config = RunConfig()
    here = ROOT / "loadgen" / "config"
    for module in (here / "base.py", here / "validation.py", *here.glob("sections/*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "self":
                assert hasattr(config, node.attr) or node.attr.startswith("_"), node.attr


def warnings_of(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> list[str]:
    """The warnings `loadgen run ARGS` would print, through the real CLI."""
    seen: list[RunConfig] = []
    monkeypatch.setattr(run_cli, "run", lambda config: seen.append(config) or 0)
    result = CliRunner().invoke(cli, ["run", *args])
    assert result.exit_code == 0, result.output
    return seen[0].ignored_flag_warnings()


@pytest.mark.parametrize(
    ("args", "warnings"),
    [
        (  # given, even at its default value
            ["--custom-output-len", "256"],
            ["--custom-output-len has no effect with --dataset-name random"],
        ),
        (["--custom_output_len=256", "--dataset-name", "custom"], []),
        (["--output-len", "10"], []),  # sets --custom-output-len, which is not given
        (["--input-len", "10", "--output-len", "10", "--dataset-name", "random"], []),
        (
            ["--timeline-itl-thresholds", "25,50"],
            ["--timeline-itl-thresholds has no effect without --plot-timeline"],
        ),
        (["--plot-timeline", "--timeline-itl-thresholds", "25,50"], []),
        (
            ["--blazedit-min-distance", "0", "--no-stream"],
            [
                "--no-stream has no effect with --dataset-name random",
                "--blazedit-min-distance has no effect with --dataset-name random",
            ],
        ),
        (
            ["--backend", "openai-embeddings", "--top-k", "5", "--extra-body", "{}"],
            ["--top-k has no effect with --backend openai-embeddings"],
        ),
        (
            ["--chat-template-kwargs", "{}"],
            ["--chat-template-kwargs has no effect with --dataset-name random"],
        ),
    ],
)
def test_warnings_follow_the_flags_given_not_their_values(
    monkeypatch: pytest.MonkeyPatch, args: list[str], warnings: list[str]
) -> None:
    assert warnings_of(monkeypatch, args) == warnings


def test_given_is_what_click_says_came_from_the_command_line(monkeypatch) -> None:
    seen: list[RunConfig] = []
    monkeypatch.setattr(run_cli, "run", lambda config: seen.append(config) or 0)
    args = ["--seed", "0", "--no-self-timed", "--dataset-name", "timed_trace"]
    result = CliRunner().invoke(cli, ["run", *args, "--dataset-path", "t.jsonl"])
    assert result.exit_code == 0, result.output
    assert seen[0].given == {"--seed", "--self-timed", "--dataset-name", "--dataset-path"}
    assert RunConfig(seed=3).given == frozenset()


def test_mock_server_options_not_given_take_the_mock_configs_defaults(monkeypatch) -> None:
    import loadgen.cli.mock_server as mock_cli

    seen: list = []
    monkeypatch.setattr(mock_cli, "serve", lambda config: seen.append(config))
    monkeypatch.setattr(mock_cli.uvloop, "run", lambda coroutine: coroutine)
    result = CliRunner().invoke(cli, ["mock-server", "--lora", "a", "--startup-delay", "2"])
    assert result.exit_code == 0, result.output
    assert seen[0] == MockConfig(lora_names=("a",), startup_delay_s=2.0)
    assert seen[0].keepalive_timeout_s is None and seen[0].http_threads is None


def compat_rows(section: str) -> dict[str, str]:
    """docs/compat.md's table under ``## section``: flag -> the row's second column."""
    text = COMPAT.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(--[a-z0-9-]+)` \| ([^|]+) \|", text, flags=re.MULTILINE)
    flags = [flag for flag, _ in rows]
    assert len(flags) == len(set(flags)), section
    return {flag: status.strip() for flag, status in rows}


def test_compat_lists_every_upstream_flag_with_the_tables_status() -> None:
    rows = compat_rows("Flags")
    assert set(rows) == VLLM_BENCH_SERVE_FLAGS
    for flag, status in rows.items():
        if flag in FLAGS:
            assert status.startswith("supported"), flag
        else:
            assert status == "not supported yet", flag


def test_compat_lists_loadgens_own_flags() -> None:
    own = {flag.name for flag in RUN_FLAGS if flag.name not in VLLM_BENCH_SERVE_FLAGS}
    assert set(compat_rows("loadgen's own flags")) == own
    assert "These options of `loadgen run` have no upstream counterpart" in COMPAT.read_text()


def _outside(flag: Flag) -> float:
    """A value just outside ``flag``'s range."""
    if flag.minimum is not None:
        return flag.minimum if flag.min_open else flag.minimum - 1
    return math.inf


@pytest.mark.parametrize(
    "flag", [flag for flag in RUN_FLAGS if flag.minimum is not None or flag.maximum is not None]
)
def test_a_value_outside_a_flags_range_is_refused_by_validate(flag: Flag) -> None:
    """The range is the table's: the Python API is refused as the command line is, in the
    flag's own words where it has upstream's, and click checks only those without."""
    config = RunConfig()
    # This field alone, not copied into those it sets (--multi-turn-concurrency's would be
    # refused as --max-concurrency's).
    object.__setattr__(config, flag.field, _outside(flag))
    with pytest.raises(ValueError, match=f"^{flag.name} must be ") as refused:
        config.validate()
    assert str(refused.value) == flag.range_problem(_outside(flag))
    assert isinstance(click_type(flag), click.IntRange | click.FloatRange) is flag.click_range


def test_range_problem_reads_each_value_of_a_list_and_refuses_nan() -> None:
    rate = FLAGS["--request-rate"]
    assert rate.range_problem((1.0, math.inf)) is None
    assert rate.range_problem((1.0, 0.0)) == "--request-rate must be > 0, got 0.0"
    assert rate.range_problem(math.nan) == "--request-rate must be > 0, got nan"
    assert FLAGS["--ready-check-timeout-sec"].range_problem(-2) == (
        "--ready-check-timeout-sec must be >= 0, got -2"
    )
    assert FLAGS["--max-model-len"].range_problem(None) is None  # not given
    assert Flag("--x", int, minimum=1, maximum=3).range_problem(4) == (
        "--x must be >= 1 and <= 3, got 4"
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tokenizer_mode", "mistral", "not supported yet: --tokenizer-mode mistral"),
        ("random_range_ratio", "1.5", "--random-range-ratio values must be in [0, 1), got '1.5'"),
    ],
)
def test_a_flags_own_check_is_run_by_validate(field: str, value: str, message: str) -> None:
    flag = next(flag for flag in RUN_FLAGS if flag.field == field)
    assert flag.check is not None and flag.value_problem(value) == message
    with pytest.raises(ValueError) as refused:
        RunConfig(**{field: value}).validate()
    assert str(refused.value) == message
