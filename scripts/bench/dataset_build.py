"""Dataset build: loadgen's `random` dataset beside the tokenizer's own floor, vLLM, and the cache.

In one run, for N random prompts of L tokens (default 10,000 x 1,024, seed 0, output 128):

- **cold build**: `loadgen run`'s path (`sample_dataset_cached`) with an empty cache, in a fresh
  process with a freshly loaded tokenizer; the build itself, and storing it in the cache;
- **floor**: one `encode_batch` of the final prompts by another freshly loaded tokenizer (also
  `encode_batch_fast`, which skips offsets), in the same process;
- **warm**: a new process reading the dataset back as a run does (tokenizer digest, key, read,
  checksum), and checking it is the built one;
- **whole-text rounds**: the build as loadgen made it before issue 15 (every round decodes and
  re-encodes whole texts; still the path for tokenizers whose encoding is not known to be local);
- **vLLM**: vLLM 0.33's `RandomDataset.sample` with the same tokenizer and options, when
  /work/vllm-venv (or --vllm-python) exists.

Cold build, floor and warm are medians of --repeat runs; whole-text rounds and vLLM run once
(--skip-whole, --skip-vllm leave them out). Targets: cold build <= 1.5 x the floor, warm < 1 s.
Run it under the shared lock:

    flock /tmp/loadgen-bench.lock python scripts/bench/dataset_build.py --tokenizer DIR

DIR holds tokenizer.json (and tokenizer_config.json for vLLM); without --tokenizer the
repository's embedded tokenizer (loadgen/data) is used, and the output says which.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, make_tokenizer_dir

VLLM_PYTHON = Path("/work/vllm-venv/bin/python")
COLD_TARGET = 1.5  # cold build / floor
WARM_TARGET_S = 1.0

VLLM_SNIPPET = """
import json, sys, time
from transformers import AutoTokenizer
from vllm.benchmarks.datasets import RandomDataset
path, n, input_len, output_len, seed = sys.argv[1], *map(int, sys.argv[2:6])
tok = AutoTokenizer.from_pretrained(path)
started = time.perf_counter()
reqs = RandomDataset(random_seed=seed).sample(tokenizer=tok, num_requests=n,
    input_len=input_len, output_len=output_len, range_ratio=0.0, prefix_len=0)
print(json.dumps({"seconds": time.perf_counter() - started,
                  "tokens": sum(r.prompt_len for r in reqs)}))
"""


def dataset_config(args: argparse.Namespace) -> object:
    """The RunConfig a `loadgen run` with these dataset flags makes."""
    from loadgen.config import RunConfig

    return RunConfig(
        dataset_name="random",
        num_prompts=args.num_prompts,
        random_input_len=args.input_len,
        random_output_len=args.output_len,
        seed=args.seed,
    )


def fingerprint(dataset: object) -> str:
    """A hash of the prompts, their lengths and output lengths."""
    digest = hashlib.sha256()
    for prompt in dataset.prompts:
        digest.update(prompt.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(dataset.prompt_lens.tobytes() + dataset.output_lens.tobytes())
    return digest.hexdigest()


def child(args: argparse.Namespace) -> None:
    """One measurement in this fresh process; prints its figures as one JSON line."""
    from loadgen.datasets import to_target
    from loadgen.datasets.sample import sample_dataset_cached
    from loadgen.text.tokenizer import LocalTokenizer, load_tokenizer

    config = dataset_config(args)
    if args.child == "whole":
        to_target.ByteLevelBPE.of = staticmethod(lambda codec: None)  # the pre-issue-15 path
        config = dataclasses.replace(config, dataset_cache=False)
    tokenizer = LocalTokenizer(load_tokenizer(args.tokenizer_file))
    started = time.perf_counter()
    outcome = sample_dataset_cached(config, tokenizer, directory=Path(args.cache_dir))
    total = time.perf_counter() - started
    figures = {
        "seconds": outcome.seconds,
        "total": total,
        "from_cache": outcome.from_cache,
        "fingerprint": fingerprint(outcome.dataset),
        "tokens": int(outcome.dataset.prompt_lens.sum()),
    }
    if args.child == "cold":
        prompts = outcome.dataset.prompts
        for method in ("encode_batch", "encode_batch_fast"):
            fresh = load_tokenizer(args.tokenizer_file)
            started = time.perf_counter()
            getattr(fresh, method)(prompts, add_special_tokens=False)
            figures[method] = time.perf_counter() - started
    print(json.dumps(figures))


def run_child(args: argparse.Namespace, mode: str, cache_dir: Path) -> dict:
    """This script in a fresh process measuring ``mode``."""
    command = [
        sys.executable, __file__, "--child", mode, "--tokenizer", args.tokenizer,
        "--num-prompts", str(args.num_prompts), "--input-len", str(args.input_len),
        "--output-len", str(args.output_len), "--seed", str(args.seed),
        "--cache-dir", str(cache_dir),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"dataset_build.py: the {mode} measurement failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_vllm(args: argparse.Namespace, python: Path, tokenizer_dir: Path) -> dict:
    """vLLM's RandomDataset timed in its own Python."""
    command = [
        str(python), "-c", VLLM_SNIPPET, str(tokenizer_dir), str(args.vllm_prompts),
        str(args.input_len), str(args.output_len), str(args.seed),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(label: str, values: list[float], unit: str = "s") -> str:
    """A table row: the median and every run."""
    runs = "  ".join(f"{value:.2f}" for value in values)
    return f"| {label} | {statistics.median(values):.2f} {unit} | {runs} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", help="directory with tokenizer.json (default: embedded)")
    parser.add_argument("--num-prompts", type=int, default=10_000)
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vllm-python", type=Path, default=VLLM_PYTHON)
    parser.add_argument("--vllm-prompts", type=int, help="prompts for vLLM (default: the same)")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--skip-whole", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.tokenizer_file = str(Path(args.tokenizer) / "tokenizer.json")
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="dataset-build-") as scratch:
        measure(args, Path(scratch))


def measure(args: argparse.Namespace, scratch: Path) -> None:
    """Every measurement, and the table."""
    if args.tokenizer is None:
        args.tokenizer = str(make_tokenizer_dir(scratch / "embedded"))
        which = f"the embedded tokenizer ({REPO / 'loadgen' / 'data' / 'tokenizer.json'})"
    else:
        which = f"the tokenizer in {args.tokenizer}"
    args.vllm_prompts = args.vllm_prompts or args.num_prompts

    print(
        f"{args.num_prompts:,} random prompts of {args.input_len:,} tokens (output "
        f"{args.output_len}, seed {args.seed}), with {which}; {os.cpu_count()} CPUs"
    )
    cold, warm = [], []
    for attempt in range(args.repeat):
        cache_dir = scratch / f"cache-{attempt}"
        cold.append(run_child(args, "cold", cache_dir))
        warm.append(run_child(args, "warm", cache_dir))
        if not warm[-1]["from_cache"] or warm[-1]["fingerprint"] != cold[-1]["fingerprint"]:
            sys.exit("dataset_build.py: the warm run did not read back the built dataset")
    whole = None if args.skip_whole else run_child(args, "whole", scratch / "unused")
    if whole is not None and whole["fingerprint"] != cold[0]["fingerprint"]:
        sys.exit("dataset_build.py: whole-text rounds built other prompts than the cold build")
    vllm = None
    if not args.skip_vllm and args.vllm_python.exists():
        vllm_dir = Path(args.tokenizer)
        if not (vllm_dir / "tokenizer_config.json").exists():
            vllm_dir = make_tokenizer_dir(scratch / "vllm-tokenizer")
        vllm = run_vllm(args, args.vllm_python, vllm_dir)

    build = [figures["seconds"] for figures in cold]
    floor = [figures["encode_batch"] for figures in cold]
    floor_fast = [figures["encode_batch_fast"] for figures in cold]
    store = [figures["total"] - figures["seconds"] for figures in cold]
    read = [figures["total"] for figures in warm]
    print("\n| step | median | runs |\n|---|---:|---|")
    print(row("loadgen cold build", build))
    print(row("... then storing it in the cache (digest, write)", store))
    print(row("floor: one `encode_batch` of the final prompts", floor))
    print(row("floor: one `encode_batch_fast` (no offsets)", floor_fast))
    print(row("loadgen warm: read back from the cache (digest, read, checksum)", read))
    if whole is not None:
        print(row("loadgen with whole-text rounds (before issue 15)", [whole["seconds"]]))
    if vllm is not None and "error" not in vllm:
        label = f"vLLM 0.33 `RandomDataset` ({args.vllm_prompts:,} prompts)"
        print(row(label, [vllm["seconds"]]))

    ratio = statistics.median(b / f for b, f in zip(build, floor, strict=True))
    ratio_fast = statistics.median(b / f for b, f in zip(build, floor_fast, strict=True))
    warm_s = statistics.median(read)
    print("\nratios (medians of the per-run ratios):")
    verdict = "met" if ratio <= COLD_TARGET else "MISSED"
    print(
        f"  cold build / floor (encode_batch):      {ratio:.2f}  target <= {COLD_TARGET}: {verdict}"
    )
    print(f"  cold build / floor (encode_batch_fast): {ratio_fast:.2f}")
    verdict = "met" if warm_s < WARM_TARGET_S else "MISSED"
    print(f"  warm read: {warm_s:.2f} s  target < {WARM_TARGET_S:.0f} s: {verdict}")
    if whole is not None:
        print(
            f"  whole-text rounds / cold build: {whole['seconds'] / statistics.median(build):.2f}"
        )
    if vllm is not None and "error" in vllm:
        print(f"  vLLM: not measured ({vllm['error']})")
    elif vllm is not None:
        per_prompt = vllm["seconds"] / args.vllm_prompts
        ours = statistics.median(build) / args.num_prompts
        print(f"  vLLM / cold build, per prompt: {per_prompt / ours:.1f}")
    else:
        print(f"  vLLM: not measured ({args.vllm_python} not found or --skip-vllm)")


if __name__ == "__main__":
    main()
