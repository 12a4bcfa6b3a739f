"""Giving the C heap's freed pages back to the system during a long run.

A ``--duration`` run draws a block of prompts every few seconds: tokenizer, JSON and numpy
buffers of every size come and go, and glibc's malloc keeps the pages they freed in its heap
(it returns only the top of each arena), so the coordinator's RSS crept up with the run's
length although what it held did not (``scripts/bench/soak_memory.py``: +0.9 KB per request,
the heap's free bytes growing while its bytes in use stayed level). ``release_freed_heap``
asks glibc (``malloc_trim(0)``) to give every whole free page back; elsewhere (musl, macOS)
it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_heap() -> bool:
    """Give the C heap's free pages back to the system; True if any were (glibc only)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
