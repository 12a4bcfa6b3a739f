"""--duration's values, and the rules that span --duration, --duration-grace-s, --warmup-s and
--cooldown-s (one line naming the culprit)."""

from __future__ import annotations

import pytest
from helpers import config_given, refusal

from loadgen.config import ConfigError
from loadgen.config.parsers import parse_duration


@pytest.mark.parametrize(
    ("typed", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0), ("1.5m", 90.0), (" 2S ", 2.0),
     ("0.25", 0.25)],
)  # fmt: skip
def test_durations_read_as_seconds(typed: str, seconds: float) -> None:
    assert parse_duration(typed) == seconds


def test_a_duration_built_in_python_is_seconds_already() -> None:
    assert parse_duration(None) is None
    assert parse_duration(12) == 12.0


@pytest.mark.parametrize("typed", ["", "s", "abc", "5x", "5ms", "1d", "0", "-3s", "inf", "nan"])
def test_what_is_no_duration_is_refused_naming_the_value(typed: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(typed)


def test_the_cli_refuses_a_bad_duration_in_one_line() -> None:
    proc = refusal("--duration", "5x", "--mock")
    assert proc.returncode == 2
    assert "--duration" in proc.stderr and "'5x' is not a duration" in proc.stderr


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"duration_grace_s": 5.0}, "--duration-grace-s is for a --duration run"),
        ({"duration": 10.0, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1,
          "ramp_up_end_rps": 5}, "--ramp-up-strategy ramps the rate over --num-prompts"),
        ({"duration": 10.0, "warmup_s": 6.0, "cooldown_s": 4.0},
         "--warmup-s 6 and --cooldown-s 4 leave no steady window in --duration 10 s"),
    ],
)  # fmt: skip
def test_flags_that_cannot_go_together_are_refused(fields: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        config_given(**fields).validate()


def test_a_duration_with_a_window_inside_it_is_valid() -> None:
    config_given(duration=10.0, warmup_s=2.0, cooldown_s=2.0, duration_grace_s=1.0).validate()
