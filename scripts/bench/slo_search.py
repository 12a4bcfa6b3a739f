"""The search for the highest load within an SLO, against a mock whose capacity is known.

`loadgen mock-server --max-running N` runs at most N requests at once and queues the rest, so it
serves at most N / (ttft + (tokens - 1) * itl) requests per second (loadgen/mock/admission.py),
and a closed loop of more than N streams waits. The script starts such a mock (its own process),
runs `loadgen run --search rate` and `--search concurrency` against it (the real CLI, its own
process; its lines are shown as they come) and prints each search's answer beside the computed
capacity, with the target: within 10 % of it.

The rate search sends near-even arrivals (`--burstiness 100`: gaps within about 10 % of the
mean) with the SLO p99 TTFT <= ttft + 100 ms: below the capacity no request waits, past it the
queue grows with every request, so p99 TTFT crosses the line within a few per cent above the
capacity (at 2 % for 400 requests). The concurrency search's SLO is p99 TTFT <= ttft + half a
request's time: with N streams none waits, with N + 1 one waits a whole request.

    flock -o /tmp/bench.lock .venv/bin/python scripts/bench/slo_search.py
    .venv/bin/python scripts/bench/slo_search.py --max-running 4 --num-prompts 200   # quicker

About 4 minutes on a 2-core machine with the defaults (a probe at rate r lasts 400 / r s: the
rate search's first probes are the long ones). Measured 2026-12-05 on 2 shared CPUs: the rate
search answered 84.0 req/s against 84.2 computed (-0.3 %, bracket [84, 88], 11 probes, two of
them repeats near the line), the concurrency search 8 against 8 (bracket [8, 9], 9 probes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import machine_line

from loadgen.mock.admission import capacity_rps
from loadgen.mock.process import EmbeddedMockServer

TARGET = 0.10  # the search's answer within this fraction of the computed capacity


def search(url: str, kind: str, slo: str, args: argparse.Namespace, extra: list[str]) -> dict:
    """``loadgen run --search KIND`` against the mock; the search's part of its campaign.json."""
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable, "-m", "loadgen", "run", "--base-url", url,
            "--search", kind, "--slo", slo, "--search-tolerance", str(args.tolerance),
            "--num-prompts", str(args.num_prompts), "--random-input-len", "32",
            "--random-output-len", str(args.tokens), "--result-dir", folder, "--disable-tqdm",
            *extra,
        ]  # fmt: skip
        print("$", " ".join(command[2:]), flush=True)
        subprocess.run(command, check=True)
        (campaign,) = Path(folder).iterdir()
        return json.loads((campaign / "campaign.json").read_text())["search"]


def verdict(found: float | None, expected: float) -> str:
    """The answer beside the expected value, its error and the target's verdict."""
    if found is None:
        return f"no answer (expected {expected:.1f}): FAIL"
    error = (found - expected) / expected
    ok = abs(error) <= TARGET
    return (
        f"{found:.1f} against {expected:.1f} computed: {error:+.1%} "
        f"({'within' if ok else 'NOT within'} {TARGET:.0%}: {'PASS' if ok else 'FAIL'})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-running", type=int, default=8)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=16, help="output tokens per request")
    parser.add_argument("--num-prompts", type=int, default=400, help="requests per probe")
    parser.add_argument("--tolerance", type=float, default=0.05, help="--search-tolerance")
    args = parser.parse_args()

    capacity = capacity_rps(args.max_running, args.ttft_ms / 1e3, args.itl_ms / 1e3, args.tokens)
    service_ms = args.ttft_ms + (args.tokens - 1) * args.itl_ms
    print(machine_line("slo_search.py: the search against a mock of known capacity"))
    print(
        f"mock: --max-running {args.max_running} --ttft-ms {args.ttft_ms:g} --itl-ms "
        f"{args.itl_ms:g}, {args.tokens} tokens a request: {service_ms:g} ms a request, "
        f"capacity {args.max_running} / {service_ms / 1e3:g} s = {capacity:.1f} req/s"
    )
    mock = EmbeddedMockServer(
        args.ttft_ms, args.itl_ms, extra_args=("--max-running", str(args.max_running))
    )
    url = mock.start()
    try:
        rate_slo = f"p99_ttft_ms<={args.ttft_ms + 100:g}"
        rate = search(
            url,
            "rate",
            rate_slo,
            args,
            ["--burstiness", "100", "--search-start", "8", "--search-max", "4096"],
        )
        cap_slo = f"p99_ttft_ms<={args.ttft_ms + service_ms / 2:g}"
        concurrency = search(url, "concurrency", cap_slo, args, ["--search-max", "256"])
    finally:
        mock.stop()
    print()
    print(f"rate search ({rate_slo}, {len(rate['probes'])} probes, bracket {rate['bracket']}):")
    print(f"  highest rate within the SLO: {verdict(rate['best'], capacity)}")
    print(
        f"concurrency search ({cap_slo}, {len(concurrency['probes'])} probes, bracket "
        f"{concurrency['bracket']}):"
    )
    print(
        f"  highest concurrency within the SLO: "
        f"{verdict(concurrency['best'], float(args.max_running))}"
    )
    hits = [
        abs(((found or 0) - expected) / expected) <= TARGET
        for found, expected in (
            (rate["best"], capacity),
            (concurrency["best"], float(args.max_running)),
        )
    ]
    return 0 if all(hits) else 1


if __name__ == "__main__":
    sys.exit(main())
