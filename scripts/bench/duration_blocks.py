"""--duration's blocks: is the coordinator's memory for prepared requests flat in the run's
length, and does a closed loop keep sending across block boundaries?

1. Memory. A paced ``--duration`` run of D and of 4D seconds (same rate, same long prompts,
   ``--duration-block`` fixed), the coordinator's peak RSS in each (``VmHWM`` of the ``loadgen
   run`` process sampled every 20 ms and its ``ru_maxrss`` at exit: the larger; never its
   workers' nor the mock's), for this tree and, in the same step, for the peer tree given with
   ``--peer`` (by default /work/main, which prepares every request of the run before t0).
   The per-request records the coordinator also keeps grow with the run in both (issue 31's
   part); the prompts' bodies are what blocks keep flat. Both trees draw their prompts afresh
   (``--no-dataset-cache``: a cached dataset would spare one tree's preparation). Each run's
   requests (rate x seconds when every one was prepared in time), p99 TTFT and ``warning:
   --duration`` lines (workers that ran dry, requests never prepared in time) are printed
   beside its peak.
2. Sending across blocks. A closed loop (rate inf, ``--max-concurrency``) for a few seconds in
   small blocks, and the same run in one block (the floor: nothing to top up), against the
   embedded mock. From each records file: requests per second over the run and in the 0.2 s
   around each block's first send (in the floor, around the same requests' sends: the median
   and the least of those windows), the requests in flight sampled every ms between the first
   and the last 100 ms (how often fewer than the cap), and the workers' own count of times they
   ran out of requests before their next block came (the run's warning line, if any).

Run it under the shared lock:

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/duration_blocks.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from common import machine_line
from coordinator_memory import RUNNER, sampled_peak

HERE = Path(__file__).resolve().parents[2]
MOCK = ["--mock", "--mock-ttft-ms", "20", "--mock-itl-ms", "5", "-q", "--save-result"]


@dataclass
class Ran:
    """One run: its coordinator's peak RSS, its records file and what it printed."""

    peak_rss: int
    records: Path
    stderr: str
    wall_s: float


def run(tree: Path, args: list[str], out: Path) -> Ran:
    """``loadgen run ARGS`` of ``tree`` (its code first on the path) into ``out``."""
    out.mkdir(parents=True)
    peak_file = out / "peak"
    command = [sys.executable, "-c", RUNNER, str(peak_file), "run", *args, "--result-dir", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tree
    )
    sampled, stderr = sampled_peak(proc)
    wall_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"loadgen run exited {proc.returncode}: {stderr.decode()[-2000:]}")
    at_exit = int(peak_file.read_text().split()[0]) if peak_file.exists() else 0
    (records,) = out.glob("*.records.arrow")
    return Ran(max(sampled, at_exit), records, stderr.decode(), wall_s)


def columns(path: Path) -> dict[str, np.ndarray]:
    """The records file's request index, send and end instants (ns after t0)."""
    table = ipc.open_file(pa.memory_map(str(path))).read_all()
    return {
        name: table[name].to_numpy(zero_copy_only=False) for name in ("index", "sent_ns", "end_ns")
    }


def sending(path: Path, block: int, every: int, cap: int) -> dict[str, float]:
    """Requests per second over the run and around the first send of every ``every``-th
    request (a block's first, when the blocks are of that size); in flight; the blocks."""
    rows = columns(path)
    sent = rows["sent_ns"] >= 0
    index, sent_s, end_s = (
        rows["index"][sent],
        rows["sent_ns"][sent] / 1e9,
        rows["end_ns"][sent] / 1e9,
    )
    first, last = sent_s.min(), sent_s.max()
    boundaries = [
        sent_s[(index >= k) & (index < k + every)].min()
        for k in range(every, int(index.max()) + 1, every)
        if ((index >= k) & (index < k + every)).any()
    ]
    near = [((sent_s > b - 0.1) & (sent_s <= b + 0.1)).sum() / 0.2 for b in boundaries]
    grid = np.arange(first + 0.1, last - 0.1, 0.001)
    flight = np.searchsorted(np.sort(sent_s), grid, "right") - np.searchsorted(
        np.sort(end_s), grid, "right"
    )
    return {
        "sent": float(sent.sum()),
        "blocks": float(-(-len(rows["index"]) // block)),
        "req_s": float(sent.sum() / max(last - first, 1e-9)),
        "boundary_req_s": float(np.median(near)) if near else float("nan"),
        "boundary_min_req_s": float(min(near)) if near else float("nan"),
        "below_cap_pct": float((flight < cap).mean() * 100) if len(grid) else float("nan"),
    }


def waits(stderr: str) -> str:
    """The workers' own count of waits for a block, from the run's warning line."""
    found = re.search(r"ran out of requests (\d+) time\(s\) .*?, (\d+) ms in all", stderr)
    return f"{found.group(1)} ({found.group(2)} ms)" if found else "0"


def main() -> None:
    """Both measurements, each beside its floor or peer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, default=Path("/work/main"), help="the peer tree")
    parser.add_argument("--duration", type=float, default=8.0, help="D, the short paced run (s)")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--input-len", type=int, default=1000, help="long prompts: big bodies")
    parser.add_argument("--block", type=int, default=200, help="the paced runs' --duration-block")
    parser.add_argument("--loop-s", type=float, default=8.0, help="the closed loop's --duration")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--loop-block", type=int, default=256)
    parser.add_argument("--floor-block", type=int, default=4096, help="more than the loop sends")
    args = parser.parse_args()
    print(machine_line("--duration's blocks: coordinator memory and sending across blocks"))
    with tempfile.TemporaryDirectory(prefix="duration-blocks-") as tmp:
        print(
            f"1. paced at {args.rate:g} req/s, {args.input_len}-token prompts, "
            f"--duration-block {args.block}: coordinator peak RSS (MB)"
        )
        print(
            f"{'tree':<28} {'D':>3} {'seconds':>8} {'requests':>9} {'peak MB':>8} {'wall s':>7} "
            f"{'p99 TTFT ms':>12} {'warnings':>9}"
        )
        peaks: dict[str, list[int]] = {}
        for name, tree in (("this tree (blocks)", HERE), (f"peer {args.peer}", args.peer)):
            for factor in (1, 4):
                seconds = args.duration * factor
                flags = [
                    *MOCK, "--request-rate", str(args.rate), "--duration", str(seconds),
                    "--random-input-len", str(args.input_len), "--random-output-len", "4",
                    "--workers", "2", "--no-dataset-cache",
                ]  # fmt: skip
                if tree == HERE:
                    flags += ["--duration-block", str(args.block)]
                ran = run(tree, flags, Path(tmp) / f"{name[:4]}-{factor}")
                requests = len(columns(ran.records)["index"])
                peaks.setdefault(name, []).append(ran.peak_rss)
                (result,) = ran.records.parent.glob("*.json")
                p99 = json.loads(result.read_text())["p99_ttft_ms"]
                warned = ran.stderr.count("warning: --duration")
                print(
                    f"{name:<28} {factor:>2}D {seconds:8.0f} {requests:>9} "
                    f"{ran.peak_rss / 1e6:8.1f} {ran.wall_s:7.1f} {p99:12.1f} {warned:>9}"
                )
        for name, (short, long) in peaks.items():
            print(f"  {name}: peak 4D/D = {long / short:.2f} (+{(long - short) / 1e6:.1f} MB)")
        print(
            f"2. closed loop, --max-concurrency {args.concurrency}, --duration "
            f"{args.loop_s:g} s, 8-token answers of ~55 ms from the mock"
        )
        print(
            f"{'run':<26} {'blocks':>6} {'sent':>6} {'req/s':>7} {'req/s at bound.':>15} "
            f"{'min at block':>13} {'<cap % of ms':>13} {'worker waits':>13}"
        )
        for name, block in (
            (f"blocks of {args.loop_block}", args.loop_block),
            ("one block (floor)", args.floor_block),
        ):
            flags = [
                *MOCK, "--max-concurrency", str(args.concurrency), "--duration", str(args.loop_s),
                "--random-input-len", "32", "--random-output-len", "8", "--workers", "2",
                "--duration-block", str(block),
            ]  # fmt: skip
            ran = run(HERE, flags, Path(tmp) / f"loop-{block}")
            figures = sending(ran.records, block, args.loop_block, args.concurrency)
            print(
                f"{name:<26} {figures['blocks']:6.0f} {figures['sent']:6.0f} "
                f"{figures['req_s']:7.1f} {figures['boundary_req_s']:15.1f} "
                f"{figures['boundary_min_req_s']:13.1f} {figures['below_cap_pct']:13.2f} "
                f"{waits(ran.stderr):>13}"
            )


if __name__ == "__main__":
    main()
