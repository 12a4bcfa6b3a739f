"""RunConfig's sections (loadgen/config/sections/): the fields each declares, the one-run views
of the campaign flags, and what a frozen config allows. Pure: no server, no CLI."""

from __future__ import annotations

import dataclasses

import pytest

from loadgen.config import RUN_FLAGS, ConfigError, RunConfig
from loadgen.config.flags import in_help_order
from loadgen.config.sections import SECTIONS, Report, Traffic
from loadgen.config.sections.traffic import RampUp
from loadgen.datasets.sampled_prompts import texts_of


def test_a_config_is_each_of_its_sections_and_each_field_is_declared_in_one() -> None:
    config = RunConfig()
    assert all(isinstance(config, section) for section in SECTIONS)
    owners: dict[str, str] = {}
    for section in SECTIONS:
        for field in dataclasses.fields(section):
            assert field.name not in owners, (field.name, owners.get(field.name))
            owners[field.name] = section.__name__
    assert owners["request_rate"] == "Traffic" and owners["metric_percentiles"] == "Report"


def test_a_section_alone_is_a_config_of_its_own_flags() -> None:
    report = Report(metric_percentiles="50,90")
    assert report.percentiles() == [50.0, 90.0]
    assert Traffic(request_rate=4.0).rate == 4.0


@pytest.mark.parametrize(
    ("changes", "rate", "concurrency"),
    [({}, float("inf"), None), ({"request_rate": 2.0, "max_concurrency": 8}, 2.0, 8)],
)
def test_rate_and_concurrency_are_one_runs(changes, rate, concurrency) -> None:
    config = RunConfig(**changes)
    assert (config.rate, config.concurrency) == (rate, concurrency)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"request_rate": (1.0, 2.0)}, "--request-rate is a list"),
        ({"max_concurrency": (1, 4)}, "--max-concurrency is a list"),
    ],
)
def test_a_campaigns_list_has_no_one_run_value(changes, words) -> None:
    config = RunConfig(**changes)
    with pytest.raises(TypeError, match=words):
        _ = config.rate if "request_rate" in changes else config.concurrency


def test_ramp_up_is_the_strategy_with_both_rates_or_none() -> None:
    assert RunConfig().ramp_up is None
    ramp = RunConfig(ramp_up_strategy="linear", ramp_up_start_rps=1, ramp_up_end_rps=9).ramp_up
    assert ramp == RampUp("linear", 1, 9)
    half = RunConfig(ramp_up_strategy="linear", ramp_up_start_rps=1)
    with pytest.raises(ConfigError, match="both --ramp-up-start-rps and --ramp-up-end-rps"):
        _ = half.ramp_up
    with pytest.raises(ConfigError, match="both --ramp-up-start-rps and --ramp-up-end-rps"):
        half.validate()


def test_a_ramp_up_beside_a_rate_list_is_refused_as_a_rate_given() -> None:
    config = RunConfig(
        ramp_up_strategy="linear",
        ramp_up_start_rps=1,
        ramp_up_end_rps=9,
        request_rate=(1.0, 2.0),
    )
    with pytest.raises(ConfigError, match="When using ramp-up, do not specify --request-rate"):
        config.validate()


def test_replace_runs_the_shorthand_copies_again() -> None:
    config = RunConfig(output_len=9)
    other = dataclasses.replace(config, output_len=5)
    assert (config.random_output_len, other.random_output_len) == (9, 5)


def test_texts_of_narrows_prompts_to_texts_or_refuses() -> None:
    assert texts_of(["a", "b"]) == ["a", "b"]
    with pytest.raises(TypeError, match="not all texts"):
        texts_of(["a", [1, 2]])


def test_the_help_order_names_every_flag_once() -> None:
    flags = list(RUN_FLAGS)
    with pytest.raises(ValueError, match=r"lists no field's \['--repetition-penalty'\]"):
        in_help_order(flags[:-1])
    with pytest.raises(ValueError, match="declared twice"):
        in_help_order([*flags, flags[0]])
    assert in_help_order(flags[::-1]) == RUN_FLAGS


@pytest.mark.parametrize(
    ("backend", "endpoint"),
    [
        ("openai", "/v1/completions"),
        ("openai-chat", "/v1/chat/completions"),
        ("openai-embeddings", "/v1/embeddings"),
        ("vllm-pooling", "/pooling"),
    ],
)
def test_without_endpoint_a_backend_takes_its_own(backend: str, endpoint: str) -> None:
    assert RunConfig(backend=backend).endpoint == endpoint
    given = RunConfig(backend=backend, endpoint="/v2/x", given=frozenset({"--endpoint"}))
    assert given.endpoint == "/v2/x"  # a given --endpoint is used as given
    again = dataclasses.replace(RunConfig(backend=backend), label="x")
    assert again.endpoint == endpoint
