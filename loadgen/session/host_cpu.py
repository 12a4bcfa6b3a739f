"""Where the host's CPUs went during the timed run: to loadgen (its coordinator and workers), to
processes loadgen started (the ``--mock`` server), to every other process, to the hypervisor.

Read from Linux's /proc, in the coordinator only, never on a worker's path:

- ``/proc/stat``'s first line: all CPUs' time by kind (user, system, idle, steal, ...) at the
  run's start and end. Busy time not spent in loadgen's processes went to other processes.
- ``/proc/PID/stat``: each process's user + system time (all its threads). Every process is read
  at the start and end, so the one that used the most CPU can be named.
- ``/proc/net/tcp`` and ``tcp6`` and the busiest process's ``/proc/PID/fd`` (and its parents'),
  once at the end: whether it is the server under test, listening on the server URL's port.
- ``/proc/PID/schedstat`` of each worker (its main thread, the event loop): time on a CPU and
  time runnable but waiting for one, every ``WINDOW_S``. On a CPU + waiting is what the worker
  asked for; a worker asking for 90 % of a window or more is saturated there, whoever ran it.

One window's sample reads two small files per worker (about 20 µs each). Where /proc is not
Linux's, nothing is measured and ``stop`` returns None: the verdict then says the host was not
measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from loadgen.records.model import HostUsage

WINDOW_S = 0.1
PROC = "/proc"


@dataclass(frozen=True)
class CpuTimes:
    """All CPUs' time from /proc/stat, in clock ticks."""

    total: int
    idle: int  # idle + iowait
    steal: int
    processes: int  # user + nice + system: time that processes' own accounts hold


@dataclass(frozen=True)
class ProcessTime:
    """One process's CPU time in clock ticks, with what names it."""

    ticks: int  # utime + stime
    name: str  # comm
    parent: int


@dataclass
class _Window:
    """A worker's loop thread at the last sample: ns on a CPU, ns waiting, and when."""

    run_ns: int
    wait_ns: int
    at_ns: int


def read_cpu_times(path: str = f"{PROC}/stat") -> tuple[CpuTimes, int] | None:
    """All CPUs' times and the number of CPUs, or None where /proc/stat is not Linux's."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    return parse_cpu_times(lines)


def parse_cpu_times(lines: list[str]) -> tuple[CpuTimes, int] | None:
    """``cpu`` line fields (user nice system idle iowait irq softirq steal ...) and the count
    of ``cpuN`` lines; guest time is already inside user and is not added twice."""
    if not lines or not lines[0].startswith("cpu "):
        return None
    fields = [int(x) for x in lines[0].split()[1:9]]
    fields += [0] * (8 - len(fields))
    user, nice, system, idle, iowait, _irq, _softirq, steal = fields
    cpus = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit())
    times = CpuTimes(
        total=sum(fields),
        idle=idle + iowait,
        steal=steal,
        processes=user + nice + system,
    )
    return times, max(cpus, 1)


def parse_process_stat(text: str) -> ProcessTime | None:
    """utime + stime, comm and parent of one /proc/PID/stat line (comm may hold spaces and
    parentheses, so the fields are counted from its last ')')."""
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < 0:
        return None
    rest = text[close_at + 2 :].split()
    try:  # rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15
        return ProcessTime(
            int(rest[11]) + int(rest[12]), text[open_at + 1 : close_at], int(rest[1])
        )
    except (IndexError, ValueError):
        return None


def read_process(pid: int) -> ProcessTime | None:
    """One process's CPU time, or None when it is gone."""
    try:
        with open(f"{PROC}/{pid}/stat") as f:
            return parse_process_stat(f.read())
    except OSError:
        return None


def read_all_processes() -> dict[int, ProcessTime]:
    """Every process's CPU time (those that vanish while being read are left out)."""
    out: dict[int, ProcessTime] = {}
    with contextlib.suppress(OSError), os.scandir(PROC) as entries:
        for entry in entries:
            if entry.name.isdigit() and (proc := read_process(int(entry.name))) is not None:
                out[int(entry.name)] = proc
    return out


def read_schedstat(pid: int) -> tuple[int, int] | None:
    """A process's main thread: (ns on a CPU, ns runnable and waiting for one), or None."""
    try:
        with open(f"{PROC}/{pid}/schedstat") as f:
            run_ns, wait_ns, *_ = f.read().split()
        return int(run_ns), int(wait_ns)
    except (OSError, ValueError):
        return None


class HostSampler:
    """Samples the host from ``start`` to ``stop``: loadgen is this process and ``workers``."""

    def __init__(self, workers: list[int], server_port: int | None = None) -> None:
        self.workers = workers
        self.server_port = server_port  # the server's, where it runs on this host
        self.me = os.getpid()
        self.cpu_start: CpuTimes | None = None
        self.cpus = 1
        self.processes_start: dict[int, ProcessTime] = {}
        self.start_ns = 0
        self.first: dict[int, _Window] = {}
        self.last: dict[int, _Window] = {}
        self.window_start: dict[int, _Window] = {}
        self.peak: dict[int, tuple[float, float]] = dict.fromkeys(workers, (0.0, 0.0))
        self.worker_ticks: dict[int, int] = {}  # the last seen, for a worker gone at the end
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        """The run starts: the first reading, then a window every WINDOW_S on the running loop."""
        read = read_cpu_times()
        if read is None:
            return
        self.cpu_start, self.cpus = read
        self.processes_start = read_all_processes()
        self.start_ns = time.perf_counter_ns()
        self._sample_workers()
        self.task = asyncio.get_running_loop().create_task(self._every_window())

    async def _every_window(self) -> None:
        while True:
            await asyncio.sleep(WINDOW_S)
            self._sample_workers()

    def _sample_workers(self) -> None:
        now = time.perf_counter_ns()
        for pid in self.workers:
            if (proc := read_process(pid)) is not None:
                self.worker_ticks[pid] = proc.ticks
            sched = read_schedstat(pid)
            if sched is None:
                continue
            reading = _Window(*sched, now)
            self.first.setdefault(pid, reading)
            self.last[pid] = reading
            before = self.window_start.get(pid)
            # A window cut short (the last one, at stop) is too short to judge on its own.
            if before is not None and now - before.at_ns < WINDOW_S * 1e9 / 2:
                continue
            if before is not None:
                span = now - before.at_ns
                ran = reading.run_ns - before.run_ns
                wanted = ran + reading.wait_ns - before.wait_ns
                self.peak[pid] = max(self.peak[pid], (100.0 * wanted / span, 100.0 * ran / span))
            self.window_start[pid] = reading

    async def stop(self) -> HostUsage | None:
        """The run has ended: the last reading and the host's use over the run."""
        if self.task is None or self.cpu_start is None:
            return None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        self._sample_workers()
        read = read_cpu_times()
        if read is None:
            return None
        wall_ns = time.perf_counter_ns() - self.start_ns
        return host_usage(
            self.cpu_start,
            read[0],
            self.cpus,
            wall_ns,
            self.processes_start,
            read_all_processes(),
            self.me,
            self.worker_ticks,
            {pid: (self.first[pid], self.last[pid]) for pid in self.workers if pid in self.first},
            self.peak,
            serves=_listener_test(self.server_port),
        )


def host_usage(
    cpu_start: CpuTimes,
    cpu_end: CpuTimes,
    cpus: int,
    wall_ns: int,
    before: dict[int, ProcessTime],
    after: dict[int, ProcessTime],
    me: int,
    worker_ticks: dict[int, int],
    worker_windows: dict[int, tuple[_Window, _Window]],
    peak: dict[int, tuple[float, float]],
    serves: Callable[[int], bool] = lambda pid: False,
) -> HostUsage:
    """The shares of all CPUs' time over the run, from the two readings.

    loadgen = this process + its workers; started = this process's other children (the
    ``--mock`` server); other = the rest of the processes' time (user + nice + system less the
    two); steal and idle as /proc/stat counts them. Percentages of all CPUs' time, so a hog
    spinning on one of two CPUs is 50 %. ``serves``: whether a process listens on the server's
    port (the busiest process is the server under test if it or a parent does).
    """
    total = max(cpu_end.total - cpu_start.total, 1)

    def used(pid: int) -> int:
        end = after.get(pid)
        ticks = end.ticks if end is not None else worker_ticks.get(pid)
        if ticks is None:
            return 0
        start = before.get(pid)
        return max(ticks - (start.ticks if start is not None else 0), 0)

    loadgen_pids = {me, *worker_ticks, *worker_windows}
    loadgen = sum(used(pid) for pid in loadgen_pids)
    started_pids = {pid for pid, p in after.items() if p.parent == me and pid not in loadgen_pids}
    started = sum(used(pid) for pid in started_pids)
    processes = cpu_end.processes - cpu_start.processes
    other = max(processes - loadgen - started, 0)
    busiest = max((pid for pid in after if pid not in loadgen_pids), key=used, default=None)

    def pct(ticks: int) -> float:
        return 100.0 * ticks / total

    demand, wait = [], []
    for first, last in worker_windows.values():
        span = max(last.at_ns - first.at_ns, 1)
        waited = last.wait_ns - first.wait_ns
        demand.append(100.0 * (last.run_ns - first.run_ns + waited) / span)
        wait.append(100.0 * waited / span)
    return HostUsage(
        cpus=cpus,
        wall_s=wall_ns / 1e9,
        loadgen_pct=pct(loadgen),
        started_pct=pct(started),
        other_pct=pct(other),
        steal_pct=pct(cpu_end.steal - cpu_start.steal),
        idle_pct=pct(cpu_end.idle - cpu_start.idle),
        busiest_name=after[busiest].name if busiest is not None and used(busiest) else "",
        busiest_pid=busiest if busiest is not None and used(busiest) else 0,
        busiest_pct=pct(used(busiest)) if busiest is not None else 0.0,
        busiest_started=busiest in started_pids,
        worker_demand_pct=demand,
        worker_wait_pct=wait,
        worker_peak_demand_pct=[peak[pid][0] for pid in worker_windows],
        worker_peak_cpu_pct=[peak[pid][1] for pid in worker_windows],
        busiest_serves=busiest is not None and _in_lineage(busiest, after, serves),
    )


LINEAGE = 4  # vLLM's engine core is a child of the API server that listens; a wrapper adds one


def _in_lineage(pid: int, processes: dict[int, ProcessTime], test: Callable[[int], bool]) -> bool:
    """Whether ``test`` holds for ``pid`` or one of its nearest LINEAGE parents."""
    for _ in range(LINEAGE + 1):
        if pid <= 1:
            return False
        if test(pid):
            return True
        parent = processes.get(pid)
        if parent is None:
            return False
        pid = parent.parent
    return False


def local_server_port(server_url: str) -> int | None:
    """The port of a server URL that names this host (loopback or its own name), else None."""
    parts = urlsplit(server_url)
    host = (parts.hostname or "").lower()
    if not (host in ("localhost", "::1", os.uname().nodename.lower()) or host.startswith("127.")):
        return None
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def listening_inodes(port: int, proc: str = PROC) -> set[str]:
    """The inodes of the TCP sockets listening on ``port`` (/proc/net/tcp and tcp6)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{table}") as file:
                rows = file.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local rem st ... inode (10th)
            if len(fields) > 9 and fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                inodes.add(fields[9])
    return inodes


def holds_socket(pid: int, inodes: set[str], proc: str = PROC) -> bool:
    """Whether process ``pid`` holds one of the sockets ``inodes`` (False if unreadable)."""
    try:
        fds = os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(f"{proc}/{pid}/fd/{fd}")  # a socket's: "socket:[INODE]"
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


def _listener_test(port: int | None) -> Callable[[int], bool]:
    """A test of whether a process listens on ``port``, read once now (never, for None)."""
    inodes = listening_inodes(port) if port is not None else set()
    if not inodes:
        return lambda pid: False
    return lambda pid: holds_socket(pid, inodes)
