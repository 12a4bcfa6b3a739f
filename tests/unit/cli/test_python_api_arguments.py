"""The Python API's keyword arguments are read by the CLI's parser: the same values, and a bad
one is a ValueError with the line the CLI prints after ``Error:``. No run starts here: every
case fails before a socket or process is opened."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import loadgen
from loadgen.cli import cli
from loadgen.cli.keywords import build_config

# Each keyword argument beside the same flags on the command line.
BAD = [
    ({"max_concurrency": "x"}, ["--max-concurrency", "x"]),
    ({"request_rate": -1}, ["--request-rate", "-1"]),
    ({"backend": "nope"}, ["--backend", "nope"]),
    ({"percentile_metrics": "foo"}, ["--percentile-metrics", "foo"]),
    (
        {"mock": True, "base_url": "http://127.0.0.1:1"},
        ["--mock", "--base-url", "http://127.0.0.1:1"],
    ),
]


def cli_error(args: list[str]) -> str:
    """The CLI's error line for these flags (its usage lines come before it)."""
    outcome = CliRunner().invoke(cli, ["run", *args])
    assert outcome.exit_code == 2, outcome.output
    return outcome.output.strip().splitlines()[-1]


@pytest.mark.parametrize(("options", "args"), BAD, ids=[args[0] for _, args in BAD])
def test_a_bad_argument_is_a_value_error_with_the_cli_message(
    options: dict, args: list[str]
) -> None:
    with pytest.raises(ValueError) as info:
        loadgen.run(**options)
    assert cli_error(args) == f"Error: {info.value}"
    assert "\n" not in str(info.value)


def test_an_unknown_argument_names_it() -> None:
    with pytest.raises(ValueError, match=r"^unknown argument 'max_concurency': .*--max-concurency"):
        loadgen.run(max_concurency=4)


def test_a_switch_takes_a_bool() -> None:
    with pytest.raises(ValueError, match=r"^--mock is a switch: pass True or False, not 'yes'$"):
        loadgen.run(mock="yes")


def test_values_are_read_as_the_cli_reads_them() -> None:
    config = build_config(
        {
            "base_url": "http://127.0.0.1:8000",
            "max_concurrency": 8,
            "request_rate": float("inf"),
            "header": {"X-A": "1", "X-B": "2"},
            "extra_body": {"temperature": 0.5},
            "metric_percentiles": [50, 99],
            "goodput": ["ttft:100", "tpot:20"],
            "ignore_eos": True,
            "fail_fast": False,
            "seed": None,
        }
    )
    given = {
        "--base-url",
        "--max-concurrency",
        "--request-rate",
        "--header",
        "--extra-body",
        "--metric-percentiles",
        "--goodput",
        "--ignore-eos",
        "--fail-fast",
    }
    assert config.given == given
    assert config.max_concurrency == 8 and config.request_rate == float("inf")
    assert config.headers == build_config({"headers": ["X-A=1", "X-B=2"]}).headers
    assert config.extra_body == {"temperature": 0.5}
    assert config.percentiles() == [50.0, 99.0]
    assert config.ignore_eos is True and config.fail_fast is False
    assert config.request_id_prefix.startswith("bench-")
