"""loadgen and `vllm bench serve` against every server personality of the mock, side by side.

For each personality (`loadgen mock-server --personality P`: vLLM, llama.cpp, SGLang, TGI and
OpenAI's chunk shapes, usage placement and connection habits, docs/servers.md), each backend
(completions and chat) and each concurrency, it starts a fresh mock and runs the same request
set with loadgen and, when /work/vllm-venv exists, with `vllm bench serve` (through
scripts/bench/vllm_bench_serve.py), with identical flags and tokenizer. It prints per run:
completed and failed requests, the client's input and output token totals beside the mock's
own counters for the run (`/mock/stats`, read before and after), median TTFT and ITL, the
connections the server accepted during the run, the requests loadgen re-sent on a stale
connection, and the seconds from the client's start to its first request.

    python scripts/bench/servers.py [--personalities vllm,llamacpp] [--num-prompts 1000]

The issue-12 target: 0 failed requests and exact token totals for loadgen on every
personality, where `vllm bench serve` fails some against llama.cpp's habit of closing every
connection after a stream.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from common import loadgen_command, machine_line, make_tokenizer_dir, mock_server

REPO = Path(__file__).resolve().parents[2]
VLLM_DRIVER = REPO / "scripts" / "bench" / "vllm_bench_serve.py"
DEFAULT_VLLM_PYTHON = Path("/work/vllm-venv/bin/python")
MODEL = "loadgen-mock"
PERSONALITIES = ("vllm", "llamacpp", "sglang", "tgi", "openai")
ENDPOINTS = {
    "completions": ("openai", "/v1/completions"),
    "chat": ("openai-chat", "/v1/chat/completions"),
}


@dataclass
class Row:
    """One client's run against one personality."""

    client: str
    personality: str
    backend: str
    concurrency: int
    completed: int
    failed: int
    input_tokens: int
    server_input: int
    output_tokens: int
    server_output: int
    ttft_ms: float
    itl_ms: float
    server_connections: int
    resent: int | str
    start_s: float

    def line(self) -> str:
        """The row as the table prints it."""
        exact_in = "=" if self.input_tokens == self.server_input else "≠"
        exact_out = "=" if self.output_tokens == self.server_output else "≠"
        return (
            f"{self.client:<8} {self.personality:<9} {self.backend:<11} {self.concurrency:>4} "
            f"{self.completed:>5} {self.failed:>5} "
            f"{self.input_tokens:>7}{exact_in}{self.server_input:<7} "
            f"{self.output_tokens:>6}{exact_out}{self.server_output:<6} "
            f"{self.ttft_ms:>7.2f} {self.itl_ms:>6.2f} {self.server_connections:>6} "
            f"{self.resent!s:>6} {self.start_s:>6.2f}"
        )


HEADER = (
    f"{'client':<8} {'server':<9} {'backend':<11} {'conc':>4} {'done':>5} {'fail':>5} "
    f"{'input client=server':>19} {'output cl=srv':>13} {'TTFT50':>7} {'ITL50':>6} "
    f"{'conns':>6} {'resent':>6} {'start':>6}"
)


def mock_stats(url: str) -> dict:
    """The mock's own counters."""
    with urllib.request.urlopen(f"{url}/mock/stats", timeout=10) as response:
        return json.load(response)


def client_command(client: str, vllm_python: Path) -> list[str]:
    """The command line of a client, before the benchmark flags."""
    if client == "vllm":
        return [str(vllm_python), str(VLLM_DRIVER)]
    return [*loadgen_command(), "run", "--workers", "2"]


def run_one(
    client: str,
    personality: str,
    backend: str,
    concurrency: int,
    args: argparse.Namespace,
    tokenizer: Path,
    out_dir: Path,
) -> Row:
    """Start a mock of ``personality`` and run one client against it."""
    stem = f"{client}-{personality}-{backend}-c{concurrency}"
    backend_name, endpoint = ENDPOINTS[backend]
    mock_args = ("--personality", personality, "--ttft-ms", str(args.ttft_ms))
    with mock_server(out_dir / f"{stem}.mock.log", args.itl_ms, mock_args) as (url, _):
        before = mock_stats(url)
        cmd = [
            *client_command(client, args.vllm_python),
            "--base-url", url,
            "--model", MODEL,
            "--tokenizer", str(tokenizer),
            "--backend", backend_name,
            "--endpoint", endpoint,
            "--dataset-name", "random",
            "--random-input-len", str(args.input_len),
            "--random-output-len", str(args.output_len),
            "--ignore-eos",
            "--num-prompts", str(args.num_prompts),
            "--max-concurrency", str(concurrency),
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
            "--result-dir", str(out_dir),
            "--result-filename", f"{stem}.json",
        ]  # fmt: skip
        env = os.environ | {
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OPENAI_API_KEY": "sk-bench",  # both clients send it; the openai personality needs one
        }
        log_path = out_dir / f"{stem}.log"
        with log_path.open("w") as log:
            launched_s = time.perf_counter()
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        after = mock_stats(url)
    result_path = out_dir / f"{stem}.json"
    if not result_path.exists():
        tail = "\n".join(log_path.read_text().strip().splitlines()[-12:])
        raise SystemExit(f"{client} wrote no result (exit {rc}): {' '.join(cmd)}\n{tail}")
    result = json.loads(result_path.read_text())
    extra = result.get("loadgen", {})
    connections = after["connections"]["accepted"] - before["connections"]["accepted"]
    return Row(
        client=client,
        personality=personality,
        backend=backend,
        concurrency=concurrency,
        completed=result["completed"],
        failed=result["failed"],
        input_tokens=result["total_input_tokens"],
        server_input=after["prompt_tokens"] - before["prompt_tokens"],
        output_tokens=result["total_output_tokens"],
        server_output=after["completion_tokens"] - before["completion_tokens"],
        ttft_ms=result["median_ttft_ms"],
        itl_ms=result["median_itl_ms"],
        server_connections=connections,
        resent=extra.get("resent_on_stale_connection", "-"),
        # start_times are perf_counter instants (CLOCK_MONOTONIC, shared with this process).
        start_s=min(result["start_times"]) - launched_s,
    )


def main() -> None:
    """Run the matrix and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personalities", default=",".join(PERSONALITIES))
    parser.add_argument("--backends", default="completions,chat")
    parser.add_argument("--concurrency", default="4,16")
    parser.add_argument("--num-prompts", type=int, default=1000)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--ttft-ms", type=float, default=10.0)
    parser.add_argument("--itl-ms", type=float, default=1.0)
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON)
    parser.add_argument("--no-vllm", action="store_true", help="run loadgen only")
    parser.add_argument("--keep", type=Path, help="keep logs and result files here")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    clients = ["loadgen"]
    if not args.no_vllm and args.vllm_python.exists():
        clients.append("vllm")
    elif not args.no_vllm:
        print(f"note: {args.vllm_python} not found; `vllm bench serve` is not run")
    out_dir = args.keep or Path(tempfile.mkdtemp(prefix="servers-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer_dir(out_dir / "tokenizer")
    print(machine_line("servers.py: loadgen and vllm bench serve against each mock personality"))
    print(
        f"{args.num_prompts} requests of {args.input_len} prompt and {args.output_len} output "
        f"tokens, mock TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms; loadgen --workers 2"
    )
    print(HEADER)
    rows = []
    for personality in args.personalities.split(","):
        for backend in args.backends.split(","):
            for concurrency in map(int, args.concurrency.split(",")):
                for client in clients:
                    row = run_one(
                        client, personality, backend, concurrency, args, tokenizer, out_dir
                    )
                    rows.append(row)
                    print(row.line(), flush=True)
    bad = [r for r in rows if r.client == "loadgen" and (r.failed or "≠" in r.line())]
    print(
        f"loadgen: {sum(r.failed for r in rows if r.client == 'loadgen')} failed requests, "
        f"{len(bad)} runs with failures or token totals unlike the server's"
    )
    if "vllm" in clients:
        failed = sum(r.failed for r in rows if r.client == "vllm")
        print(f"vllm bench serve: {failed} failed requests in all")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    if not args.keep:
        print(f"logs and results: {out_dir}")


if __name__ == "__main__":
    main()
