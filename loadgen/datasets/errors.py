"""The two ways a dataset cannot be built: a flag's value is at fault, or the file's contents."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class FlagError(ValueError):
    """A dataset flag's value cannot be used; the message names the flag."""


@contextmanager
def flag_errors() -> Iterator[None]:
    """Raise the ValueErrors of the block as FlagErrors (its checks name the flag at fault)."""
    try:
        yield
    except ValueError as exc:
        raise FlagError(str(exc)) from None


@contextmanager
def file_errors(path: str) -> Iterator[None]:
    """Prefix the ValueErrors of the block with ``--dataset-path path`` (the file is at fault)."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"--dataset-path {path}: {exc}") from None
