"""End to end: the real CLI against the mock server playing llama.cpp (8 HTTP threads that idle
connections hold, connections closed after streams, only llama.cpp's /tokenize form), with no
local tokenizer, so the dataset is built through the server's /tokenize and /detokenize."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import loadgen, only_json, run_against_mock

MODEL = "acme/no-local-tokenizer-7b"  # not in any cache; HF_HUB_OFFLINE keeps it that way


def test_a_llamacpp_server_builds_the_dataset_and_serves_the_run(tmp_path: Path) -> None:
    run = run_against_mock(
        "--workers", "2", "--max-concurrency", "4", "--num-prompts", "200",
        "--random-input-len", "64", "--random-output-len", "8", "--disable-tqdm",
        "--save-result", "--result-dir", str(tmp_path),
        mock_args=("--personality", "llamacpp", "--model", MODEL),
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    proc, elapsed = run.proc, run.ended - run.launched
    assert proc.returncode == 0, proc.stderr
    assert "Using the server's /tokenize and /detokenize" in proc.stdout
    assert "Server tokenizer: llama.cpp form" in proc.stdout
    assert "skipping alignment" not in proc.stdout
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (200, 0)
    print(f"run took {elapsed:.1f} s")


def test_a_model_the_server_does_not_serve_is_refused_with_the_served_ones() -> None:
    proc = loadgen(
        "--mock", "--model", MODEL, "--num-prompts", "5", "--disable-tqdm",
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    served = "it serves loadgen-mock (GET /v1/models)"
    assert last == f"error: the server does not serve --model {MODEL}: {served}"
