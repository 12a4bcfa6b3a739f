"""The custom dataset against upstream's procedure (global `random`, re-seeded), without sockets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadgen.datasets.custom import load_custom_rows, load_spec_bench_rows, sample_custom_requests
from loadgen.text.tokenizer import LocalTokenizer

ROWS = [
    {"prompt": f"question number {i} about {'x ' * i}", "output_tokens": 10 + i} for i in range(7)
]


def upstream_order(rows: list[dict], seed: int) -> list[dict]:
    """What upstream's CustomDataset.load_data does: random.seed, then random.shuffle."""
    order = list(rows)
    random.seed(seed)
    random.shuffle(order)
    return order


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_shuffle_and_take_the_first_n_as_upstream(tok: LocalTokenizer, seed: int) -> None:
    got = sample_custom_requests(ROWS, tok, 5, 64, seed)
    assert got.prompts == [r["prompt"] for r in upstream_order(ROWS, seed)[:5]]
    assert got.output_lens.tolist() == [64] * 5


def test_disable_shuffle_keeps_the_file_order(tok: LocalTokenizer) -> None:
    got = sample_custom_requests(ROWS, tok, 4, 64, 0, disable_shuffle=True)
    assert got.prompts == [r["prompt"] for r in ROWS[:4]]


@pytest.mark.parametrize("seed", [0, 3])
def test_oversampling_redraws_as_upstream(tok: LocalTokenizer, seed: int) -> None:
    got = sample_custom_requests(ROWS, tok, 20, -1, seed)
    sampled = upstream_order(ROWS, seed)
    random.seed(seed)  # upstream's maybe_oversample_requests re-seeds, then random.choice
    extra = [random.choice(sampled) for _ in range(20 - len(sampled))]
    assert got.prompts == [r["prompt"] for r in sampled + extra]
    assert got.output_lens.tolist() == [r["output_tokens"] for r in sampled + extra]
    assert len(got.prompt_lens) == 20


def test_no_oversample_sends_only_the_files_prompts(tok: LocalTokenizer) -> None:
    got = sample_custom_requests(ROWS, tok, 20, 64, 0, no_oversample=True)
    assert len(got.prompts) == len(ROWS)


def test_prompt_len_counts_special_tokens(tok: LocalTokenizer) -> None:
    got = sample_custom_requests(ROWS, tok, 7, 64, 0, disable_shuffle=True)
    plain = [len(ids) for ids in tok.encode_batch([r["prompt"] for r in ROWS])]
    assert got.prompt_lens.tolist() == [n + tok.num_special_tokens for n in plain]
    assert tok.num_special_tokens == 1  # the packaged tokenizer adds a BOS


def test_output_len_minus_one_needs_output_tokens_on_every_line(tok: LocalTokenizer) -> None:
    rows = [{"prompt": "a", "output_tokens": 5}, {"prompt": "b"}]
    with pytest.raises(ValueError, match=r"output_tokens.*got None for the prompt 'b'"):
        sample_custom_requests(rows, tok, 2, -1, 0, disable_shuffle=True)


def test_load_reads_jsonl_objects_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b", "output_tokens": 3}\n')
    assert load_custom_rows(str(path)) == [{"prompt": "a"}, {"prompt": "b", "output_tokens": 3}]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.json", '{"prompt": "a"}', "reads only .jsonl files"),
        ("p.jsonl", '{"prompt": "a"}\n{"prompt": ', r"p\.jsonl:2: not valid JSON"),
        (
            "p.jsonl",
            '{"text": "a"}',
            r'p\.jsonl:1: each line must be an object with a string "prompt"',
        ),
        ("p.jsonl", "\n\n", "the file has no prompts"),
    ],
)
def test_bad_files_are_named_with_the_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_custom_rows(str(path))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--dataset-path .*nope\.jsonl: No such file"):
        load_custom_rows(str(tmp_path / "nope.jsonl"))


# --- spec_bench -------------------------------------------------------------------------------


def write_questions(path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_spec_bench_takes_each_questions_first_turn_of_the_category(tmp_path):

    questions = [
        {"question_id": 1, "category": "coding", "turns": ["write code", "again"]},
        {"question_id": 2, "category": "qa", "turns": ["what is it"]},
        {"question_id": 3, "category": "coding", "turns": ["fix code"]},
    ]
    write_questions(tmp_path / "q.jsonl", questions)
    assert load_spec_bench_rows(str(tmp_path / "q.jsonl"), None) == [
        {"prompt": "write code"},
        {"prompt": "what is it"},
        {"prompt": "fix code"},
    ]
    assert load_spec_bench_rows(str(tmp_path / "q.jsonl"), "coding") == [
        {"prompt": "write code"},
        {"prompt": "fix code"},
    ]
    with pytest.raises(ValueError, match="the file has no questions of category 'math'"):
        load_spec_bench_rows(str(tmp_path / "q.jsonl"), "math")
    write_questions(tmp_path / "bad.jsonl", [{"category": "qa", "turns": []}])
    with pytest.raises(ValueError, match=r'bad.jsonl:1: each line needs "turns"'):
        load_spec_bench_rows(str(tmp_path / "bad.jsonl"), None)
