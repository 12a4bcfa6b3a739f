"""Flags of a table (loadgen.flag.Flag) as click options, and what click says was given.

"Was this flag given?" is click's parameter source (the command line, or an environment
variable), never a comparison of its value with the default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from loadgen.flag import Flag, by_name

GIVEN_SOURCES = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def click_option(flag: Flag) -> click.Option:
    """The click option of ``flag``; its parameter name is the config field's."""
    spelling = f"{flag.name}/{flag.secondary}" if flag.secondary else flag.name
    kwargs: dict[str, Any] = {
        "default": flag.default,
        "help": flag.help or None,
        "show_default": flag.show_default,
        "multiple": flag.multiple,
        "metavar": flag.metavar,
    }
    if flag.is_switch:
        kwargs["is_flag"] = True
    else:
        kwargs["type"] = click_type(flag)
    if flag.parse is not None:
        kwargs["callback"] = _parse_with(flag.name, flag.parse)
    shorts = [flag.short] if flag.short else []
    return click.Option([spelling, *shorts, flag.field], **kwargs)


def click_type(flag: Flag) -> click.ParamType | type:
    """The click type of a flag's value: a choice, a range, a file path, or the plain type."""
    if flag.choices:
        return click.Choice(flag.choices)
    if flag.type is Path:
        return click.Path(dir_okay=False, path_type=Path)
    if flag.click_range:
        # The table's bounds are numbers; an int flag's are ints.
        ranged: Callable[..., click.ParamType] = (
            click.IntRange if flag.type is int else click.FloatRange
        )
        return ranged(flag.minimum, flag.maximum, min_open=flag.min_open)
    return flag.type


def _parse_with(
    name: str, parse_value: Callable[[Any], Any]
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback that parses the value as the table says (the flag ``name``'s
    ``parse``); a ValueError is a usage error naming the flag."""

    def parse(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            return parse_value(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param_hint=name) from None

    return parse


def given(ctx: click.Context, flags: Iterable[Flag]) -> frozenset[str]:
    """The names of the flags given (on the command line or by environment variable)."""
    return frozenset(
        flag.name for flag in flags if ctx.get_parameter_source(flag.field) in GIVEN_SOURCES
    )


def given_values(ctx: click.Context, flags: Iterable[Flag]) -> dict[str, Any]:
    """The parsed values of the options not left at their default, by config field; the config
    class supplies the others' defaults from the same table."""
    return {
        flag.field: ctx.params[flag.field]
        for flag in flags
        if ctx.get_parameter_source(flag.field) is not ParameterSource.DEFAULT
    }


def quiet_option(summary: str) -> click.Option:
    """``-q/--quiet`` as `run` declares it (``RunConfig.quiet``), for another command that
    prints a summary; ``summary``: what that command keeps with it, for its --help."""
    from loadgen.config import RUN_FLAGS

    quiet = by_name(RUN_FLAGS)["--quiet"]
    return click_option(
        dataclasses.replace(
            quiet,
            help=f"Print only {summary} (no notes or warnings); errors still go to stderr.",
        )
    )
