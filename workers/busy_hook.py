"""Test-only: a worker made busy on purpose, so the verdict's "workers saturated" can be provoked.

With ``LOADGEN_TEST_WORKER_SPIN_MS=N`` in its environment, a worker's event loop spends its run
in back-to-back slices of N ms of busy-waiting, as a worker given more streams than one core can
serve would. Nothing else reads the variable; unset, the hook costs one environment lookup per
run. tests/e2e/test_verdict_causes.py sets it.
"""

from __future__ import annotations

import asyncio
import os
from time import perf_counter_ns

SPIN_ENV = "LOADGEN_TEST_WORKER_SPIN_MS"


def start_spinning() -> asyncio.Task[None] | None:
    """The busy-waiting task when the variable asks for it (test-only), else None."""
    value = os.environ.get(SPIN_ENV)
    if not value:
        return None
    try:
        slice_ms = float(value)
    except ValueError:
        raise ValueError(f"{SPIN_ENV}={value!r} is not a number of milliseconds") from None
    return asyncio.get_running_loop().create_task(_spin(int(slice_ms * 1e6)))


async def _spin(slice_ns: int) -> None:
    while True:
        until = perf_counter_ns() + slice_ns
        while perf_counter_ns() < until:
            pass
        await asyncio.sleep(0)  # the loop serves its streams between slices, late
