"""Spawn worker processes that never import the caller's main module.

multiprocessing's spawn start method re-runs the parent's ``__main__`` in every child (by path,
or by module name under ``python -m``) so that functions defined there can be unpickled. A
worker's target is ``workers.worker.run_worker`` and its arguments are plain values, so it
needs nothing from ``__main__``; re-running it is what broke ``loadgen.run()`` from a script
without a ``__main__`` guard (the child started the benchmark again and died) and from stdin
(the child looked for a file named ``<stdin>``), and it made every CLI worker import the
``loadgen`` console script and with it the whole CLI.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.process import BaseProcess

_SPAWNING = threading.Lock()  # one swap of __main__ at a time


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a child is spawned, ``__main__`` is an empty module: no ``__file__`` and no
    ``__spec__``, so the spawn preparation data names no main module to re-run."""
    with _SPAWNING:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def start_without_main(processes: Sequence[BaseProcess]) -> None:
    """Start spawn-context ``processes`` whose children skip the caller's main module.

    ``Process.start`` pickles the preparation data synchronously, so the swap lasts only as
    long as the starts (a few milliseconds per worker)."""
    with _main_module_hidden():
        for process in processes:
            process.start()
