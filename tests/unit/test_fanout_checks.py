"""What the coordinator checks of the worker channel besides the codec: each worker reports only
its own shard's requests, and the channel lives in a directory only this user can enter."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from loadgen.run.fanout import _check_owned, _private_directory
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
    path = _private_directory()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        assert len(f"{path}/coordinator") < 100
    finally:
        os.rmdir(path)
