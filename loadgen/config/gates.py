"""``--fail-on KEY OP NUMBER``: an SLO gate on one numeric key of the result JSON, written as
the failure it guards against (``p99_ttft_ms>500`` fails a run whose p99 TTFT is over 500 ms).

Only the condition's shape is checked here (at the command line); whether the key is one the
run's result will hold is loadgen/report/gate_keys.py's question, and the verdict on a result
loadgen/report/gates.py's.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
# Longest operators first, so "p99_ttft_ms>=5" is ">=" and not ">" with "=5".
_CONDITION = re.compile(
    r"^\s*(?P<key>[^<>=!\s]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<threshold>[^<>=!\s]+)\s*$"
)
SHAPE = "KEY OP NUMBER, OP one of > >= < <= == != (e.g. 'p99_ttft_ms>500')"


@dataclass(frozen=True)
class Gate:
    """One failure condition: ``key op threshold``; ``key`` may name a nested key with dots
    (``loadgen.send_lag_ms.p99``)."""

    key: str
    op: str
    threshold: float

    def met_by(self, value: float) -> bool:
        """Whether ``value`` meets the condition (and so fails the run)."""
        return OPERATORS[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.key}{self.op}{format_number(self.threshold)}"


def parse_gate(text: str) -> Gate:
    """One ``--fail-on`` condition; ValueError naming it when it is not KEY OP NUMBER."""
    match = _CONDITION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a condition: use {SHAPE}")
    try:
        threshold = float(match["threshold"])
    except ValueError:
        raise ValueError(f"{text!r}: {match['threshold']!r} is not a number") from None
    if math.isnan(threshold):
        raise ValueError(f"{text!r}: the threshold cannot be nan")
    return Gate(match["key"], match["op"], threshold)


def parse_fail_on(items: tuple[str, ...]) -> tuple[str, ...]:
    """``--fail-on ...``: each condition checked, kept as written (the config holds plain
    strings so the records file can store it)."""
    for item in items:
        parse_gate(item)
    return tuple(item.strip() for item in items)


def parse_slo(items: tuple[str, ...]) -> tuple[str, ...]:
    """``--slo 'p99_ttft_ms<=500,p99_itl_ms<=50'``: conditions a point must meet, in
    ``--fail-on``'s grammar (each checked by ``parse_gate``), comma-separated or repeated; kept
    as written, one per item."""
    conditions = tuple(part.strip() for item in items for part in item.split(",") if part.strip())
    for condition in conditions:
        parse_gate(condition)
    return conditions


def format_number(value: float) -> str:
    """A measured value or threshold as a person reads it: integers whole, others to three
    decimals (six significant digits below 1)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if math.isfinite(value) and abs(value) < 1:
        return f"{value:.6g}"
    return f"{value:.3f}"
