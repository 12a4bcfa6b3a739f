"""End to end: the real CLI (`loadgen run --base-url ...`) against a mock server process of each
personality, completions and chat, streamed and whole (``"stream": false``); loadgen's token
totals must equal the usage the mock itself counted (`/mock/stats`), except where upstream's
rule does not read the server's usage: llama.cpp's and TGI's streamed completions put it on
their last token chunk, so the prompt length is the dataset's (the mock counts a BOS token
more per request) and the output count is the re-tokenised text's (the mock's text re-encodes
to the tokens it counted). One mock process per personality serves the module's runs; a run's
counts are the difference of the mock's counters before and after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from helpers import mock_server, mock_stats, only_json, run_in_process

NUM_PROMPTS = 12
CONCURRENCY = 4  # within llama.cpp's 8 handlers: pre-opened connections are all served
SMALL = ["--random-input-len", "32", "--random-output-len", "8", "--disable-tqdm"]
BACKENDS = {
    "completions": ("--backend", "vllm"),
    "chat": ("--backend", "openai-chat", "--endpoint", "/v1/chat/completions"),
}


@pytest.fixture(scope="module")
def mock_of() -> Iterator[Callable[[str], str]]:
    """The URL of the module's mock server process playing a personality, started when first
    asked for and stopped with the module."""
    with ExitStack() as stack:
        urls: dict[str, str] = {}

        def url(personality: str) -> str:
            if personality not in urls:
                started = mock_server("--personality", personality, itl_ms=1.0)
                urls[personality] = stack.enter_context(started)
            return urls[personality]

        yield url


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("kind", list(BACKENDS))
@pytest.mark.parametrize("personality", ["vllm", "llamacpp", "sglang", "tgi", "openai"])
def test_loadgen_totals_equal_the_mocks_own_counts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mock_of: Callable[[str], str],
    personality: str,
    kind: str,
    streamed: bool,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the openai personality wants a key
    url = mock_of(personality)
    before = mock_stats(url)
    proc = run_in_process(
        "--base-url", url, "--model", "loadgen-mock", *BACKENDS[kind],
        "--num-prompts", str(NUM_PROMPTS), "--max-concurrency", str(CONCURRENCY), *SMALL,
        "--ready-check-timeout-sec", "0", "--save-result", "--result-dir", str(tmp_path),
        *(() if streamed else ("--extra-body", '{"stream": false}')),
    )  # fmt: skip
    after = mock_stats(url)
    stats = {key: after[key] - before[key] for key in ("prompt_tokens", "completion_tokens")}
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (NUM_PROMPTS, 0), proc.stdout[-2000:]
    usage_on_last_token = streamed and kind == "completions" and personality in ("llamacpp", "tgi")
    bos_tokens = NUM_PROMPTS if usage_on_last_token else 0
    assert result["total_input_tokens"] == stats["prompt_tokens"] - bos_tokens, stats
    assert result["total_output_tokens"] == stats["completion_tokens"], stats
