"""Dataset parity: do loadgen's samplers send the same prompts as `vllm bench serve`?

For the `sharegpt` and `custom` (with --skip-chat-template) datasets it samples the same file
with the same seed twice: once with upstream's own dataset classes, run by the Python of a
`vllm` install (scripts/bench/README.md: "vllm bench serve, installed light", plus pandas for
`custom`), and once with loadgen's. It prints, per case, how many requests each gave and how
many differ in prompt text (MD5), prompt_len or output length. Needs a local tokenizer directory
(tokenizer.json and tokenizer_config.json) and a ShareGPT JSON file; the custom JSONL file is
made from the ShareGPT prompts.

Run: python scripts/bench/dataset_parity.py --vllm-python /work/vllm-venv/bin/python \\
       --tokenizer DIR --sharegpt ShareGPT_V3_unfiltered_cleaned_split.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

from loadgen.dataset_custom import load_custom_rows, sample_custom_requests
from loadgen.dataset_sharegpt import load_sharegpt_entries, sample_sharegpt_requests
from loadgen.tokenizer import LocalTokenizer, load_tokenizer

# Upstream's side, run in the vllm install's Python; prints [md5, prompt_len, output_len] rows.
UPSTREAM = """
import hashlib, json, sys
from transformers import AutoTokenizer
from vllm.benchmarks.datasets import CustomDataset, ShareGPTDataset
name, path, tokenizer, seed, n, output_len = sys.argv[1:7]
tok = AutoTokenizer.from_pretrained(tokenizer)
output_len = None if output_len == "none" else int(output_len)
if name == "sharegpt":
    reqs = ShareGPTDataset(dataset_path=path, random_seed=int(seed)).sample(
        tokenizer=tok, num_requests=int(n), output_len=output_len)
else:
    reqs = CustomDataset(dataset_path=path, random_seed=int(seed)).sample(
        tokenizer=tok, num_requests=int(n), output_len=output_len, skip_chat_template=True)
print(json.dumps([[hashlib.md5(r.prompt.encode()).hexdigest(), r.prompt_len,
                   r.expected_output_len] for r in reqs]))
"""

# (dataset, seed, num_prompts, output length or None): oversampled cases included.
CASES = [
    ("sharegpt", 0, 1000, None),
    ("sharegpt", 1, 1000, 256),
    ("sharegpt", 0, 20000, None),
    ("custom", 3, 300, 256),
    ("custom", 0, 1000, 128),
]


def loadgen_rows(
    name: str, path: str, codec: LocalTokenizer, seed: int, n: int, output_len: int | None
) -> list[list]:
    """loadgen's sample as [md5, prompt_len, output_len] rows."""
    if name == "sharegpt":
        got = sample_sharegpt_requests(load_sharegpt_entries(path), codec, n, output_len, seed)
    else:
        assert output_len is not None
        got = sample_custom_requests(load_custom_rows(path), codec, n, output_len, seed)
    return [
        [hashlib.md5(p.encode()).hexdigest(), int(a), int(b)]
        for p, a, b in zip(got.prompts, got.prompt_lens, got.output_lens, strict=True)
    ]


def main() -> None:
    """Sample every case both ways and print the differences."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", required=True, help="the Python of a vllm install")
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer directory")
    parser.add_argument("--sharegpt", required=True, help="a ShareGPT JSON file")
    args = parser.parse_args()
    codec = LocalTokenizer(load_tokenizer(args.tokenizer))
    with tempfile.TemporaryDirectory(prefix="dataset-parity-") as tmp:
        custom = Path(tmp) / "custom.jsonl"
        entries = load_sharegpt_entries(args.sharegpt)[:500]
        custom.write_text(
            "".join(json.dumps({"prompt": e["conversations"][0]["value"]}) + "\n" for e in entries)
        )
        print(f"{'dataset':<9}{'seed':>5}{'asked':>7}{'output':>8}{'upstream':>10}{'loadgen':>9}"
              f"{'differ':>8}")  # fmt: skip
        for name, seed, n, output_len in CASES:
            path = args.sharegpt if name == "sharegpt" else str(custom)
            upstream = json.loads(
                subprocess.run(
                    [args.vllm_python, "-c", UPSTREAM, name, path, args.tokenizer, str(seed),
                     str(n), "none" if output_len is None else str(output_len)],
                    capture_output=True, text=True, check=True,
                    env={**os.environ, "HF_HUB_OFFLINE": "1"},
                ).stdout.splitlines()[-1]
            )  # fmt: skip
            ours = loadgen_rows(name, path, codec, seed, n, output_len)
            differ = sum(a != b for a, b in zip(upstream, ours, strict=False))
            differ += abs(len(upstream) - len(ours))
            shown = "file" if output_len is None else str(output_len)
            print(f"{name:<9}{seed:>5}{n:>7}{shown:>8}{len(upstream):>10}{len(ours):>9}"
                  f"{differ:>8}")  # fmt: skip


if __name__ == "__main__":
    main()
