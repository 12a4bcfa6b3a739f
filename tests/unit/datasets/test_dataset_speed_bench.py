"""speed_bench as upstream's SpeedBench builds it (its subset file, first message, category,
custom sampling with seed 0); without sockets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadgen.datasets.speed_bench import (
    load_speed_bench,
    sample_speed_bench,
    speed_bench_rows,
    subset_file,
)
from loadgen.text.chat_template import load_chat_template
from loadgen.text.tokenizer import LocalTokenizer


def write_subset(directory: Path, subset: str, n: int) -> Path:
    lines = [
        {
            "category": "qa" if i % 2 else "coding",
            "messages": [{"role": "user", "content": f"p{i}"}],
        }
        for i in range(n)
    ]
    path = directory / f"{subset}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_subset_is_read_from_the_directory_or_the_file(tmp_path: Path) -> None:
    path = write_subset(tmp_path, "throughput_1k", 3)
    assert subset_file(str(tmp_path), "throughput_1k") == path
    assert subset_file(str(path), "qualitative") == path  # a file is read as it is
    with pytest.raises(ValueError, match=r"qualitative\.jsonl is not in the directory.*prepare"):
        subset_file(str(tmp_path), "qualitative")
    with pytest.raises(ValueError, match="no such directory"):
        subset_file(str(tmp_path / "absent"), "qualitative")


def test_rows_are_first_messages_of_the_category(tmp_path: Path) -> None:
    write_subset(tmp_path, "qualitative", 5)
    assert load_speed_bench(str(tmp_path), "qualitative", "qa") == [
        {"prompt": "p1"},
        {"prompt": "p3"},
    ]
    with pytest.raises(ValueError, match="no prompts of category 'math'"):
        load_speed_bench(str(tmp_path), "qualitative", "math")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: each line needs \"messages\""):
        speed_bench_rows(bad, None)


def test_sampled_as_custom_with_seed_0_templated(tmp_path: Path, tok: LocalTokenizer) -> None:
    write_subset(tmp_path, "qualitative", 6)
    rows = load_speed_bench(str(tmp_path), "qualitative", None)
    template = load_chat_template("loadgen-mock")
    got = sample_speed_bench(rows, str(tmp_path), tok, template, 4, 33, False, False, None)
    order = list(rows)
    random.seed(0)  # upstream's SpeedBench is built without --seed
    random.shuffle(order)
    expected = [template.render_user_prompt(row["prompt"]) for row in order[:4]]
    assert got.prompts == expected
    assert got.output_lens.tolist() == [33] * 4
    plain = sample_speed_bench(rows, str(tmp_path), tok, None, 0, 5, True, False, None)
    assert plain.prompts == [row["prompt"] for row in rows]  # every line, file order, as written
