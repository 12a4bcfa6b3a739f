"""Where a run ran: the loadgen and Python versions, the platform and the CPUs, as the result
JSON records them (``loadgen.environment``)."""

from __future__ import annotations

import os
import platform
from typing import Any


def environment(loadgen_version: str) -> dict[str, Any]:
    """The environment of this process, as plain JSON values."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return {
        "loadgen_version": loadgen_version,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpus_available": available,
    }
