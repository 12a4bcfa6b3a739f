"""The machine's floor under every timestamp: how late an idle process wakes for a timer and for a
datagram.

A receiver process runs an idle uvloop event loop that does two things only: it waits on the
timerfd timer loadgen's workers release requests with (``workers.precise_timer``) for deadlines
10 ms apart, and it reads a UDP socket registered as the workers register theirs, to which this
process sends its ``perf_counter_ns()`` every 10 ms, half a period away from the deadlines so the
two never meet. How late each timer expiry and each datagram is seen is the wake-up latency that
every client stamp on this machine carries at least: no client can measure more finely than its
host lets an idle process wake. ``scripts/bench/wake_latency.py`` prints it; ``loadgen calibrate``
and ``scripts/bench/accuracy.py`` measure it beside their steps.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np
import uvloop

from loadgen.report.stats import sample_stats
from workers.precise_timer import PreciseTimer

PERIOD_NS = 10_000_000
# The receiver's loop starts before the first deadline, so its own start-up is not measured.
LEAD_NS = 100_000_000


@dataclass
class WakeFloor:
    """Wake-up delays of an idle process, in ms: timer expiries and datagram arrivals."""

    timer_ms: np.ndarray  # float64, how late each timerfd expiry was seen
    datagram_ms: np.ndarray  # float64, how old each datagram was when it was read

    def timer_p99_ms(self) -> float:
        """p99 of the timer delays (NaN without samples)."""
        return _p99(self.timer_ms)

    def datagram_p99_ms(self) -> float:
        """p99 of the datagram delays (NaN without samples)."""
        return _p99(self.datagram_ms)

    def p99_ms(self) -> float:
        """The floor: the larger of the two p99s (NaN without samples)."""
        values = [v for v in (self.timer_p99_ms(), self.datagram_p99_ms()) if not math.isnan(v)]
        return max(values) if values else math.nan


def _p99(values_ms: np.ndarray) -> float:
    return sample_stats(values_ms, [99], empty=math.nan).at(99)


def measure_floor(seconds: float) -> WakeFloor:
    """Measure the floor for ``seconds`` with a fresh idle receiver process."""
    context = multiprocessing.get_context("spawn")
    # A pipe, not a Queue: a Queue's lock would start multiprocessing's resource tracker, a
    # process that outlives the measurement.
    ours, theirs = context.Pipe()
    receiver = context.Process(target=_receive, args=(theirs, seconds), daemon=True)
    receiver.start()
    theirs.close()
    try:
        port, start_ns, end_ns = ours.recv()
        _send_stamps(port, start_ns, end_ns)
        timer_ns, datagram_ns = ours.recv_bytes(), ours.recv_bytes()
    finally:
        receiver.join(timeout=5)
        if receiver.is_alive():
            receiver.kill()
            receiver.join()
        ours.close()
    return WakeFloor(
        np.frombuffer(timer_ns, dtype=np.int64) / 1e6,
        np.frombuffer(datagram_ns, dtype=np.int64) / 1e6,
    )


def _send_stamps(port: int, start_ns: int, end_ns: int) -> None:
    """Send a datagram holding its send instant every period, half a period after each deadline."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        due = start_ns + PERIOD_NS // 2
        while due < end_ns:
            pause = (due - time.perf_counter_ns()) / 1e9
            if pause > 0:
                time.sleep(pause)
            sender.sendto(time.perf_counter_ns().to_bytes(8, "little"), ("127.0.0.1", port))
            due += PERIOD_NS
    finally:
        sender.close()


def _receive(pipe: Connection, seconds: float) -> None:
    """The receiver process: idle but for its timer and its socket."""
    uvloop.run(_receiver_loop(pipe, seconds))


async def _receiver_loop(pipe: Connection, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    datagram_lags: list[int] = []

    def on_readable() -> None:
        now = time.perf_counter_ns()
        while True:
            try:
                data = sock.recv(64)
            except BlockingIOError:
                return
            datagram_lags.append(now - int.from_bytes(data, "little"))

    loop.add_reader(sock.fileno(), on_readable)
    start_ns = time.perf_counter_ns() + LEAD_NS
    end_ns = start_ns + int(seconds * 1e9)
    pipe.send((sock.getsockname()[1], start_ns, end_ns))
    timer = PreciseTimer(loop)
    timer_lags: list[int] = []
    deadline = start_ns
    while deadline < end_ns:
        await timer.wait_until(deadline)
        now = time.perf_counter_ns()
        timer_lags.append(now - deadline)
        # A stall counts once: the deadlines it swallowed are skipped, not reported late too.
        while deadline <= now:
            deadline += PERIOD_NS
    timer.close()
    # The last datagrams are still on their way.
    await asyncio.sleep(PERIOD_NS / 1e9)
    loop.remove_reader(sock.fileno())
    on_readable()
    sock.close()
    pipe.send_bytes(np.array(timer_lags, dtype=np.int64).tobytes())
    pipe.send_bytes(np.array(datagram_lags, dtype=np.int64).tobytes())
    pipe.close()
