"""The machine's own floor under loadgen's timings: how late an idle uvloop process wakes for a
timer and sees a datagram.

The measurement is loadgen/wake_floor.py (``loadgen calibrate`` and scripts/bench/accuracy.py
take it too): a receiver process runs an idle uvloop event loop with the workers' timerfd timer
armed every 10 ms and a UDP socket registered as the workers register theirs, to which this
process sends its ``perf_counter_ns()`` every 10 ms. The delay in each wake-up is what every stamp
on this machine carries at least (the datagram is the same path as loadgen's loop-lag probes).
Prints p50/p99/max in ms per round. Run: python scripts/bench/wake_latency.py
The timer's p50 is the figure tests/unit/workers/test_precise_timer.py once asserted (under 1 ms
on a quiet machine): a figure of the machine, which a busy one does not meet, so it is measured
here.
"""

from __future__ import annotations

import argparse

import numpy as np

from loadgen.wake_floor import measure_floor


def describe(name: str, lags_ms: np.ndarray) -> str:
    """``name: n= p50= p99= max=`` of one sample of delays (ms)."""
    if not len(lags_ms):
        return f"{name}: no samples"
    p50, p99 = np.percentile(lags_ms, [50, 99])
    return f"{name}: n={len(lags_ms)} p50={p50:.3f} p99={p99:.3f} max={lags_ms.max():.3f}"


def main() -> None:
    """Print the wake-up latency percentiles of a few rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.5, help="length of a round")
    args = parser.parse_args()
    print("idle uvloop process: timerfd deadlines and UDP datagrams every 10 ms; delay in ms")
    for r in range(args.rounds):
        floor = measure_floor(args.seconds)
        print(f"  round {r + 1}: {describe('timer', floor.timer_ms)}")
        print(f"           {describe('datagram', floor.datagram_ms)}")


if __name__ == "__main__":
    main()
