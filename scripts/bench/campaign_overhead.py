"""What a campaign saves: the same grid of runs as one `loadgen run` process (a campaign) and as
one process per run, the way `vllm bench sweep serve` drives a benchmark command, with
`vllm bench serve` (the light install) run the same way as the peer.

Every row runs the same runs against one `loadgen mock-server` started once: a grid of
--max-concurrency and --request-rate, --num-runs of each, 200 random prompts of 256 tokens and
16 output tokens. A run's own time is its result JSON's ``duration`` (t0 to the last answer);
the rest of the wall time is overhead: interpreter and imports, workers, tokenizer, dataset,
waiting for the server. Prints per row the wall time, the runs' time, and the overhead per run
(medians over --repeat), and ours over the peers'.

    python scripts/bench/campaign_overhead.py [--repeat 3]      # about 2 minutes
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, loadgen_command, machine_line, make_tokenizer_dir, mock_server

VLLM_DRIVER = REPO / "scripts" / "bench" / "vllm_bench_serve.py"
DEFAULT_VLLM_PYTHON = Path("/work/vllm-venv/bin/python")
CAPS = ("8", "32")
RATES = ("100", "inf")
RUNS = 2
WORKLOAD = ["--num-prompts", "200", "--random-input-len", "256", "--random-output-len", "16",
            "--model", "loadgen-mock", "--disable-tqdm"]  # fmt: skip


def durations(folder: Path) -> list[float]:
    """Each result JSON's run time under ``folder`` (any depth)."""
    return [json.loads(path.read_text())["duration"] for path in sorted(folder.rglob("*.json"))]


def campaign(url: str, out: Path) -> tuple[float, list[float]]:
    """The whole grid as one `loadgen run`; its wall time and the runs' times."""
    command = [*loadgen_command(), "run", "--base-url", url, *WORKLOAD,
               "--max-concurrency", ",".join(CAPS), "--request-rate", ",".join(RATES),
               "--num-runs", str(RUNS), "--result-dir", str(out)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start, durations(out)


def per_run(command: list[str], url: str, out: Path) -> tuple[float, list[float]]:
    """Each run of the grid as a process of its own, one after another (as the sweep does)."""
    start = time.perf_counter()
    for k, (cap, rate, _run) in enumerate(itertools.product(CAPS, RATES, range(RUNS))):
        subprocess.run(
            [*command, "--base-url", url, *WORKLOAD, "--max-concurrency", cap,
             "--request-rate", rate, "--save-result", "--result-dir", str(out),
             "--result-filename", f"run{k}.json"],
            check=True, capture_output=True,
        )  # fmt: skip
    return time.perf_counter() - start, durations(out)


def main() -> None:
    """Run each row --repeat times and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON)
    args = parser.parse_args()
    runs = len(CAPS) * len(RATES) * RUNS
    print(machine_line("campaign_overhead.py"))
    print(f"grid: --max-concurrency {','.join(CAPS)} x --request-rate {','.join(RATES)} x "
          f"{RUNS} runs = {runs} runs of 200 requests; medians of {args.repeat}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, mock_server(Path(tmp) / "mock.log", 5.0) as (url, _):
        tokenizer = make_tokenizer_dir(Path(tmp) / "tokenizer")
        rows: dict[str, list[tuple[float, list[float]]]] = {}
        for k in range(args.repeat):
            base = Path(tmp) / str(k)
            rows.setdefault("loadgen, one campaign process", []).append(
                campaign(url, base / "campaign")
            )
            rows.setdefault("loadgen, a process per run", []).append(
                per_run([*loadgen_command(), "run"], url, base / "loadgen")
            )
            if args.vllm_python.exists():
                vllm = [str(args.vllm_python), str(VLLM_DRIVER), "--tokenizer", str(tokenizer)]
                rows.setdefault("vllm bench serve, a process per run", []).append(
                    per_run(vllm, url, base / "vllm")
                )
    print(f"{'':38} {'wall s':>8} {'runs s':>8} {'overhead s/run':>15} {'ours / this':>12}")
    ours = None
    for label, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        timed = statistics.median(sum(s[1]) for s in samples)
        overhead = statistics.median((s[0] - sum(s[1])) / runs for s in samples)
        ours = ours if ours is not None else overhead
        print(f"{label:38} {wall:8.2f} {timed:8.2f} {overhead:15.3f} {ours / overhead:12.2f}")
    if not args.vllm_python.exists():
        print(f"(no {args.vllm_python}: vllm bench serve skipped; scripts/bench/README.md)")


if __name__ == "__main__":
    sys.exit(main())
