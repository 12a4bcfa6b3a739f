"""`loadgen run`'s flags given as Python keyword arguments (``max_concurrency=64``), read by
the CLI's own parser: the Python API (loadgen/api.py) gets the same values, checks and one-line
messages as the command line, raised as ValueError."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

import click

from loadgen.cli.options import given, given_values
from loadgen.cli.run import mock_flags_conflict, run_command
from loadgen.config import RUN_FLAGS, RunConfig
from loadgen.flag import Flag
from loadgen.records.redact import redact_text

# A keyword is the flag's name underscored (header=... for --header) or its config field's
# name (headers=...); they differ for --header alone.
FLAGS_BY_KEYWORD = {
    **{flag.field: flag for flag in RUN_FLAGS},
    **{flag.name.removeprefix("--").replace("-", "_"): flag for flag in RUN_FLAGS},
}


def build_config(options: dict[str, Any]) -> RunConfig:
    """The RunConfig the CLI would build from these flags (ValueError for a bad one)."""
    argv = [arg for name, value in options.items() for arg in _flag_args(name, value)]
    try:
        ctx = run_command.make_context("loadgen run", argv)
    except click.UsageError as exc:  # BadParameter too: the message names the flag
        raise ValueError(redact_text(exc.format_message())) from None
    flags_given = given(ctx, RUN_FLAGS)
    if conflict := mock_flags_conflict(bool(ctx.params["mock"]), flags_given):
        raise ValueError(conflict)
    config = RunConfig(**given_values(ctx, RUN_FLAGS), given=flags_given)
    if config.request_id_prefix is None:
        config = dataclasses.replace(config, request_id_prefix=f"bench-{uuid.uuid4().hex[:8]}-")
    return config


def _flag_args(name: str, value: Any) -> list[str]:
    """The command-line arguments of one keyword argument (none for None: the default)."""
    flag = FLAGS_BY_KEYWORD.get(name)
    if flag is None:
        raise ValueError(f"unknown argument '{name}': loadgen run has no {_spelling(name)}")
    if value is None:
        return []
    if flag.is_switch:
        return _switch_args(flag, value)
    if flag.multiple:
        values = value.items() if isinstance(value, dict) else value
        if isinstance(values, (str, bytes, Path)):
            values = [values]
        return [f"{flag.name}={_text(item)}" for item in values]
    return [f"{flag.name}={_text(value)}"]


def _switch_args(flag: Flag, value: Any) -> list[str]:
    """A switch: True gives it, False gives its "off" spelling (or nothing when off is the
    default)."""
    if not isinstance(value, bool):
        raise ValueError(f"{flag.name} is a switch: pass True or False, not {value!r}")
    if value:
        return [flag.name]
    if flag.secondary is not None:
        return [flag.secondary]
    return []  # a switch without an "off" spelling is off by default


def _text(value: Any) -> str:
    """A value as typed on the command line: a dict as JSON (--extra-body), a (key, value) pair
    as key=value (--header), a list as comma-separated (--metric-percentiles)."""
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, tuple) and len(value) == 2:
        return f"{value[0]}={value[1]}"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def _spelling(name: str) -> str:
    return "--" + name.replace("_", "-")
