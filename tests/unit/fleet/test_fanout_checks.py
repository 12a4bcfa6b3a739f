"""What the coordinator checks of the worker channel besides the codec: the channel lives in a
directory only this user can enter (the records a worker may report: test_forged_records.py)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from loadgen.fleet.channel_dir import OWNER_FILE, private_directory


def test_the_channel_directory_is_private():
    path = private_directory()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        assert len(f"{path}/coordinator") < 100
    finally:
        shutil.rmtree(path)


def test_a_run_directory_whose_coordinator_died_is_removed_by_the_next_run(monkeypatch):
    # A short temporary directory: private_directory() uses it only under 64 characters (an
    # ipc:// path's limit), which pytest-xdist's tmp_path (.../popen-gw0/test_...) is not.
    tmp_path = Path(tempfile.mkdtemp(prefix="lg", dir="/tmp"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    # A pid no process has (pids stay below pid_max): a coordinator killed by SIGKILL.
    gone = int(Path("/proc/sys/kernel/pid_max").read_text())
    abandoned, live, other = (
        tmp_path / "loadgen-abc",
        tmp_path / "loadgen-def",
        tmp_path / "loadgen-x",
    )
    try:
        for path, pid in ((abandoned, gone), (live, os.getpid())):
            path.mkdir()
            (path / OWNER_FILE).write_text(str(pid))
            (path / "channel").touch()
        other.mkdir()  # not a run directory (no owner file): never touched
        mine = private_directory()
        assert not abandoned.exists()
        assert live.exists() and other.exists()
        assert (tmp_path / mine).parent == tmp_path
        assert (Path(mine) / OWNER_FILE).read_text() == str(os.getpid())
    finally:
        shutil.rmtree(tmp_path)
