"""The machine's own floor under loadgen's timings: how late an idle uvloop process sees a datagram.

A receiver process runs an idle uvloop event loop with a UDP socket registered as loadgen's
workers register theirs; this process sends it its `perf_counter_ns()` every 10 ms. The
receiver's delay in reading each one is the wake-up latency that every stamp on this machine
carries at least (the same path as loadgen's loop-lag probes). Prints p50/p99/max in ms per
round. Run: python scripts/bench/wake_latency.py
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import time

import numpy as np
import uvloop


def receive(port_queue, result_queue, seconds: float) -> None:
    """Receiver process: read every datagram as soon as the loop gets to it."""

    async def main() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        port_queue.put(sock.getsockname()[1])
        lags: list[int] = []

        def on_readable() -> None:
            now = time.perf_counter_ns()
            while True:
                try:
                    data = sock.recv(64)
                except BlockingIOError:
                    return
                lags.append(now - int.from_bytes(data, "little"))

        asyncio.get_running_loop().add_reader(sock.fileno(), on_readable)
        await asyncio.sleep(seconds)
        result_queue.put(lags)

    uvloop.run(main())


def one_round(seconds: float) -> np.ndarray:
    """Wake-up delays (ms) of one round of datagrams sent every 10 ms."""
    ctx = multiprocessing.get_context("spawn")
    port_queue, result_queue = ctx.Queue(), ctx.Queue()
    receiver = ctx.Process(target=receive, args=(port_queue, result_queue, seconds + 0.5))
    receiver.start()
    port = port_queue.get()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sender.sendto(time.perf_counter_ns().to_bytes(8, "little"), ("127.0.0.1", port))
        time.sleep(0.01)
    lags = np.array(result_queue.get(), dtype=np.float64) / 1e6
    receiver.join()
    return lags


def main() -> None:
    """Print the wake-up latency percentiles of a few rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.5, help="length of a round")
    args = parser.parse_args()
    print("idle uvloop process, UDP datagram every 10 ms from another process; delay in ms")
    for r in range(args.rounds):
        lags = one_round(args.seconds)
        p50, p99 = np.percentile(lags, [50, 99])
        print(f"  round {r + 1}: n={len(lags)} p50={p50:.3f} p99={p99:.3f} max={lags.max():.3f}")


if __name__ == "__main__":
    main()
