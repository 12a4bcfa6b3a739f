"""`Flag`: one command-line option, declared once, and the config dataclass built from a table
of them. A module of its own, with no imports from loadgen, as both tables use it and the mock
server (loadgen/mock/) should not load the run's configuration.

A table of flags (``RUN_FLAGS`` in loadgen/config/flags.py for `loadgen run`, ``MOCK_FLAGS`` in
loadgen/mock/config.py for `loadgen mock-server`) is the one place an option is declared: the
click options (loadgen/cli/options.py), the config dataclass's fields (``config_class``), the
``--help`` sections, the "has no effect" warnings (``readers``) and docs/compat.md's flag table
(checked by a test) all come from it. No click here: only ``loadgen.cli`` imports click.
"""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Callable, Iterable
from typing import Any, Literal


def flag_name(field_name: str) -> str:
    """The command-line flag of a field named after its flag: ``hf_output_len`` ->
    ``--hf-output-len``."""
    return "--" + field_name.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Flag:
    """One option: its names, value, default, help, and who reads it."""

    name: str  # "--max-concurrency"; the underscore alias (--max_concurrency) is derived
    # The value's type on the command line: str, int, float, pathlib.Path, or bool for a switch.
    type: type = str
    default: Any = None  # as typed on the command line, before `parse` (() when it repeats)
    help: str = ""
    group: str | None = None  # its --help section; None: the first, "Options"
    # The datasets (--dataset-name) and backends (--backend) that read it; given with another
    # one it warns "has no effect with ...". (): no such warning (read by all, or by a rule
    # of its own in validation.py).
    readers: tuple[str, ...] = ()
    field: str = ""  # the config field; "" for the name's (--max-concurrency: max_concurrency)
    value_type: Any = None  # the field's type, when `parse` changes it (--header: a dict)
    parse: Callable[[Any], Any] | None = None  # the typed value -> the field's; ValueError
    default_factory: Callable[[], Any] | None = None  # a default computed per config (--workers)
    choices: tuple[str, ...] = ()
    multiple: bool = False  # may be given several times; the value is a tuple
    nargs: Literal["*", "+"] | None = None  # upstream's: several values may follow one flag
    secondary: str | None = None  # a switch's "off" spelling: --no-self-timed
    short: str | None = None  # a one-letter spelling: -q
    metavar: str | None = None
    minimum: float | None = None  # a numeric range: click checks it, and RunConfig.validate()
    maximum: float | None = None
    min_open: bool = False  # the minimum itself is refused
    # Upstream's words for a value out of the range, with {name} and {value} (and {minimum}):
    # given, validate() alone checks the range, so the CLI and the Python API refuse it alike.
    range_words: str | None = None
    # A check of the value that has no range (ValueError: the refusal, in upstream's words),
    # run by RunConfig.validate() on a value given; click does not run it.
    check: Callable[[Any], Any] | None = None
    sets: tuple[str, ...] = ()  # other fields its value is copied into (--output-len)
    # Only changes what is reported, so `loadgen report` may take it again on saved records.
    reporting: bool = False

    def __post_init__(self) -> None:
        if not self.field:
            object.__setattr__(self, "field", self.name.removeprefix("--").replace("-", "_"))
        if self.nargs is not None and not self.multiple:
            raise ValueError(f"{self.name}: nargs needs multiple")

    @property
    def click_range(self) -> bool:
        """Whether click checks the flag's range (one without upstream's own words)."""
        has_range = self.minimum is not None or self.maximum is not None
        return has_range and self.range_words is None

    def range_problem(self, value: Any) -> str | None:
        """Why ``value`` (each value, for a list) is outside the flag's range, or None (also
        for None, the flag not given). NaN is outside every range."""
        if self.minimum is None and self.maximum is None:
            return None
        for item in value if isinstance(value, tuple) else (value,):
            if item is None or isinstance(item, bool):
                continue
            low = self.minimum is None or (
                item > self.minimum if self.min_open else item >= self.minimum
            )
            if low and (self.maximum is None or item <= self.maximum):
                continue
            words = self.range_words or _range_words(self.minimum, self.maximum, self.min_open)
            return words.format(name=self.name, value=item, minimum=self.minimum)
        return None

    def value_problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be used: outside the flag's range, or refused by its ``check``;
        None when it can."""
        if problem := self.range_problem(value):
            return problem
        if self.check is not None and value is not None:
            try:
                self.check(value)
            except ValueError as exc:
                return str(exc)
        return None

    @property
    def alias(self) -> str:
        """Upstream's underscore spelling, which loadgen also accepts: ``--max_concurrency``."""
        return "--" + self.name.removeprefix("--").replace("-", "_")

    @property
    def names(self) -> tuple[str, ...]:
        """Every dash spelling: the name, and a switch's "off" form."""
        return (self.name, self.secondary) if self.secondary else (self.name,)

    @property
    def is_switch(self) -> bool:
        """A boolean flag that takes no value."""
        return self.type is bool

    @property
    def show_default(self) -> bool:
        """Whether --help shows the default: a value that is there, not a switch's False."""
        return self.default is not None and not self.is_switch and not self.multiple

    @property
    def annotation(self) -> Any:
        """The config field's type."""
        if self.value_type is not None:
            return self.value_type
        kind: Any = types.GenericAlias(tuple, (self.type, ...)) if self.multiple else self.type
        unset = self.default is None and self.default_factory is None
        return kind | None if unset else kind

    def dataclass_field(self) -> tuple[str, Any, dataclasses.Field]:
        """The config field: (name, type, field) for ``dataclasses.make_dataclass``; its default
        is the command line's default, parsed as a given value would be."""
        meta = {"flag": self}
        if self.default_factory is not None:
            return (
                self.field,
                self.annotation,
                dataclasses.field(default_factory=self.default_factory, metadata=meta),
            )
        value = self.parse(self.default) if self.parse is not None else self.default
        if isinstance(value, dict | list | set):  # mutable: a fresh one per config
            parse, default = self.parse, self.default
            fresh: Callable[[], Any] = (
                (lambda: parse(default)) if parse is not None else (lambda: copy.deepcopy(default))
            )
            return (
                self.field,
                self.annotation,
                dataclasses.field(default_factory=fresh, metadata=meta),
            )
        return self.field, self.annotation, dataclasses.field(default=value, metadata=meta)


def _range_words(minimum: float | None, maximum: float | None, min_open: bool) -> str:
    """The refusal of a value outside a range that has no words of its own."""
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if min_open else '>='} {minimum:g}")
    if maximum is not None:
        bounds.append(f"<= {maximum:g}")
    return "{name} must be " + " and ".join(bounds) + ", got {value}"


def config_class(
    name: str,
    flags: Iterable[Flag],
    module: str,
    doc: str,
    bases: tuple[type, ...] = (),
    # (name, type, dataclasses.field(...)); Any: typeshed types field() as its default's type.
    extra: Iterable[tuple[str, Any, Any]] = (),
    namespace: dict[str, Any] | None = None,
) -> type:
    """A dataclass with one field per flag (in the table's order), then ``extra`` fields; the
    methods come from ``bases`` and ``namespace``."""
    fields = [flag.dataclass_field() for flag in flags]
    names = [field[0] for field in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"{name}: a field is declared twice")
    cls = dataclasses.make_dataclass(name, [*fields, *extra], bases=bases, namespace=namespace)
    cls.__module__ = module  # where it can be imported from (pickle, repr of the class)
    cls.__doc__ = doc
    return cls


def by_name(flags: Iterable[Flag]) -> dict[str, Flag]:
    """Each flag under each of its dash spellings."""
    return {spelling: flag for flag in flags for spelling in flag.names}
