"""A loadgen sweep against a real llama.cpp `llama-server`: are the points served from its cache?

Starts `llama-server --metrics` (4 slots, loopback) on a given GGUF model and runs two loadgen
campaigns over `--max-concurrency 1,2,4` with repeats: one as loadgen runs them by default (each
run draws its own prompts) and one with `--same-prompts`. A thread reads the server's own
`/metrics` every 50 ms; each run's window comes from its result JSON (`start_times` and
`latencies` are on the coordinator's `perf_counter`, the machine's monotonic clock, as the
thread's stamps are), and the run's share of `llamacpp:prompt_tokens_total` (the prompt tokens
the server prefilled; tokens it found in a slot's cache are not counted) is the counter's value
in the idle gap after the run less its value before. Printed per run: the prompt tokens loadgen
sent and counted, those the server prefilled, what the answers said was cached
(`loadgen.prefix_cache`, from `timings.cache_n`/`cached_tokens`), and the throughput.

Then one single run with `--server-metrics-interval 0.25` and its records file: the server's
series loadgen scraped, as `loadgen.records.read.read_records` reads them back, and the names
the server's page has that loadgen/server/metric_names.py does not map.

    python scripts/bench/llamacpp_sweep.py --server-bin BUILD/bin/llama-server --model M.gguf \
        --tokenizer TOKENIZER_DIR                      # about 2 minutes with a tiny model

No llama-server at `--server-bin`: prints why and exits 0 (nothing measured). The model can be
scripts/bench/tiny_gguf.py's (random weights, a real tokenizer).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import REPO
from prometheus_client.parser import text_string_to_metric_families

from loadgen.records.read import read_records
from loadgen.server.metric_names import COMMON_NAMES

DEFAULT_BIN = Path("/work/llamacpp/build/bin/llama-server")
DEFAULT_MODEL = Path("/work/llamacpp/tiny-llama3.gguf")
DEFAULT_TOKENIZER = Path("/work/llamacpp/tok/package/models")
POLL_S = 0.05
PROMPT = "llamacpp:prompt_tokens_total"
PREDICTED = "llamacpp:tokens_predicted_total"
PROCESSING = "llamacpp:requests_processing"


@dataclass
class Sample:
    """One read of the server's counters: when it was asked and answered (perf_counter s)."""

    sent_s: float
    got_s: float
    values: dict[str, float]


def free_port() -> int:
    """A free loopback port for the server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metrics_page(base: str) -> dict[str, float]:
    """The server's /metrics as name -> value (unlabelled samples; llama.cpp has no labels)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {
        sample.name: float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


class Poller(threading.Thread):
    """Reads /metrics every POLL_S until stopped."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.samples: list[Sample] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            sent = time.perf_counter()
            try:
                values = metrics_page(self.base)
            except OSError:
                values = None
            if values is not None:
                self.samples.append(Sample(sent, time.perf_counter(), values))
            self.stopped.wait(POLL_S)

    def value_before(self, name: str, t_s: float) -> Sample | None:
        """The last sample answered before ``t_s``."""
        found = [s for s in self.samples if s.got_s < t_s]
        return found[-1] if found else None

    def idle_after(self, start_s: float, end_s: float) -> Sample | None:
        """The last sample asked after ``start_s`` and answered before ``end_s`` with no
        request in the server: the counters once a run's requests are all released."""
        found = [
            s
            for s in self.samples
            if start_s < s.sent_s and s.got_s < end_s and s.values.get(PROCESSING, 1) == 0
        ]
        return found[-1] if found else None


def start_server(args: argparse.Namespace, port: int, log: Path) -> subprocess.Popen[bytes]:
    """llama-server on loopback with --metrics and 4 slots; returns once /health says 200."""
    command = [
        str(args.server_bin), "-m", str(args.model), "--host", "127.0.0.1", "--port", str(port),
        "--metrics", "-np", "4", "-c", str(4 * args.slot_ctx), "-t", str(args.threads),
        "--no-webui", "--alias", "tiny-llama3",
    ]  # fmt: skip
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"error: llama-server exited ({server.returncode}); its log: {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.5)
    server.kill()
    sys.exit(f"error: llama-server did not become healthy in 180 s; its log: {log}")


def loadgen(args: list[str]) -> str:
    """Run `loadgen ...` from this checkout; its stdout, its warnings printed (stops the
    script when it fails)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "loadgen", *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(
            f"error: loadgen {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    for line in dict.fromkeys(done.stderr.splitlines()):
        if "warning" in line.lower():
            print(f"  loadgen said: {line}")
    return done.stdout


def sweep(
    args: argparse.Namespace, base: str, out: Path, same: bool
) -> tuple[list[dict[str, Any]], float]:
    """One campaign: each run's result JSON, in the order the runs were made, and when it
    ended (perf_counter s)."""
    flags = [
        "run", "--base-url", base, "--tokenizer", str(args.tokenizer), "--seed", "0",
        "--max-concurrency", args.concurrency, "--num-runs", str(args.num_runs),
        "--num-prompts", str(args.num_prompts), "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len), "--ignore-eos", "--workers", "1",
        "--save-result", "--save-detailed", "--result-dir", str(out), "--disable-tqdm",
    ]  # fmt: skip
    print(f"$ loadgen {' '.join(flags[1:] + (['--same-prompts'] if same else []))}", flush=True)
    text = loadgen(flags + (["--same-prompts"] if same else []))
    ended = time.perf_counter()
    print(
        "\n".join(
            line for line in text.splitlines() if line.startswith(("[", "max_conc", "warning"))
        )
    )
    results = [json.loads(p.read_text()) for p in out.glob("campaign-*/*/*-run=*.json")]
    return sorted(results, key=lambda r: min(r["start_times"])), ended


def table(title: str, made: tuple[list[dict[str, Any]], float], poller: Poller) -> list[str]:
    """Per run: loadgen's prompt tokens, the server's prefilled ones, the answers' cached ones."""
    lines = [
        title,
        f"{'point':<10} {'run':>3} {'seed':>11} {'requests':>8} {'sent tok':>9} "
        f"{'prefilled':>9} {'cache_n':>8} {'hit %':>6} {'srv gen':>7} {'lg out':>6} {'req/s':>7} "
        f"{'p50 TTFT ms':>11}",
    ]
    results, ended = made
    starts = [min(r["start_times"]) for r in results] + [ended]
    for i, result in enumerate(results):
        run = sum(1 for r in results[:i] if r["max_concurrency"] == result["max_concurrency"])
        start, next_start = starts[i], starts[i + 1]
        end = max(s + e for s, e in zip(result["start_times"], result["latencies"], strict=True))
        before, after = poller.value_before(PROMPT, start), poller.idle_after(end, next_start)
        if before is None or after is None:
            prefilled = predicted = "n/a"
        else:
            prefilled = f"{after.values[PROMPT] - before.values[PROMPT]:.0f}"
            produced = after.values[PREDICTED] - before.values[PREDICTED]
            predicted = f"{produced:.0f}"
        cache = result["loadgen"].get("prefix_cache") or {}
        hit = "n/a" if cache.get("hit_rate") is None else f"{cache['hit_rate']:.1f}"
        lines.append(
            f"c={result['max_concurrency']:<8} {run:>3} {result['loadgen']['seed']:>11} "
            f"{result['completed']:>8} {result['total_input_tokens']:>9} {prefilled:>9} "
            f"{cache.get('hit_tokens', 'n/a'):>8} {hit:>6} "
            f"{predicted:>7} {result['total_output_tokens']:>6} "
            f"{result['request_throughput']:>7.2f} {result['median_ttft_ms']:>11.1f}"
        )
    return lines


def series_run(
    args: argparse.Namespace, base: str, out: Path, port_metrics: dict[str, float]
) -> list[str]:
    """One run whose records keep the scraped series; the series and the unmapped names."""
    flags = [
        "run", "--base-url", base, "--tokenizer", str(args.tokenizer), "--seed", "1",
        "--max-concurrency", "8", "--request-rate", "6", "--num-prompts", str(4 * args.num_prompts),
        "--random-input-len", str(args.input_len), "--random-output-len", str(4 * args.output_len),
        "--ignore-eos", "--workers", "1", "--server-metrics-interval", "0.25",
        "--save-result", "--result-dir", str(out), "--result-filename", "series.json", "-q",
    ]  # fmt: skip
    print(f"$ loadgen {' '.join(flags[1:])}", flush=True)
    loadgen(flags)
    records = read_records(str(out / "series.records.arrow"))
    lines = ["series loadgen scraped (read back from the records file):"]
    for series in records.server_metrics or []:
        values = series.values
        lines.append(
            f"  {series.name:<40} {len(values):>3} samples  first {values[0]:<10g} "
            f"min {values.min():<10g} max {values.max():<10g} last {values[-1]:g}"
        )
    if not records.server_metrics:
        lines.append("  none (the records file has no server series)")
    generated = [s for s in records.server_metrics or [] if s.name == "generation_tokens"]
    if generated and records.end is not None:
        # --ignore-eos: the server predicts exactly max_tokens per request (loadgen's own count
        # re-tokenises the text, so it may differ by a token or two a request).
        requests = len(records.records)
        asked = requests * 4 * args.output_len
        series = generated[0]
        first_ms, last_ms = series.t_ns[0] / 1e6, series.t_ns[-1] / 1e6
        lines.append(
            f"generation_tokens grew by {series.values[-1] - series.values[0]:g} from the "
            f"first scrape ({first_ms:+.1f} ms from t0) to the last ({last_ms:+.1f} ms); the "
            f"run's {requests} requests asked {asked} (--ignore-eos)"
        )
    names = sorted({n for n in port_metrics if n.startswith("llamacpp:")})
    unmapped = [n for n in names if n not in COMMON_NAMES]
    lines.append(f"llama.cpp's /metrics exports: {', '.join(names)}")
    lines.append(f"of them kept under their own name (not in COMMON_NAMES): {', '.join(unmapped)}")
    missing = [n for n in COMMON_NAMES if n.startswith("llamacpp:") and n not in port_metrics]
    lines.append(f"COMMON_NAMES' llamacpp: names this server lacks: {', '.join(missing) or 'none'}")
    return lines


def main() -> None:
    """Start the server, run both sweeps and the series run, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-bin", type=Path, default=DEFAULT_BIN)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--num-runs", type=int, default=2)
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--slot-ctx", type=int, default=2048, help="context per slot")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not args.server_bin.is_file():
        print(f"skipped: no llama-server at {args.server_bin} (build llama.cpp's server, "
              "`cmake --build build --target llama-server`, and pass --server-bin)")  # fmt: skip
        return
    for path, what in ((args.model, "model"), (args.tokenizer / "tokenizer.json", "tokenizer")):
        if not path.exists():
            sys.exit(f"error: no {what} at {path}")
    with tempfile.TemporaryDirectory(prefix="llamacpp-sweep-") as tmp:
        work = Path(tmp)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_server(args, port, work / "server.log")
        try:
            version = subprocess.run(
                [str(args.server_bin), "--version"], capture_output=True, text=True
            )
            print(f"llama-server: {(version.stdout + version.stderr).strip().splitlines()[0]}")
            poller = Poller(base)
            poller.start()
            fresh = sweep(args, base, work / "fresh", same=False)
            same = sweep(args, base, work / "same", same=True)
            page = metrics_page(base)
            series = series_run(args, base, work / "series", page)
            poller.stopped.set()
            poller.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
        print()
        print("\n".join(table("fresh prompts per run (loadgen's default):", fresh, poller)))
        print()
        print("\n".join(table("--same-prompts:", same, poller)))
        print()
        print("\n".join(series))
        print(
            "\nsent tok: prompt tokens loadgen counted; prefilled: the server's "
            f"{PROMPT} over the run (tokens found in a slot's cache are not counted); cache_n: the "
            "answers' cached tokens summed (loadgen.prefix_cache); srv gen: the server's "
            f"{PREDICTED} over the run; lg out: loadgen's output tokens (its own count)"
        )


if __name__ == "__main__":
    main()
