"""The Rust client's extras through the real CLI (in process) against the mock: --dry-run
prints the plan whose schedule hash the real run then has (and needs no server with --model),
--max-model-len drops what cannot fit and says so, --prompt-token-ids sends random prompts as
token ids."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import free_port, only_json, refusal, run_in_process

from loadgen.text.tokenizer import MOCK_MODEL_NAME

RANDOM = (
    *("--num-prompts", "40", "--random-input-len", "64", "--random-output-len", "16"),
    *("--random-range-ratio", "0.5", "--request-rate", "200", "--seed", "7"),
    *("--max-concurrency", "6", "--workers", "2", "--disable-tqdm"),
)


def schedule_hash_of(stdout: str) -> str:
    found = re.findall(r"^  schedule_sha256: ([0-9a-f]{16})$", stdout, flags=re.MULTILINE)
    assert len(found) == 1, stdout
    return found[0]


def test_a_dry_run_prints_the_plan_of_the_run_that_follows(tmp_path: Path) -> None:
    dry = run_in_process("--mock", "--dry-run", *RANDOM)
    assert dry.returncode == 0, dry.stderr
    assert "Dry run stats:\n  Total prompts: 40\n" in dry.stdout
    assert "Workers: 2 (2 local processes), none started" in dry.stdout
    assert "Serving Benchmark Result" not in dry.stdout
    # No server at all: --model names the packaged tokenizer, and nothing is sent.
    offline = run_in_process(
        "--model", MOCK_MODEL_NAME, "--port", str(free_port()), "--dry-run", *RANDOM
    )
    assert offline.returncode == 0, offline.stderr
    assert schedule_hash_of(offline.stdout) == schedule_hash_of(dry.stdout)
    real = run_in_process("--mock", *RANDOM, "--save-result", "--result-dir", str(tmp_path))
    assert real.returncode == 0, real.stderr
    result = only_json(tmp_path)
    assert result["completed"] == 40
    assert result["loadgen"]["schedule_sha256"] == schedule_hash_of(dry.stdout)


def test_max_model_len_drops_the_prompts_that_cannot_fit(tmp_path: Path) -> None:
    run = run_in_process(
        "--mock", *RANDOM, "--max-model-len", "85", "--save-result", "--result-dir", str(tmp_path)
    )
    assert run.returncode == 0, run.stderr
    found = re.search(r"^--max-model-len 85: dropped (\d+) of 40 prompts", run.stdout, re.M)
    assert found, run.stdout
    dropped = int(found[1])
    assert 0 < dropped < 40
    result = only_json(tmp_path)
    assert result["completed"] == 40 - dropped and result["failed"] == 0
    assert result["num_prompts"] == 40  # as asked, as upstream reports it


def test_max_model_len_that_leaves_nothing_exits_1_in_one_line() -> None:
    run = run_in_process("--mock", *RANDOM, "--max-model-len", "20")
    assert run.returncode == 1
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --max-model-len 20: nothing fits (prompt_len + output_len <= 20)")
    )


def test_prompt_token_ids_sends_the_random_prompts_as_ids(tmp_path: Path) -> None:
    args = (
        "--mock",
        "--backend",
        "openai",
        *RANDOM,
        "--random-range-ratio",
        "0",
        "--save-detailed",
    )
    ids = run_in_process(
        *args, "--prompt-token-ids", "--save-result", "--result-dir", str(tmp_path)
    )
    assert ids.returncode == 0, ids.stderr
    text = run_in_process(*args, "--save-result", "--result-dir", str(tmp_path / "text"))
    assert text.returncode == 0, text.stderr
    # The mock counts what it was sent, as vLLM does: ids as they are (63, the input length
    # less the one special token the dataset leaves room for), text with its BOS added (64).
    assert only_json(tmp_path)["input_lens"] == [63] * 40
    assert only_json(tmp_path / "text")["input_lens"] == [64] * 40


def test_prompt_token_ids_with_the_chat_backend_exits_2() -> None:
    run = refusal("--mock", "--backend", "openai-chat", "--prompt-token-ids", "--dry-run")
    assert run.returncode == 2
    assert "--prompt-token-ids sends each prompt as token ids" in run.stderr


def test_max_model_len_cuts_conversations_before_the_turn_that_cannot_fit(tmp_path: Path) -> None:
    # About 40 tokens a turn (30 in, 10 out): the third turn's conversation needs about 120.
    args = (
        *("--mock", "--multi-turn", "--backend", "openai-chat"),
        *("--endpoint", "/v1/chat/completions", "--multi-turn-num-turns", "3"),
        *("--num-prompts", "5", "--random-input-len", "30", "--random-output-len", "10"),
        *("--max-model-len", "90", "--disable-tqdm"),
    )
    dry = run_in_process(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "--max-model-len 90: dropped 5 of 15 turns (0 conversations whole)" in dry.stdout
    assert "  Total conversations: 5\n  Total turns: 10\n" in dry.stdout
    real = run_in_process(*args, "--save-result", "--result-dir", str(tmp_path))
    assert real.returncode == 0, real.stderr
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (10, 0)
