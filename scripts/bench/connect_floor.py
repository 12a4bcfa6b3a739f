"""The machine's floor under opening many connections: plain TCP connects to one address.

Linux picks each connecting socket's local port by searching ``ip_local_port_range``, and
connect() searches the half of the range of one parity first; once that half is taken (about
14,100 ports of the default 32768-60999), each connect() walks the whole range in the kernel
and costs milliseconds instead of microseconds. No client avoids that search, so the time for
``processes`` processes to open ``count`` plain sockets between them (no HTTP, no event loop)
is the floor under any client's opening of as many connections to one server.

    python scripts/bench/connect_floor.py 20000 --processes 2
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
from contextlib import suppress
from dataclasses import dataclass

# One client process: open N sockets to PORT, print the wall and the kernel (system) seconds,
# the seconds for the last tenth, then hold them until stdin closes; close them with a reset
# (SO_LINGER 0) so that they leave no TIME_WAIT behind to slow the next connects.
CLIENT = """
import os, socket, struct, sys, time
n, port = int(sys.argv[1]), int(sys.argv[2])
held, tenth = [], max(1, n // 10)
start, times = time.perf_counter(), os.times()
for i in range(n):
    if i == n - tenth:
        last = time.perf_counter()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.connect(("127.0.0.1", port))
    held.append(s)
end = time.perf_counter()
print(end - start, os.times().system - times.system, end - last, flush=True)
sys.stdin.read()
for s in held:
    s.close()
"""


@dataclass(frozen=True)
class ConnectFloor:
    """How long plain connects took: the slowest process's wall time and kernel CPU."""

    count: int
    processes: int
    wall_s: float  # the slowest process, start to its last connect
    system_s: float  # kernel CPU of all the processes together
    last_tenth_us: float  # per connect, over each process's last tenth (the slowest part)

    def line(self) -> str:
        """One line for a benchmark's output."""
        return (
            f"floor: {self.count} plain TCP connects from {self.processes} processes take "
            f"{self.wall_s:.1f} s ({self.system_s:.1f} s in the kernel; the last tenth "
            f"{self.last_tenth_us:.0f} µs each)"
        )


def _accept_and_close(listener: socket.socket, stop: threading.Event) -> None:
    """Accept every connection and close it at once: the clients keep their ports bound."""
    listener.settimeout(0.2)
    while not stop.is_set():
        with suppress(TimeoutError, OSError):
            conn, _ = listener.accept()
            conn.close()


def measure(count: int, processes: int) -> ConnectFloor:
    """Open ``count`` connections from ``processes`` processes to a local listener."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    stop = threading.Event()
    acceptor = threading.Thread(target=_accept_and_close, args=(listener, stop), daemon=True)
    acceptor.start()
    port = str(listener.getsockname()[1])
    shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    clients = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(n), port],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in shares
    ]
    try:
        figures = []
        for client in clients:
            assert client.stdout is not None
            line = client.stdout.readline().split()
            if len(line) != 3:
                raise RuntimeError(f"a connecting process failed (exit {client.wait()})")
            figures.append([float(x) for x in line])
    finally:
        for client in clients:
            with suppress(OSError):
                client.communicate(timeout=30)
        stop.set()
        acceptor.join()
        listener.close()
    last_tenth_us = max(
        1e6 * last / max(1, n // 10) for n, (_, _, last) in zip(shares, figures, strict=True)
    )
    return ConnectFloor(
        count=count,
        processes=processes,
        wall_s=max(f[0] for f in figures),
        system_s=sum(f[1] for f in figures),
        last_tenth_us=last_tenth_us,
    )


def main() -> None:
    """Measure and print the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    print(measure(args.count, args.processes).line())


if __name__ == "__main__":
    main()
