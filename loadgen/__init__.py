"""loadgen coordinator: CLI, configuration, datasets, schedule, fan-out and reports.

``loadgen.run(...)`` is the Python API (loadgen/api.py, docs/api.md), imported on first use so
that ``import loadgen`` and the mock server stay light. A run's lifecycle is the package
``loadgen.session``, its worker processes ``loadgen.fleet``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadgen.api import Result

__version__ = "0.1.0"

API = ("BenchmarkError", "MockServer", "Result", "read_records")
__all__ = ["__version__", "run", *API]


def run(**options: Any) -> Result:
    """Run a benchmark; keyword arguments are `loadgen run`'s flags, underscored (docs/api.md).
    ValueError for a bad one; loadgen.BenchmarkError when the run fails."""
    from loadgen import api

    return api.run(**options)


def __getattr__(name: str) -> Any:
    if name in API:
        from loadgen import api

        return getattr(api, name)
    raise AttributeError(f"module 'loadgen' has no attribute '{name}'")
