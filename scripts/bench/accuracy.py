"""Accuracy side by side: loadgen and `vllm bench serve` timed against the server's own records.

One recording mock (`loadgen mock-server --record-timings`, its own process, ITL 50 ms) serves, in
turn, loadgen `--workers 1`, loadgen `--workers 2`, `vllm bench serve` (through
scripts/bench/vllm_bench_serve.py, when /work/vllm-venv exists) and the bare floor client
(scripts/bench/bare_client.py: pre-built requests on pre-opened raw connections, one byte count per
read; what no client can go under with this mock on this machine) at each concurrency, with the
load `loadgen calibrate` uses: Poisson arrivals at concurrency / stream length (3.2 s), 3 x
concurrency requests, the concurrency as the cap. Each client's detailed result JSON
(`--save-detailed`: start times, TTFTs, ITLs) is joined with the mock's records by `x-request-id`
(both clients send `--request-id-prefix` + index), and the script prints per client TTFT error and
event-gap error (client − server, same clock) at p50 and p99, loadgen's p99s as a fraction of
vllm's, the two halves of the TTFT error at p99 (send leg: the client's send stamp to the mock's
handler; delivery: the mock's write to the client's read, every event), and the machine's floor
measured just before each client: how late an idle process wakes for a timer and for a datagram, at
p99 (loadgen/wake_floor.py). Then the targets: below 1,024 streams loadgen `--workers 2`'s p99
errors within the floor + 1 ms, from 1,024 streams at most a tenth of vllm's. With `--repeat N`
every client runs N times per step (the clients in turn, so they share the machine's conditions)
and the targets are judged on the medians. ``--burst`` steps run the same clients closed-loop
(``--max-concurrency C`` at rate inf, C requests at t0) and, for every step, a shares table says
how much of the TTFT error is the mock's accept/read/parse queue and how much the client's, and
whether loadgen's verdict's stated delay covers the client's (accuracy_shares.py).

    flock /tmp/loadgen-bench.lock .venv/bin/python scripts/bench/accuracy.py
    .venv/bin/python scripts/bench/accuracy.py --concurrency 64 --skip-vllm   # a quick look

About 3 minutes for the three steps with vllm on a 2-core machine, 9 with --repeat 3.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from accuracy_shares import HEADER as SHARES_HEADER
from accuracy_shares import LEGEND as SHARES_LEGEND
from accuracy_shares import Shares, format_shares, median_shares, shares
from common import REPO, machine_line, make_tokenizer_dir

from loadgen.calibrate import CalibrationError, RecordingServer, parse_concurrencies, step_load
from loadgen.text.tokenizer import MOCK_MODEL_NAME
from loadgen.timing_error import ClientRun, Comparison, compare, error_stats, notes, stats_ms
from loadgen.wake_floor import FloorError, WakeFloor, measure_floor

VLLM_DRIVER = REPO / "scripts" / "bench" / "vllm_bench_serve.py"
BARE_CLIENT = REPO / "scripts" / "bench" / "bare_client.py"
BARE = "bare client (floor)"
DEFAULT_VLLM_PYTHON = Path("/work/vllm-venv/bin/python")
VLLM = "vllm bench serve"
RATIO_TARGET = 0.1  # loadgen --workers 2's p99 over vllm's, from RATIO_FROM streams
RATIO_FROM = 1024
FLOOR_MARGIN_MS = 1.0  # below RATIO_FROM streams: loadgen --workers 2's p99 <= floor + this
TARGET_CLIENT = "loadgen --workers 2"


@dataclass(frozen=True)
class Client:
    """One client: loadgen with a worker count, vllm bench serve, or the bare floor client."""

    name: str
    workers: int = 0  # loadgen's
    kind: str = "loadgen"  # "loadgen", "vllm" or "bare"


@dataclass(frozen=True)
class Row:
    """One client at one concurrency: its errors against the server, the floor before it (ms).

    A row of the medians table holds the medians of its runs' figures, and their failures summed.
    """

    concurrency: int
    client: str
    requests: int
    lost: int  # requests that failed, or succeeded without a server record
    ttft_p50: float  # signed TTFT error
    ttft_p99: float
    gap_p50: float  # absolute event-gap error
    gap_p99: float
    send_leg_p99: float  # the TTFT error's first half: client send stamp to the mock's handler
    delivery_p99: float  # its second: the mock's write to the client's read, every event
    timer_p99: float  # the floor just before the run
    datagram_p99: float
    verdict: str = ""  # loadgen's own last line; empty for vllm and for medians

    @property
    def floor_p99(self) -> float:
        """The floor: the larger of the timer and datagram wake-up p99s."""
        return max(self.timer_p99, self.datagram_p99)


# Row's figures, each of which the medians table takes the median of.
FIGURES = (
    *("ttft_p50", "ttft_p99", "gap_p50", "gap_p99"),
    *("send_leg_p99", "delivery_p99", "timer_p99", "datagram_p99"),
)


def make_row(
    concurrency: int, client: str, comparison: Comparison, floor: WakeFloor, verdict: str
) -> Row:
    """One run's row from its join with the server's records and the floor measured before it."""
    ttft, gap = error_stats(comparison)
    return Row(
        concurrency=concurrency,
        client=client,
        requests=comparison.requests,
        lost=comparison.failed + comparison.unrecorded,
        ttft_p50=ttft.p50_ms,
        ttft_p99=ttft.p99_ms,
        gap_p50=gap.p50_ms,
        gap_p99=gap.p99_ms,
        send_leg_p99=stats_ms(comparison.send_leg_s).p99_ms,
        delivery_p99=stats_ms(comparison.delivery_s).p99_ms,
        timer_p99=floor.timer_p99_ms(),
        datagram_p99=floor.datagram_p99_ms(),
        verdict=verdict,
    )


def medians(rows: list[Row]) -> list[Row]:
    """One row per (concurrency, client), in first-seen order: each figure's median over runs."""
    groups: dict[tuple[int, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.concurrency, row.client), []).append(row)
    out = []
    for (concurrency, client), runs in groups.items():
        values = {name: float(np.median([getattr(r, name) for r in runs])) for name in FIGURES}
        requests, lost = runs[0].requests, sum(r.lost for r in runs)
        out.append(Row(concurrency, client, requests, lost, **values))
    return out


def run_vllm(
    vllm_python: Path,
    url: str,
    tokenizer: Path,
    step: int,
    concurrency: int,
    request_rate: float,
    num_prompts: int,
    args: argparse.Namespace,
    work_dir: Path,
    timeout_s: float,
) -> tuple[dict, str]:
    """Run `vllm bench serve` once; return its detailed result and its request-id prefix."""
    prefix = f"vllm-{step}-"
    result_dir = work_dir / f"step-{step}"
    command = [
        str(vllm_python), str(VLLM_DRIVER),
        "--base-url", url, "--backend", "openai", "--endpoint", "/v1/completions",
        "--model", MOCK_MODEL_NAME, "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
        "--num-prompts", str(num_prompts), "--request-rate", str(request_rate),
        "--max-concurrency", str(concurrency), "--request-id-prefix", prefix,
        "--save-result", "--save-detailed", "--result-dir", str(result_dir),
        "--result-filename", "step.json", "--disable-tqdm",
    ]  # fmt: skip
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    log_path = work_dir / f"step-{step}-vllm.log"
    with log_path.open("w") as log:
        try:
            code = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work_dir,
                timeout=timeout_s,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            raise CalibrationError(
                f"{VLLM} at concurrency {concurrency} did not finish in {timeout_s:.0f} s"
            ) from None
    if code != 0:
        last = (log_path.read_text().strip().splitlines() or ["no output"])[-1]
        raise CalibrationError(
            f"{VLLM} at concurrency {concurrency} failed (exit {code}): {last} (log: {log_path})"
        )
    return json.loads((result_dir / "step.json").read_text()), prefix


def run_client(
    url: str,
    step: int,
    concurrency: int,
    request_rate: float,
    num_prompts: int,
    workers: int,
    input_len: int,
    output_len: int,
    work_dir: Path,
    timeout_s: float,
) -> tuple[dict, str]:
    """Run ``loadgen run`` in its own process, as the other clients run; return its detailed
    result and request-id prefix."""
    prefix = f"calib-{step}-"
    result_dir = work_dir / f"step-{step}"
    command = [
        *(sys.executable, "-m", "loadgen", "run", "--base-url", url, "--model", MOCK_MODEL_NAME),
        *("--workers", str(workers), "--max-concurrency", str(concurrency)),
        *("--request-rate", str(request_rate)),
        *("--num-prompts", str(num_prompts)),
        *("--random-input-len", str(input_len), "--random-output-len", str(output_len)),
        *("--request-id-prefix", prefix, "--save-result", "--save-detailed"),
        *("--result-dir", str(result_dir), "--result-filename", "step.json", "--disable-tqdm"),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CalibrationError(
            f"loadgen run at concurrency {concurrency} did not finish in {timeout_s:.0f} s"
        ) from None
    if done.returncode != 0:
        raise CalibrationError(
            f"loadgen run at concurrency {concurrency} failed (exit {done.returncode}): "
            f"{_last_line(done.stderr or done.stdout)}"
        )
    try:
        return json.loads((result_dir / "step.json").read_text()), prefix
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"cannot read the result of loadgen run: {exc}") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def run_bare(
    url: str,
    step: int,
    concurrency: int,
    request_rate: float,
    num_prompts: int,
    args: argparse.Namespace,
    work_dir: Path,
    timeout_s: float,
) -> tuple[dict, str]:
    """Run the bare floor client (bare_client.py) once; its result and request-id prefix."""
    prefix = f"bare-{step}-"
    result_path = work_dir / f"step-{step}-bare.json"
    command = [
        sys.executable, str(BARE_CLIENT), url, str(concurrency), str(request_rate),
        str(num_prompts), str(args.input_len), str(args.output_len), prefix, str(result_path),
        MOCK_MODEL_NAME,
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CalibrationError(
            f"{BARE} at concurrency {concurrency} did not finish in {timeout_s:.0f} s"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CalibrationError(f"{BARE} at concurrency {concurrency} failed: {last}")
    return json.loads(result_path.read_text()), prefix


def measure_step(
    concurrency: int,
    clients: list[Client],
    server: RecordingServer,
    url: str,
    tokenizer: Path,
    first_step: int,
    args: argparse.Namespace,
    work_dir: Path,
    burst: bool = False,
) -> tuple[list[Row], list[Shares]]:
    """Every client once at ``concurrency``, each after a fresh measurement of the floor
    (``burst``: the closed loop most runs are, every stream sent at t0 at rate inf)."""
    num_prompts, request_rate, timeout_s = step_load(
        concurrency, args.rounds, 0.0, args.itl_ms, args.output_len
    )
    if burst:
        request_rate = math.inf
    mode = f"{'burst' if burst else 'paced'} C={concurrency}"
    rows, split = [], []
    for offset, client in enumerate(clients):
        step = first_step + offset
        floor = measure_floor(args.floor_seconds)
        if client.kind == "loadgen":
            result, prefix = run_client(
                url, step, concurrency, request_rate, num_prompts, client.workers,
                args.input_len, args.output_len, work_dir, timeout_s,
            )  # fmt: skip
        elif client.kind == "bare":
            result, prefix = run_bare(
                url, step, concurrency, request_rate, num_prompts, args, work_dir, timeout_s
            )
        else:
            result, prefix = run_vllm(
                args.vllm_python, url, tokenizer, step, concurrency, request_rate, num_prompts,
                args, work_dir, timeout_s,
            )  # fmt: skip
        server.check_alive()
        comparison = compare(ClientRun.from_result(result), server.records(), prefix)
        verdict = str(result.get("loadgen", {}).get("verdict", "")) if client.workers else ""
        rows.append(make_row(concurrency, client.name, comparison, floor, verdict))
        split.append(shares(mode, client.name, comparison, result))
        for line in notes(concurrency, comparison):
            print(f"{line} [{client.name}]", flush=True)
    return rows, split


HEADER = (
    f"{'streams':>7}  {'client':<20} {'requests':>8} {'lost':>4}  "
    f"{'TTFT error p50 / p99':>19} {'/ vllm':>6}  {'gap |error| p50 / p99':>21} {'/ vllm':>6}  "
    f"{'p99 send leg, delivery':>22}  {'floor p99 timer, datagram':>25}"
)


def _ratio(ours: float, theirs: float | None) -> str:
    if theirs is None or not theirs > 0:
        return "-"
    return f"{ours / theirs:.3f}"


def format_rows(rows: list[Row]) -> list[str]:
    """The table's lines: one per row, with loadgen's p99s over vllm's at the same concurrency."""
    vllm = {row.concurrency: row for row in rows if row.client == VLLM}
    lines = []
    for row in rows:
        theirs = vllm.get(row.concurrency) if row.client != VLLM else None
        ttft_ratio = _ratio(row.ttft_p99, theirs.ttft_p99 if theirs else None)
        gap_ratio = _ratio(row.gap_p99, theirs.gap_p99 if theirs else None)
        lines.append(
            f"{row.concurrency:>7}  {row.client:<20} {row.requests:>8} {row.lost:>4}  "
            f"{row.ttft_p50:9.2f} / {row.ttft_p99:7.2f} {ttft_ratio:>6}  "
            f"{row.gap_p50:11.2f} / {row.gap_p99:7.2f} {gap_ratio:>6}  "
            f"{row.send_leg_p99:12.2f}, {row.delivery_p99:8.2f}  "
            f"{row.timer_p99:15.2f}, {row.datagram_p99:8.2f}"
        )
    return lines


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def target_lines(rows: list[Row]) -> list[str]:
    """One line per concurrency: whether loadgen --workers 2 met its target there."""
    lines = []
    for concurrency in sorted({row.concurrency for row in rows}):
        step = [row for row in rows if row.concurrency == concurrency]
        ours = next((row for row in step if row.client == TARGET_CLIENT), None)
        vllm = next((row for row in step if row.client == VLLM), None)
        if ours is None:
            continue
        lost = "" if not ours.lost else f"; {ours.lost} requests failed or went unrecorded: FAIL"
        if concurrency >= RATIO_FROM:
            if vllm is None:
                lines.append(f"  {concurrency} streams: no {VLLM} run, no ratio target")
                continue
            ttft_bound, gap_bound = RATIO_TARGET * vllm.ttft_p99, RATIO_TARGET * vllm.gap_p99
            rule = f"p99 <= {RATIO_TARGET:g} x {VLLM}'s"
        else:
            ttft_bound = gap_bound = ours.floor_p99 + FLOOR_MARGIN_MS
            rule = f"p99 <= floor {ours.floor_p99:.2f} + {FLOOR_MARGIN_MS:g} ms"
        ttft = f"TTFT {ours.ttft_p99:.2f} <= {ttft_bound:.2f} ms"
        gaps = f"gaps {ours.gap_p99:.2f} <= {gap_bound:.2f} ms"
        lines.append(
            f"  {concurrency} streams, {TARGET_CLIENT} {rule}: "
            f"{ttft} {_verdict(ours.ttft_p99 <= ttft_bound)}, "
            f"{gaps} {_verdict(ours.gap_p99 <= gap_bound)}{lost}"
        )
        bare = next((row for row in step if row.client == BARE), None)
        if bare is not None:
            lines.append(
                f"    the {BARE} in the same step: TTFT p99 {bare.ttft_p99:.2f} ms "
                f"(send leg {bare.send_leg_p99:.2f}), gaps p99 {bare.gap_p99:.2f} ms; "
                f"{TARGET_CLIENT} - bare: TTFT {ours.ttft_p99 - bare.ttft_p99:+.2f}, "
                f"gaps {ours.gap_p99 - bare.gap_p99:+.2f} ms"
            )
    return lines


def parse_args() -> argparse.Namespace:
    """The script's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency",
        type=_concurrencies_or_none,
        default=parse_concurrencies("64,256,1024"),
        help="comma list of concurrent streams, paced (default 64,256,1024; 'none': no paced step)",
    )
    parser.add_argument(
        "--burst",
        type=_concurrencies_or_none,
        default=parse_concurrencies("16,64"),
        help="comma list of closed-loop bursts: --max-concurrency C at rate inf, C requests at "
        "t0 (default 16,64; 'none': no burst step)",
    )
    parser.add_argument("--skip-vllm", action="store_true", help="no vllm bench serve")
    parser.add_argument(
        "--skip-bare", action="store_true", help="no bare floor client (bare_client.py)"
    )
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON)
    parser.add_argument("--itl-ms", type=float, default=50.0, help="the mock's ITL")
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=64, help="token events per request")
    parser.add_argument("--rounds", type=float, default=3.0, help="requests per stream")
    parser.add_argument(
        "--floor-seconds", type=float, default=3.0, help="floor measurement before each client"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each client per step (medians are shown)"
    )
    parser.add_argument("--keep", type=Path, help="keep the records and results in this folder")
    return parser.parse_args()


def _concurrencies_or_none(text: str) -> list[int]:
    return [] if text.strip().lower() == "none" else parse_concurrencies(text)


def main() -> None:
    """Run every client at every concurrency against one recording mock; print the table."""
    args = parse_args()
    if args.itl_ms <= 0:
        raise SystemExit("--itl-ms must be above 0: the streams must be paced to overlap")
    clients = [Client("loadgen --workers 1", 1), Client(TARGET_CLIENT, 2)]
    if not args.skip_vllm:
        if not args.vllm_python.exists():
            raise SystemExit(
                f"{args.vllm_python} not found: install vllm bench serve as "
                "scripts/bench/README.md says, or pass --skip-vllm"
            )
        clients.append(Client(VLLM, kind="vllm"))
    if not args.skip_bare:
        clients.append(Client(BARE, kind="bare"))
    work_dir = args.keep or Path(tempfile.mkdtemp(prefix="loadgen-accuracy-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer_dir(work_dir / "tokenizer")
    stream_s = args.output_len * args.itl_ms / 1000
    print(machine_line("accuracy side by side"))
    print(
        f"recording mock: ITL {args.itl_ms:g} ms, {args.input_len} input / {args.output_len} "
        f"output tokens; Poisson arrivals at streams / {stream_s:g} s, {args.rounds:g} x streams "
        f"requests; errors are client − server in ms; '/ vllm': the p99 over {VLLM}'s; floor: "
        f"an idle process's wake-up p99, measured just before each client",
        flush=True,
    )
    server = RecordingServer(work_dir, 0.0, args.itl_ms)
    rows: list[Row] = []
    split: list[Shares] = []
    verdicts: list[tuple[str, str, str]] = []
    steps = [(c, False) for c in args.concurrency] + [(c, True) for c in args.burst]
    try:
        url = server.start()
        print(HEADER, flush=True)
        step = 0
        for concurrency, burst in steps:
            if burst:
                print(f"burst: --max-concurrency {concurrency} at rate inf", flush=True)
            # Each repetition runs every client, so the clients of a step share the conditions.
            for _ in range(args.repeat):
                runs, parts = measure_step(
                    concurrency, clients, server, url, tokenizer, step, args, work_dir, burst
                )
                step += len(clients)
                print("\n".join(format_rows(runs)), flush=True)
                rows += [run for run in runs if not burst]  # the targets are the paced steps'
                split += parts
                verdicts += [(parts[0].mode, run.client, run.verdict) for run in runs]
        server.stop()
    except (CalibrationError, FloorError) as exc:
        raise SystemExit(str(exc)) from None
    finally:
        server.kill()
    print("loadgen's verdicts:")
    for mode, client, verdict in verdicts:
        if verdict:
            print(f"  {mode}, {client}: {verdict}")
    summary = medians(rows)
    if args.repeat > 1:
        print(f"medians of {args.repeat} runs:")
        print(HEADER)
        print("\n".join(format_rows(summary)))
    print("Targets:")
    print("\n".join(target_lines(summary)))
    print(f"Shares{f' (medians of {args.repeat} runs)' if args.repeat > 1 else ''}:")
    print(SHARES_LEGEND)
    print(
        "\n".join(["  " + line for line in [SHARES_HEADER, *format_shares(median_shares(split))]])
    )
    if args.keep is None:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
