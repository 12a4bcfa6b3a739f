"""``--fail-on``'s verdict on a result JSON: which failure conditions it meets, each with the
measured value. ``--fail-on 'p99_ttft_ms>500'`` is breached when p99 TTFT is above 500 ms.

A gate whose key holds no number in this result (null: a figure the run could not measure)
counts as breached: a CI gate that cannot be checked must not pass.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from typing import Any

from loadgen.config.gates import Gate, format_number, parse_gate
from loadgen.console import TO_STDERR

log = logging.getLogger(__name__)

GATE_EXIT_CODE = 3  # a run that measured what it should and breached a gate
MISSING = object()


def lookup(result: dict[str, Any], key: str) -> Any:
    """The value at ``key`` in ``result``, dots going into nested objects; a key that itself
    holds a dot ("p99.9_ttft_ms") is matched whole first. MISSING when there is none."""
    return _lookup(result, key.split("."))


def _lookup(node: Any, parts: list[str]) -> Any:
    if not isinstance(node, dict):
        return MISSING
    for split in range(len(parts), 0, -1):  # the longest key first
        name = ".".join(parts[:split])
        if name not in node:
            continue
        if split == len(parts):
            return node[name]
        found = _lookup(node[name], parts[split:])
        if found is not MISSING:
            return found
    return MISSING


def gate_key(condition: str) -> str:
    """The result JSON key a ``--fail-on`` condition reads (``p99_ttft_ms`` of
    ``p99_ttft_ms>500``)."""
    return parse_gate(condition).key


def as_number(value: Any) -> float | None:
    """A JSON value as a number: ints and floats, and upstream's "inf" request rate; None for
    anything else (null, text, lists, true/false)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if value == "inf":
        return math.inf
    return None


def numeric_keys(result: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every key of ``result`` (nested ones dotted) whose value is a number."""
    for name, value in result.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            yield from numeric_keys(value, f"{key}.")
        elif as_number(value) is not None:
            yield key


def breaches(conditions: Iterable[str], result: dict[str, Any]) -> list[str]:
    """One line per failure condition the result meets (or cannot be checked against), with
    the measured value."""
    lines = []
    for gate in map(parse_gate, conditions):
        found = lookup(result, gate.key)
        value = as_number(found)
        if found is MISSING:
            lines.append(f"breached: {gate} (no value: {gate.key} is not in this result)")
        elif value is None:
            lines.append(f"breached: {gate} (no value: {gate.key} is {_json(found)})")
        elif gate.met_by(value):
            lines.append(f"breached: {gate} (measured {format_number(value)})")
    return lines


def _json(value: Any) -> str:
    return "null" if value is None else repr(value)


def report_breaches(lines: list[str]) -> int:
    """Show the breached gates on stderr (loadgen/console.py: after everything already on
    stdout, so a log of both streams has them last, and -q does not hide them); the exit code:
    3 when any was breached, else 0."""
    for line in lines:
        log.warning(line, extra=TO_STDERR)
    return GATE_EXIT_CODE if lines else 0


__all__ = ["GATE_EXIT_CODE", "Gate", "as_number", "breaches", "lookup", "report_breaches"]
