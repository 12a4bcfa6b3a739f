"""The two ways a run's inputs can be wrong: a flag's value, or an input the flags name."""

from __future__ import annotations


class ConfigError(ValueError):
    """A flag value that cannot be used; the message names the flag."""


class InputError(Exception):
    """An input the run cannot use (a dataset file's contents, the endpoint for the backend);
    the message names it. The CLI prints it as one line and exits 1."""
