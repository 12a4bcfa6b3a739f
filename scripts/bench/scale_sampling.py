"""What scripts/bench/scale.py reads besides loadgen's result: the RSS, CPU and open files of
loadgen's processes and the mock's, sampled in a thread; the records file's columns it needs;
the requests in flight over time; and the machine's TIME_WAIT sockets."""

from __future__ import annotations

import json
import re
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pyarrow.ipc
from common import PeriodicSampler, cpu_seconds


@dataclass
class RssSample:
    """RSS in bytes of each process at one instant (perf_counter_ns, the clock of t0)."""

    t_ns: int
    coordinator: int
    workers: list[int]
    mock: int  # all the mock's processes together
    mock_cpu_s: float  # the mock's CPU seconds so far
    mock_fds: int  # the mock's open files: its connections, and a few of its own


class RssSampler(PeriodicSampler):
    """Samples the RSS of the client's coordinator, its workers and the mock in a thread."""

    def __init__(self, period_s: float, client_pid: int, mocks: list[psutil.Process]) -> None:
        self.coordinator = psutil.Process(client_pid)
        self.mocks = mocks
        self.workers: dict[int, psutil.Process] = {}  # pid -> process, in start order
        self.samples: list[RssSample] = []
        super().__init__(period_s, self._sample)

    def _find_workers(self) -> None:
        try:
            children = self.coordinator.children()
        except psutil.Error:
            return
        for child in sorted(children, key=lambda p: p.pid):
            if child.pid in self.workers:
                continue
            try:
                if "spawn_main" in " ".join(child.cmdline()):  # not the resource tracker
                    self.workers[child.pid] = child
            except psutil.Error:
                continue

    def _sample(self) -> None:
        self._find_workers()
        now = time.perf_counter_ns()
        rss = [_rss(p) for p in (self.coordinator, *self.workers.values())]
        mock_rss = sum(_rss(p) for p in self.mocks)
        try:
            mock_cpu = sum(cpu_seconds(p) for p in self.mocks)
            mock_fds = sum(p.num_fds() for p in self.mocks)
        except psutil.Error:
            last = self.samples[-1] if self.samples else None
            mock_cpu, mock_fds = (last.mock_cpu_s, last.mock_fds) if last else (0.0, 0)
        self.samples.append(RssSample(now, rss[0], rss[1:], mock_rss, mock_cpu, mock_fds))

    def roles(self) -> list[str]:
        """Role names in the order of ``per_role``."""
        return ["coordinator", *(f"worker {i}" for i in range(len(self.workers))), "mock"]

    def per_role(self, sample: RssSample) -> list[int]:
        """One sample's RSS per role (a worker not started yet or gone: 0)."""
        workers = sample.workers + [0] * (len(self.workers) - len(sample.workers))
        return [sample.coordinator, *workers, sample.mock]


def _rss(proc: psutil.Process) -> int:
    try:
        return proc.memory_info().rss
    except psutil.Error:
        return 0


def open_over_time(sent_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Requests in flight after each instant: (instants, counts), from sent..end intervals."""
    instants = np.concatenate((sent_ns, end_ns))
    steps = np.concatenate((np.ones(len(sent_ns), np.int64), -np.ones(len(end_ns), np.int64)))
    order = np.lexsort((steps, instants))  # at a tie an end comes before a send
    return instants[order], np.cumsum(steps[order])


def reason_key(error: str) -> str:
    """A failure reason with its numbers masked, so that reasons differing in them group."""
    return re.sub(r"\d+(\.\d+)?", "N", error)[:120]


def read_records(path: Path) -> dict[str, np.ndarray | list]:
    """The columns the script needs from a records file (docs/records.md)."""
    with pyarrow.ipc.open_file(str(path)) as reader:
        start = json.loads(reader.schema.metadata[b"loadgen.records"])
        table = reader.read_all().select(["sent_ns", "end_ns", "connect_ns", "error"])
    return {
        "sent_ns": table["sent_ns"].to_numpy(zero_copy_only=False),
        "end_ns": table["end_ns"].to_numpy(zero_copy_only=False),
        "connect_ns": table["connect_ns"].to_numpy(zero_copy_only=False),
        "error": table["error"].to_pylist(),
        "t0_ns": start["t0_ns"],
        "connections": start["connections"],
    }


def time_wait_count() -> int:
    """TCP sockets in TIME_WAIT on the machine: each holds a local port for 60 s, and a
    connect() searches past them."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError), open(table) as lines:
            next(lines, None)
            count += sum(line.split()[3] == "06" for line in lines)
    return count
