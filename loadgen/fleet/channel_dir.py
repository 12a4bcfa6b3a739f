"""The private directory of a run's worker channel (its ipc:// socket): only this user can enter
it, and a run killed with SIGKILL leaves one behind that the next run removes."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

OWNER_FILE = "coordinator.pid"  # in a run directory: whose it is, so an abandoned one can go


def private_directory() -> str:
    """A fresh directory only this user can enter (mkdtemp makes it 0700), short enough for an
    ipc:// path (a Unix socket path holds at most 107 bytes)."""
    parent = tempfile.gettempdir()
    if len(parent) > 64:
        parent = "/tmp"
    remove_abandoned(parent)
    path = tempfile.mkdtemp(prefix="loadgen-", dir=parent)
    os.chmod(path, 0o700)
    Path(path, OWNER_FILE).write_text(str(os.getpid()))
    return path


def remove_abandoned(parent: str) -> None:
    """Remove this user's run directories whose coordinator no longer runs: a run removes its
    own, unless it was killed by SIGKILL (its workers die with it and clean nothing)."""
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if not entry.name.startswith("loadgen-"):
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != os.getuid() or entry.is_symlink():
                    continue
                pid = int(Path(entry.path, OWNER_FILE).read_text())
            except (OSError, ValueError):
                continue  # not a run directory (or not ours to judge)
            if not running(pid):
                shutil.rmtree(entry.path, ignore_errors=True)


def running(pid: int) -> bool:
    """Whether a process with ``pid`` exists (any user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process has that pid now
    return True
