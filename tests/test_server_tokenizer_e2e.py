"""End to end: the real CLI against the mock server playing llama.cpp (8 HTTP threads that idle
connections hold, connections closed after streams, only llama.cpp's /tokenize form), with no
local tokenizer, so the dataset is built through the server's /tokenize and /detokenize."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from loadgen.mock.process import EmbeddedMockServer

MODEL = "acme/no-local-tokenizer-7b"  # not in any cache; HF_HUB_OFFLINE keeps it that way


def test_a_llamacpp_server_builds_the_dataset_and_serves_the_run(tmp_path: Path) -> None:
    mock = EmbeddedMockServer(extra_args=("--personality", "llamacpp", "--model", MODEL))
    url = mock.start()
    try:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", "--base-url", url, "--workers", "2",
             "--max-concurrency", "4", "--num-prompts", "200", "--random-input-len", "64",
             "--random-output-len", "8", "--disable-tqdm", "--save-result",
             "--result-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        mock.stop()
    assert proc.returncode == 0, proc.stderr
    assert "Using the server's /tokenize and /detokenize" in proc.stdout
    assert "Server tokenizer: llama.cpp form" in proc.stdout
    assert "skipping alignment" not in proc.stdout
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert (result["completed"], result["failed"]) == (200, 0)
    print(f"run took {elapsed:.1f} s")
