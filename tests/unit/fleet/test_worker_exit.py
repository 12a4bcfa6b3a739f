"""A local worker's process seen gone: one that exited cleanly has sent DONE just before, which
may still be in the socket, so it is not lost until CLEAN_EXIT_GRACE_S has passed; one that
died of a signal or an error is lost at once."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import pytest

from loadgen.fleet import worker_channel
from loadgen.fleet.worker_channel import CLEAN_EXIT_GRACE_S, LOCAL, Member, WorkerChannel
from workers.protocol import Codec


@dataclass
class Exited:
    """A process that has exited with ``exitcode``."""

    exitcode: int

    def is_alive(self) -> bool:
        return False


def test_a_clean_exit_is_not_lost_within_its_grace_and_a_crash_is_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(worker_channel.time, "monotonic", lambda: now[0])
    with tempfile.TemporaryDirectory() as folder:
        channel = WorkerChannel(f"ipc://{folder}/channel", Codec.new())
        try:
            channel.members[0] = Member(0, b"w0", LOCAL, process=Exited(0))  # type: ignore[arg-type]
            channel.members[1] = Member(1, b"w1", LOCAL, process=Exited(-9))  # type: ignore[arg-type]
            assert channel.lost(0) is None  # its DONE may still be on its way
            assert channel.lost(1) == f"{channel.members[1].where()} died (exit code -9)"
            now[0] += CLEAN_EXIT_GRACE_S / 2
            assert channel.lost(0) is None
            now[0] += CLEAN_EXIT_GRACE_S
            assert channel.lost(0) == f"{channel.members[0].where()} died (exit code 0)"
        finally:
            channel.close()
