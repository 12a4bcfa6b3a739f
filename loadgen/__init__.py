"""loadgen coordinator: CLI, configuration, datasets, schedule, fan-out and reports.

``loadgen.run(...)`` is the Python API (loadgen/api.py, docs/api.md), imported on first use so
that ``import loadgen`` and the mock server stay light.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

import loadgen.run as _run_package  # its __init__ imports nothing

if TYPE_CHECKING:
    from loadgen.api import Result

__version__ = "0.1.0"

API = ("BenchmarkError", "MockServer", "Result", "read_records")
__all__ = ["__version__", "run", *API]


class RunEntry:
    """``loadgen.run``: called, the Python API's run; read, the package loadgen/run/.

    The name is both: ``loadgen.run(base_url=...)`` is what the API promises, and loadgen/run/ is
    the package that runs a benchmark. A plain function would hide the package from
    ``loadgen.run.runner`` and ``import loadgen.run.runner as runner``; its attributes are the
    package's, so both go on working.
    """

    def __init__(self, package: ModuleType) -> None:
        self._package = package

    def __call__(self, **options: Any) -> Result:
        """Run a benchmark; keyword arguments are `loadgen run`'s flags, underscored
        (docs/api.md). ValueError for a bad one; loadgen.BenchmarkError when the run fails."""
        from loadgen import api

        return api.run(**options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._package, name)

    def __repr__(self) -> str:
        return "<loadgen.run: the Python API's run (docs/api.md); the package loadgen/run/>"


run = RunEntry(_run_package)


def __getattr__(name: str) -> Any:
    if name in API:
        from loadgen import api

        return getattr(api, name)
    raise AttributeError(f"module 'loadgen' has no attribute '{name}'")
