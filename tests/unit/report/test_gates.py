"""--fail-on: a condition's parsing, the lookup of nested keys, the verdict on a result, and
which keys a run's result will hold (from the real report over a sample run; no socket)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from loadgen.config import RunConfig
from loadgen.config.gates import Gate, format_number, parse_fail_on, parse_gate
from loadgen.report.gate_keys import gate_problem, sample_result
from loadgen.report.gates import MISSING, as_number, breaches, lookup, numeric_keys
from loadgen.report.settings import settings_of

RESULT = {
    "completed": 98,
    "failed": 2,
    "request_rate": "inf",
    "p99_ttft_ms": 612.3456,
    "p99.9_ttft_ms": 700.0,
    "request_goodput": None,
    "label": "nightly",
    "interrupted_flag": True,
    "loadgen": {"send_lag_ms": {"p99": 0.8}, "workers": 2, "verdict": "OK: ..."},
}


@pytest.mark.parametrize(
    ("text", "gate"),
    [
        ("p99_ttft_ms>500", Gate("p99_ttft_ms", ">", 500.0)),
        (" failed > 0 ", Gate("failed", ">", 0.0)),
        ("completed>=1e3", Gate("completed", ">=", 1000.0)),
        ("loadgen.send_lag_ms.p99<=2.5", Gate("loadgen.send_lag_ms.p99", "<=", 2.5)),
        ("p99.9_ttft_ms<-1", Gate("p99.9_ttft_ms", "<", -1.0)),
        ("failed==0", Gate("failed", "==", 0.0)),
        ("failed!=0", Gate("failed", "!=", 0.0)),
        ("request_rate<inf", Gate("request_rate", "<", math.inf)),
    ],
)
def test_a_condition_is_key_operator_number(text: str, gate: Gate) -> None:
    assert parse_gate(text) == gate


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("p99_ttft_ms", "is not a condition"),
        ("p99_ttft_ms=>500", "is not a condition"),
        ("p99_ttft_ms=500", "is not a condition"),
        (">500", "is not a condition"),
        ("p99_ttft_ms>", "is not a condition"),
        ("p99 ttft>5", "is not a condition"),
        ("p99_ttft_ms>fast", "'fast' is not a number"),
        ("p99_ttft_ms>nan", "cannot be nan"),
    ],
)
def test_a_malformed_condition_is_one_line_naming_it(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_gate(text)
    message = str(caught.value)
    assert says in message and repr(text) in message and "\n" not in message


def test_the_flag_keeps_conditions_as_written_and_refuses_a_bad_one() -> None:
    assert parse_fail_on((" failed>0", "p99_ttft_ms>500")) == ("failed>0", "p99_ttft_ms>500")
    with pytest.raises(ValueError, match="'oops'"):
        parse_fail_on(("failed>0", "oops"))


def test_lookup_goes_into_nested_objects_and_prefers_a_whole_dotted_key() -> None:
    assert lookup(RESULT, "loadgen.send_lag_ms.p99") == 0.8
    assert lookup(RESULT, "p99.9_ttft_ms") == 700.0
    assert lookup(RESULT, "loadgen.send_lag_ms") == {"p99": 0.8}
    assert lookup(RESULT, "loadgen.nope") is MISSING
    assert lookup(RESULT, "failed.more") is MISSING


def test_numbers_are_ints_floats_and_the_inf_rate_only() -> None:
    assert [as_number(v) for v in (3, 2.5, "inf", None, True, "7", [1])] == [
        3.0, 2.5, math.inf, None, None, None, None,
    ]  # fmt: skip
    keys = set(numeric_keys(RESULT))
    assert {"completed", "request_rate", "p99.9_ttft_ms", "loadgen.send_lag_ms.p99"} <= keys
    assert not {"label", "request_goodput", "interrupted_flag", "loadgen.verdict"} & keys


def test_a_condition_that_is_true_is_a_breach_with_its_measured_value() -> None:
    lines = breaches(
        ["p99_ttft_ms>500", "failed>0", "completed<90", "loadgen.send_lag_ms.p99>=0.8"], RESULT
    )
    assert lines == [
        "breached: p99_ttft_ms>500 (measured 612.346)",
        "breached: failed>0 (measured 2)",
        "breached: loadgen.send_lag_ms.p99>=0.8 (measured 0.8)",
    ]
    assert breaches(["failed>2", "p99_ttft_ms>=612.35", "request_rate<inf"], RESULT) == []


def test_a_gate_with_no_value_to_check_is_breached() -> None:
    assert breaches(["request_goodput<1", "loadgen.gone>1"], RESULT) == [
        "breached: request_goodput<1 (no value: request_goodput is null)",
        "breached: loadgen.gone>1 (no value: loadgen.gone is not in this result)",
    ]


def test_numbers_read_as_a_person_writes_them() -> None:
    assert [format_number(v) for v in (500.0, 3, 612.3456, 0.00042, math.inf)] == [
        "500", "3", "612.346", "0.00042", "inf",
    ]  # fmt: skip


def config(**changes: object) -> RunConfig:
    return dataclasses.replace(RunConfig(workers=1), **changes)


def sample(cfg: RunConfig) -> dict[str, object]:
    """The sample result of a run with ``cfg``, as the run's check builds it."""
    return sample_result(settings_of(cfg), dataclasses.asdict(cfg))


def problem(cfg: RunConfig) -> str | None:
    """The run's check of its --fail-on keys."""
    return gate_problem(settings_of(cfg), dataclasses.asdict(cfg))


def test_the_sample_result_holds_the_keys_a_run_of_that_configuration_writes() -> None:
    keys = set(numeric_keys(sample(config())))
    assert {"completed", "failed", "p99_ttft_ms", "mean_itl_ms", "output_throughput"} <= keys
    assert {"loadgen.send_lag_ms.p99", "loadgen.client.host.idle_pct"} <= keys
    assert {"loadgen.environment.cpu_count", "spec_decode_acceptance_rate"} <= keys
    assert "loadgen.dataset.random_input_len" in keys  # the stored configuration's dataset
    assert "p50_ttft_ms" not in keys and "mean_e2el_ms" not in keys
    chosen = config(metric_percentiles="50,99.9", percentile_metrics="ttft,e2el")
    keys = set(numeric_keys(sample(chosen)))
    assert {"p50_ttft_ms", "p99.9_e2el_ms"} <= keys and "p99_ttft_ms" not in keys
    paced = set(numeric_keys(sample(config(request_rate=10.0, probe_request_rate=1.0))))
    assert {"loadgen.from_intended.ttft.p99_ms", "probe_p99_e2el_ms"} <= paced


def test_known_keys_pass_the_check() -> None:
    gates = ("p99_ttft_ms>500", "failed>0", "loadgen.send_lag_ms.p99>5", "request_rate<1")
    assert problem(config(fail_on=gates)) is None
    assert problem(config(fail_on=("request_goodput<5",), goodput={"ttft": 100.0})) is None


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"fail_on": ("p99_tfft_ms>5",)}, "no key p99_tfft_ms in this run's result JSON"),
        ({"fail_on": ("p50_ttft_ms>5",)}, "--metric-percentiles choose the pNN_METRIC_ms"),
        ({"fail_on": ("backend>1",)}, "backend is not a number"),
        ({"fail_on": ("loadgen.send_lag_ms>1",)}, "loadgen.send_lag_ms is not a number"),
        ({"fail_on": ("request_goodput<1",)}, "request_goodput has no value (null)"),
        ({"fail_on": ("loadgen.from_intended.ttft.p99_ms>1",)}, "no key loadgen.from_intended"),
    ],
)
def test_a_key_the_result_will_not_hold_as_a_number_is_refused(
    changes: dict[str, object], says: str
) -> None:
    line = problem(config(**changes))
    assert line is not None and says in line and "\n" not in line
