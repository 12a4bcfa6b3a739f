"""The values of ``--max-concurrency`` and ``--request-rate``: one, as upstream, or a comma list
that makes a campaign's grid (loadgen/session/campaign.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Value = TypeVar("Value", int, float)


def parse_concurrency(text: str | int | None) -> int | tuple[int, ...] | None:
    """``"8"`` -> 8, ``"1,4,16"`` -> (1, 4, 16); ValueError names the bad item."""
    return _one_or_list(text, _integer)


def parse_rate(text: str | float) -> float | tuple[float, ...]:
    """``"12.5"`` -> 12.5, ``"inf"`` -> inf, ``"1,2,inf"`` -> (1.0, 2.0, inf)."""
    parsed = _one_or_list(text, _number)
    assert parsed is not None
    return parsed


def _one_or_list(
    text: str | Value | None, item: Callable[[str], Value]
) -> Value | tuple[Value, ...] | None:
    if text is None or isinstance(text, int | float):
        return text  # already a value (a config built in Python)
    items = [part.strip() for part in text.split(",")]
    values = tuple(item(part) for part in items)
    if len(values) == 1:
        return values[0]
    for k, value in enumerate(values):
        if value in values[:k]:
            raise ValueError(f"{items[k]} is listed twice in {text!r}")
    return values


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer (a value, or a comma list: 1,4,16)") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (a value, or a comma list: 1,2,inf)") from None
