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
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import uvloop

from loadgen.report.stats import sample_stats
from workers.precise_timer import PreciseTimer

PERIOD_NS = 10_000_000
# The receiver's loop starts before the first deadline, so its own start-up is not measured.
LEAD_NS = 100_000_000
START_TIMEOUT_S = 30.0  # for the receiver to start, and to answer after its measurement


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


class FloorError(RuntimeError):
    """The receiver process did not deliver its measurement."""


def measure_floor(seconds: float) -> WakeFloor:
    """Measure the floor for ``seconds`` with a fresh idle receiver process."""
    # A fresh interpreter (not multiprocessing): nothing of the caller's state or main module
    # comes along, and the caller needs no ``if __name__ == "__main__"`` guard.
    command = [sys.executable, "-m", "loadgen.wake_floor", repr(float(seconds))]
    # Unbuffered: the first line is read alone, and communicate() reads the rest from the pipe.
    with subprocess.Popen(
        command, bufsize=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as receiver:
        assert receiver.stdout is not None
        try:
            ready, _, _ = select.select([receiver.stdout], [], [], START_TIMEOUT_S)
            first = receiver.stdout.readline() if ready else b""
            if first:
                port, start_ns, end_ns = (int(x) for x in first.split())
                _send_stamps(port, start_ns, end_ns)
            rest, err = receiver.communicate(timeout=START_TIMEOUT_S + seconds)
        except subprocess.TimeoutExpired:
            receiver.kill()
            rest, err = b"", receiver.communicate()[1] + b"\nno answer in time"
    header, _, data = rest.partition(b"\n")
    try:
        timers, datagrams = (int(x) for x in header.split())
        lags = np.frombuffer(data, dtype=np.int64, count=timers + datagrams) / 1e6
    except ValueError:
        last = (err.decode(errors="replace").strip().splitlines() or ["no error output"])[-1]
        raise FloorError(
            f"the wake-up floor's receiver process failed (exit {receiver.returncode}): {last}"
        ) from None
    return WakeFloor(lags[:timers], lags[timers:])


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


async def _receiver_loop(seconds: float) -> None:
    """The receiver process: idle but for its timer and its socket; answers on stdout."""
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
    sys.stdout.buffer.write(f"{sock.getsockname()[1]} {start_ns} {end_ns}\n".encode())
    sys.stdout.buffer.flush()
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
    out = sys.stdout.buffer
    out.write(f"{len(timer_lags)} {len(datagram_lags)}\n".encode())
    out.write(np.array(timer_lags + datagram_lags, dtype=np.int64).tobytes())
    out.flush()


if __name__ == "__main__":
    uvloop.run(_receiver_loop(float(sys.argv[1])))
