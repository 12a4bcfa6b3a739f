"""Flag values as typed on the command line -> RunConfig field values.

Each parser takes what click hands over (a string, or a tuple for a flag that repeats) and
raises ValueError with upstream's message; the CLI shows it as a usage error naming the flag.
"""

from __future__ import annotations

from typing import Any

import orjson

GOODPUT_METRICS = ("ttft", "tpot", "e2el")


def check_tokenizer_mode(mode: str) -> None:
    """``--tokenizer-mode``: auto or hf (a tokenizer.json); upstream's other modes are refused."""
    if mode not in ("auto", "hf"):
        raise ValueError(f"not supported yet: --tokenizer-mode {mode}")


def parse_json_object(value: str | None) -> dict[str, Any] | None:
    """``--extra-body``, ``--chat-template-kwargs``: a JSON object, or None when not given."""
    if value is None:
        return None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError("must be a JSON object")
    return parsed


def parse_headers(items: tuple[str, ...]) -> dict[str, str]:
    """``--header KEY=VALUE ...``: the extra HTTP headers."""
    return _pairs(items, "invalid header format, use KEY=VALUE")


def parse_metadata(items: tuple[str, ...]) -> dict[str, str] | None:
    """``--metadata KEY=VALUE ...``: string fields of the result JSON (None when not given)."""
    return _pairs(items, "use KEY=VALUE") if items else None


def _pairs(items: tuple[str, ...], hint: str) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict, keys and values stripped; ValueError naming a bad one."""
    pairs = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"'{item}': {hint}")
        pairs[key.strip()] = value.strip()
    return pairs


def parse_listen(value: str | None) -> tuple[str, int] | None:
    """``--listen HOST:PORT`` (``[v6]:PORT`` for IPv6) as (host, port)."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"'{value}': give HOST:PORT, such as 0.0.0.0:5557 (port 0: any free one)")
    return host, int(port)


def parse_goodput(items: tuple[str, ...]) -> dict[str, float] | None:
    """Upstream's SLO pairs ``ttft:300 tpot:20`` (ms), with its messages."""
    if not items:
        return None
    slos: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        try:
            if not sep or ":" in value:
                raise ValueError
            slos[name] = float(value)
        except ValueError:
            raise ValueError(
                "Invalid format found for service level objectives. Specify service level "
                'objectives for goodput as "KEY:VALUE" pairs, where the key is a metric name, '
                "and the value is a number in milliseconds."
            ) from None
        if name not in GOODPUT_METRICS:
            raise ValueError(
                f"Invalid metric name found, {name}: {slos[name]}. The service level objective "
                f"name should be one of {list(GOODPUT_METRICS)}."
            )
        if slos[name] < 0:
            raise ValueError(
                f"Invalid value found, {name}: {slos[name]}. The service level objective value "
                "should be non-negative."
            )
    return slos


def parse_names(items: tuple[str, ...]) -> list[str] | None:
    """``--lora-modules A B ...``: the names as a list, None when not given."""
    return list(items) or None


def parse_itl_thresholds(value: str) -> tuple[float, float]:
    """``--timeline-itl-thresholds``: two comma-separated milliseconds, as seconds."""
    try:
        thresholds = [float(part.strip()) for part in value.split(",")]
    except ValueError as exc:
        raise ValueError(f"Invalid --timeline-itl-thresholds format: {exc}") from None
    if len(thresholds) != 2:
        raise ValueError(
            "Invalid --timeline-itl-thresholds format: "
            f"Expected 2 ITL threshold values, got {len(thresholds)}"
        )
    return thresholds[0] / 1000, thresholds[1] / 1000


def parse_comma_list(value: str | None) -> list[str] | None:
    """``--bfcl-categories a,b``: the non-blank names as a list, None when not given."""
    if value is None:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | float | None) -> float | None:
    """``--duration``: seconds, bare or with s, m or h (``90``, ``90s``, ``1.5m``, ``1h``) ->
    seconds, > 0 and finite; None when not given."""
    if value is None or isinstance(value, int | float):
        return None if value is None else _positive_seconds(float(value), str(value))
    text = value.strip().lower()
    scale = DURATION_UNITS.get(text[-1:], 0.0)
    number = text[:-1] if scale else text
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a duration: seconds, or a number with s, m or h (90, 90s, 5m, 1h)"
        ) from None
    return _positive_seconds(seconds, value)


def _positive_seconds(seconds: float, typed: str) -> float:
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{typed!r} is not a duration above 0 s")
    return seconds
