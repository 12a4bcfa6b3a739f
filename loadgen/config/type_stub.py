"""The type stubs that let a type checker see `RunConfig`'s and `MockConfig`'s fields, written
from the flag tables.

``RunConfig`` is made by ``dataclasses.make_dataclass`` over ``RUN_FLAGS`` (run_config.py), so
mypy cannot see one of its fields: every ``config.num_prompts`` is an error and every value read
from it is ``Any``. Until it is a dataclass declared in source (issue 28, point 2), stubs beside
the modules say what the tables say:

- ``run_config.pyi``: ``RunConfig`` as the dataclass it is, a field per flag and ``given``;
- ``fields.pyi``: the same fields as plain attributes of ``RunConfigFields`` (fields.py, an
  empty class at run time), the base of ``RunConfigBase`` (base.py), so that its methods and
  ``Validated``'s read them too;
- ``loadgen/mock/config.pyi``: ``MOCK_FLAGS`` and ``MockConfig``, made the same way.

They are generated, never edited: ``python -m loadgen.config.type_stub`` rewrites them and
tests/unit/test_config_type_stub.py checks that they match the tables.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
GENERATED = "# Generated from the flag table by `python -m loadgen.config.type_stub`: do not edit."


def type_source(annotation: Any, imports: set[str]) -> str:
    """``annotation`` (a field's type, as ``Flag.annotation`` builds it) as source text; the
    modules it needs are added to ``imports``."""
    if annotation is None or annotation is type(None):
        return "None"
    if annotation is Any:
        imports.add("typing")
        return "typing.Any"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is types.UnionType or origin is typing.Union:
        return " | ".join(type_source(arg, imports) for arg in args)
    if origin is not None:
        inner = ", ".join("..." if arg is Ellipsis else type_source(arg, imports) for arg in args)
        return f"{type_source(origin, imports)}[{inner}]"
    if isinstance(annotation, type):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        imports.add(annotation.__module__)
        return f"{annotation.__module__}.{annotation.__qualname__}"
    raise TypeError(f"no source for the annotation {annotation!r}")


def _source(config_class: type, imports: set[str]) -> list[tuple[str, str]]:
    """A config dataclass's fields in order: (name, type as source)."""
    return [
        (field.name, type_source(field.type, imports)) for field in dataclasses.fields(config_class)
    ]


def stubs() -> dict[Path, str]:
    """The stubs' paths and texts."""
    from loadgen.config.run_config import RunConfig
    from loadgen.mock.config import MockConfig

    imports: set[str] = set()
    run_fields = _source(RunConfig, imports)
    run_head = "".join(f"import {module}\n" for module in sorted(imports))
    imports = set()
    mock_fields = _source(MockConfig, imports)
    mock_head = "".join(f"import {module}\n" for module in sorted(imports))
    return {
        HERE / "fields.pyi": f'''{GENERATED}
"""RunConfig's fields as plain attributes (fields.py): RunConfigBase's base."""

{run_head}
class RunConfigFields:
{_lines(run_fields, "")}
''',
        HERE / "run_config.pyi": f'''{GENERATED}
"""RunConfig as the dataclass that run_config.py makes from RUN_FLAGS."""

import dataclasses
{run_head}
from loadgen.config.validation import Validated

@dataclasses.dataclass
class RunConfig(Validated):
{_lines(run_fields, " = ...")}
''',
        HERE.parent / "mock" / "config.pyi": f'''{GENERATED}
"""MOCK_FLAGS, and MockConfig as the dataclass that config.py makes from it."""

import dataclasses
{mock_head}
from loadgen.flag import Flag

MOCK_FLAGS: tuple[Flag, ...]

@dataclasses.dataclass
class MockConfig:
{_lines(mock_fields, " = ...")}
''',
    }


def _lines(fields: list[tuple[str, str]], default: str) -> str:
    return "\n".join(f"    {name}: {source}{default}" for name, source in fields)


def main() -> None:
    """Rewrite the stubs."""
    for path, text in stubs().items():
        path.write_text(text)
        sys.stderr.write(f"wrote {path}\n")


if __name__ == "__main__":
    main()
