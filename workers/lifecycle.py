"""A worker process's life around its run: it dies with its coordinator and has the file
descriptors its connections need."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies
PARENT_CHECK_S = 0.5  # how often a waiting worker checks that the coordinator is alive
PARENT_GONE = 3  # exit code of a worker whose coordinator died


def die_with(parent_pid: int) -> None:
    """Exit when the coordinator dies, even by SIGKILL: Linux's parent-death signal, plus the
    parent checks while waiting for a message and during the run (PARENT_CHECK_S)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the signal was armed
        os._exit(PARENT_GONE)


def raise_open_file_limit() -> None:
    """The soft open-file limit raised to the hard one: each connection is a file descriptor,
    and the common soft limit of 1024 is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
