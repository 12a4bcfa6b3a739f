"""What the coordinator checks of the worker channel besides the codec: each worker reports only
its own shard's requests, and the channel lives in a directory only this user can enter."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loadgen.run.channel_dir import OWNER_FILE, private_directory
from loadgen.run.fanout import _check_owned
from workers.protocol import ProtocolError

OWNER = np.array([0, 1, 0, 1, -1], dtype=np.int16)


def test_a_worker_reports_its_own_requests():
    _check_owned(np.array([0, 2]), OWNER, 0)
    _check_owned(np.array([], dtype=np.int64), OWNER, 1)


@pytest.mark.parametrize("indices", [[1], [0, 3], [4], [5], [-1]])
def test_records_of_another_shard_or_out_of_range_are_refused(indices):
    with pytest.raises(ProtocolError, match="not in its shard"):
        _check_owned(np.array(indices), OWNER, 0)


def test_the_channel_directory_is_private():
    path = private_directory()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        assert len(f"{path}/coordinator") < 100
    finally:
        shutil.rmtree(path)


def test_a_run_directory_whose_coordinator_died_is_removed_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs: a coordinator killed by SIGKILL
    abandoned, live, other = (
        tmp_path / "loadgen-abc",
        tmp_path / "loadgen-def",
        tmp_path / "loadgen-x",
    )
    for path, pid in ((abandoned, gone.pid), (live, os.getpid())):
        path.mkdir()
        (path / OWNER_FILE).write_text(str(pid))
        (path / "channel").touch()
    other.mkdir()  # not a run directory (no owner file): never touched
    mine = private_directory()
    assert not abandoned.exists()
    assert live.exists() and other.exists()
    assert (tmp_path / mine).parent == tmp_path
    assert (Path(mine) / OWNER_FILE).read_text() == str(os.getpid())
