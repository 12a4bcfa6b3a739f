"""Run `vllm bench serve` from a light install, without vLLM's CLI (which imports the server).

Takes exactly the flags of `vllm bench serve`; see scripts/bench/README.md for the install:

    /work/vllm-venv/bin/python scripts/bench/vllm_bench_serve.py --base-url http://127.0.0.1:8000 \
        --model loadgen-mock --tokenizer DIR --num-prompts 100
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before vLLM or transformers import huggingface_hub

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser


def run(argv: list[str]) -> None:
    """Parse `vllm bench serve` flags from argv and run the benchmark."""
    parser = FlexibleArgumentParser(description="vllm bench serve, run without vLLM's CLI")
    add_cli_args(parser)
    main(parser.parse_args(argv))


if __name__ == "__main__":
    run(sys.argv[1:])
