"""`Flag`: one command-line option, and ``flag()``, which declares a config dataclass's field by
its option. A module of its own, with no imports from loadgen, as both configs use it and the
mock server (loadgen/mock/) should not load the run's configuration.

A config field is declared once, in its class's body, its option in the field's metadata::

    port: int = flag("--port", int, 8000)

``flags_of`` reads the options back (``RUN_FLAGS`` in loadgen/config/flags.py for `loadgen run`,
``MOCK_FLAGS`` in loadgen/mock/config.py for `loadgen mock-server`): the click options
(loadgen/cli/options.py), the ``--help`` sections, the "has no effect" warnings (``readers``) and
docs/compat.md's flag table (checked by a test) all come from them. No click here: only
``loadgen.cli`` imports click.
"""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Callable, Iterable
from typing import Any, Literal, ParamSpec

P = ParamSpec("P")


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
    # The typed value -> the field's (ValueError: refused); the field's type is what it returns.
    parse: Callable[[Any], Any] | None = None
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
        """The config field's type the flag implies when it has no ``parse`` (which sets it)."""
        kind: Any = types.GenericAlias(tuple, (self.type, ...)) if self.multiple else self.type
        unset = self.default is None and self.default_factory is None
        return kind | None if unset else kind

    def dataclass_field(self) -> Any:
        """The config field (``dataclasses.field``): its default is the command line's, parsed
        as a given value would be; the flag is in its metadata. Any: a field's declared type is
        its default's, as typeshed types ``dataclasses.field``."""
        meta = {"flag": self}
        if self.default_factory is not None:
            return dataclasses.field(default_factory=self.default_factory, metadata=meta)
        value = self.parse(self.default) if self.parse is not None else self.default
        if isinstance(value, dict | list | set):  # mutable: a fresh one per config
            parse, default = self.parse, self.default
            fresh: Callable[[], Any] = (
                (lambda: parse(default)) if parse is not None else (lambda: copy.deepcopy(default))
            )
            return dataclasses.field(default_factory=fresh, metadata=meta)
        return dataclasses.field(default=value, metadata=meta)


def _range_words(minimum: float | None, maximum: float | None, min_open: bool) -> str:
    """The refusal of a value outside a range that has no words of its own."""
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if min_open else '>='} {minimum:g}")
    if maximum is not None:
        bounds.append(f"<= {maximum:g}")
    return "{name} must be " + " and ".join(bounds) + ", got {value}"


def _field_of(make: Callable[P, Flag]) -> Callable[P, Any]:
    """A function of ``make``'s arguments that returns the field of the flag it makes."""

    def declare(*args: P.args, **kwargs: P.kwargs) -> Any:
        return make(*args, **kwargs).dataclass_field()

    return declare


# A config dataclass's field declared by its option, with Flag's arguments (so a type checker
# checks them): ``port: int = flag("--port", int, 8000)``.
flag = _field_of(Flag)


def flags_of(cls: type) -> tuple[Flag, ...]:
    """The options of a config dataclass's fields, in field order (fields declared without
    ``flag`` have none). A flag names its field: a field whose flag names another is refused."""
    flags = []
    for field in dataclasses.fields(cls):
        option = field.metadata.get("flag")
        if option is None:
            continue
        if option.field != field.name:
            raise ValueError(
                f"{cls.__name__}.{field.name}: {option.name} is the flag of {option.field}; "
                f"give it field={field.name!r}"
            )
        flags.append(option)
    return tuple(flags)


def by_name(flags: Iterable[Flag]) -> dict[str, Flag]:
    """Each flag under each of its dash spellings."""
    return {spelling: flag for flag in flags for spelling in flag.names}
