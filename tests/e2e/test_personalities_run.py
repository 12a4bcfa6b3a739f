"""End to end: the real CLI (`loadgen run --base-url ...`) against a mock server process of each
personality, completions and chat, streamed and whole (``"stream": false``); loadgen's token
totals must equal the usage the mock itself counted (`/mock/stats`), except where upstream's
rule does not read the server's usage: llama.cpp's and TGI's streamed completions put it on
their last token chunk, so the prompt length is the dataset's (the mock counts a BOS token
more per request) and the output count is the re-tokenised text's (the mock's text re-encodes
to the tokens it counted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import only_json, run_against_mock

NUM_PROMPTS = 12
CONCURRENCY = 4  # within llama.cpp's 8 handlers: pre-opened connections are all served
SMALL = ["--random-input-len", "32", "--random-output-len", "8", "--disable-tqdm"]
BACKENDS = {
    "completions": ("--backend", "vllm"),
    "chat": ("--backend", "openai-chat", "--endpoint", "/v1/chat/completions"),
}


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("kind", list(BACKENDS))
@pytest.mark.parametrize("personality", ["vllm", "llamacpp", "sglang", "tgi", "openai"])
def test_loadgen_totals_equal_the_mocks_own_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, personality: str, kind: str, streamed: bool
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the openai personality wants a key
    run = run_against_mock(
        "--model", "loadgen-mock", *BACKENDS[kind],
        "--num-prompts", str(NUM_PROMPTS), "--max-concurrency", str(CONCURRENCY), *SMALL,
        "--ready-check-timeout-sec", "0", "--save-result", "--result-dir", str(tmp_path),
        *(() if streamed else ("--extra-body", '{"stream": false}')),
        mock_args=("--personality", personality), itl_ms=1.0, timeout=60,
    )  # fmt: skip
    proc, stats = run.proc, run.stats
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (NUM_PROMPTS, 0), proc.stdout[-2000:]
    usage_on_last_token = streamed and kind == "completions" and personality in ("llamacpp", "tgi")
    bos_tokens = NUM_PROMPTS if usage_on_last_token else 0
    assert result["total_input_tokens"] == stats["prompt_tokens"] - bos_tokens, stats
    assert result["total_output_tokens"] == stats["completion_tokens"], stats
