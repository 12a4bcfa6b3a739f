"""The type stubs of the configs made from flag tables (loadgen/config/type_stub.py) match the
tables: a flag added, removed or retyped without `python -m loadgen.config.type_stub` fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.config.type_stub import stubs, type_source


@pytest.mark.parametrize("path", list(stubs()), ids=lambda path: path.name)
def test_each_checked_in_stub_is_the_one_the_flag_table_gives(path: Path) -> None:
    assert path.read_text() == stubs()[path], f"{path} is stale: python -m loadgen.config.type_stub"


@pytest.mark.parametrize(
    ("annotation", "source", "imports"),
    [
        (int, "int", set()),
        (int | None, "int | None", set()),
        (tuple[str, ...], "tuple[str, ...]", set()),
        (int | tuple[int, ...] | None, "int | tuple[int, ...] | None", set()),
        (dict[str, Any] | None, "dict[str, typing.Any] | None", {"typing"}),
        (Path | None, "pathlib.Path | None", {"pathlib"}),
    ],
)
def test_a_field_type_is_written_as_source(annotation: Any, source: str, imports: set[str]) -> None:
    needed: set[str] = set()
    assert type_source(annotation, needed) == source
    assert needed == imports


def test_a_type_it_cannot_write_is_refused() -> None:
    with pytest.raises(TypeError, match="no source"):
        type_source("int", set())
