"""loadgen as `vllm bench sweep serve`'s benchmark, against `loadgen mock-server` as its server.

Runs vLLM's own sweep driver from the light install (/work/vllm-venv; scripts/bench/README.md)
with `--serve-cmd "loadgen mock-server ..."` and `--bench-cmd "loadgen run ..."` over a small
grid of `--max-concurrency` and `--request-rate`, two runs per point. The sweep appends its own
flags to the bench command (`--percentile-metrics ttft,tpot,itl,e2el --save-result --result-dir
DIR --result-filename FILE`), overrides the grid's parameters in place or appends them, reads
each run's result JSON back and writes its summary. Prints each point's request throughput and
p99 TTFT as the sweep recorded them, and checks every point has a result and a records file.

    python scripts/bench/vllm_sweep.py            # about a minute
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO

DEFAULT_VLLM_PYTHON = Path("/work/vllm-venv/bin/python")
# vLLM's sweep driver, run as its own __main__ (vLLM's CLI imports the server, which the light
# install lacks).
DRIVER = "import runpy; runpy.run_module('vllm.benchmarks.sweep.serve', run_name='__main__')"
SUMMARY_KEYS = ("max_concurrency", "request_rate", "request_throughput", "p99_ttft_ms")
GRID = [
    {"max_concurrency": 4, "request_rate": 20},
    {"max_concurrency": 16, "request_rate": "inf"},
]


def free_port() -> int:
    """A free loopback port for the mock server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    """Run the sweep and check what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON)
    parser.add_argument("--keep", type=Path, help="keep the sweep's output folder here")
    args = parser.parse_args()
    if not args.vllm_python.exists():
        raise SystemExit(f"{args.vllm_python} not found: see scripts/bench/README.md")
    port = free_port()
    loadgen = [sys.executable, "-m", "loadgen"]
    serve = [*loadgen, "mock-server", "--host", "127.0.0.1", "--port", str(port),
             "--ttft-ms", "50", "--itl-ms", "10"]  # fmt: skip
    bench = [*loadgen, "run", "--base-url", f"http://127.0.0.1:{port}", "--model",
             "loadgen-mock", "--num-prompts", "60", "--random-input-len", "64",
             "--random-output-len", "32", "--max-concurrency", "1", "--disable-tqdm"]  # fmt: skip
    out = args.keep or Path(tempfile.mkdtemp(prefix="loadgen-vllm-sweep-"))
    out.mkdir(parents=True, exist_ok=True)
    params = out / "bench_params.json"
    params.write_text(json.dumps(GRID))
    command = [
        str(args.vllm_python), "-c", DRIVER,
        "--serve-cmd", shlex.join(serve), "--bench-cmd", shlex.join(bench),
        "--after-bench-cmd", "true", "--bench-params", str(params), "--num-runs", "2",
        "--output-dir", str(out), "--experiment-name", "loadgen",
    ]  # fmt: skip
    print(f"vllm bench sweep serve, {len(GRID)} points x 2 runs; output in {out}", flush=True)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise SystemExit(f"the sweep failed (exit {done.returncode}):\n" + "\n".join(tail))
    results = sorted((out / "loadgen").rglob("*.json"))
    runs = [p for p in results if not p.name.endswith(("summary.json", "params.json"))]
    print(f"{'point':<48}{'req/s':>8}{'p99 TTFT ms':>13}{'records':>9}")
    for path in runs:
        data = json.loads(path.read_text())
        if "request_throughput" not in data:
            continue
        records = path.with_name(path.name.removesuffix(".json") + ".records.arrow").exists()
        point = str(path.relative_to(out / "loadgen"))
        print(
            f"{point[:47]:<48}{data['request_throughput']:>8.1f}{data['p99_ttft_ms']:>13.1f}"
            f"{'yes' if records else 'NO':>9}"
        )
    expected = len(GRID) * 2
    found = sum(1 for p in runs if "request_throughput" in json.loads(p.read_text()))
    print(f"{found} of {expected} runs have a result the sweep read back")
    summary = out / "loadgen" / "summary.csv"
    if summary.exists():
        with summary.open() as file:
            rows = list(csv.DictReader(file))
        print(f"the sweep's summary.csv: {len(rows)} rows; per row max_concurrency, request_rate,")
        print("  request_throughput, p99_ttft_ms:")
        for row in rows:
            print("  " + ", ".join(row.get(key, "?") for key in SUMMARY_KEYS))
    if found < expected or not summary.exists():
        raise SystemExit(1)


if __name__ == "__main__":
    main()
