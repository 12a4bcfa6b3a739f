"""The ShareGPT dataset against upstream's one-entry-at-a-time procedure, without sockets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from loadgen.config import RunConfig
from loadgen.datasets.sharegpt import load_sharegpt_entries, sample_sharegpt_requests
from loadgen.session.prepare import serialize
from loadgen.text.tokenizer import LocalTokenizer


def entry(i: int, prompt_words: int, completion_words: int) -> dict:
    return {
        "id": f"e{i}",
        "conversations": [
            {"from": "human", "value": " ".join(["the"] * prompt_words)},
            {"from": "gpt", "value": " ".join(["a"] * completion_words)},
        ],
    }


# Lengths around every edge of the filter: prompt < 4, output < 4, prompt > 1024, sum > 2048.
ENTRIES = [
    entry(i, p, c)
    for i, (p, c) in enumerate(
        [(2, 50), (3, 50), (10, 2), (10, 3), (1023, 10), (1024, 10), (900, 1100), (900, 1147)]
        + [(5 + 7 * k, 5 + 11 * k) for k in range(40)]
    )
]


def upstream_sample(
    entries: list[dict], tok: LocalTokenizer, n: int, output_len: int | None, seed: int
) -> list[tuple[str, int, int]]:
    """Upstream's ShareGPTDataset: seed, shuffle, then one entry at a time through the filter."""

    def tokens(text: str) -> int:  # tokenizer(text).input_ids, special tokens included
        return len(tok.encode_batch([text])[0]) + tok.num_special_tokens

    data = list(entries)
    random.seed(seed)
    random.shuffle(data)
    samples = []
    for item in data:
        if len(samples) >= n:
            break
        prompt, completion = item["conversations"][0]["value"], item["conversations"][1]["value"]
        prompt_len = tokens(prompt)
        out = tokens(completion) if output_len is None else output_len
        too_short = prompt_len < 4 or (output_len is None and out < 4)
        if too_short or prompt_len > 1024 or prompt_len + out > 2048:
            continue
        samples.append((prompt, prompt_len, out))
    if len(samples) < n:
        random.seed(seed)
        samples += [random.choice(samples[: len(samples)]) for _ in range(n - len(samples))]
    return samples


def as_tuples(got) -> list[tuple[str, int, int]]:
    return list(zip(got.prompts, got.prompt_lens.tolist(), got.output_lens.tolist(), strict=True))


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("output_len", [None, 2, 300])
@pytest.mark.parametrize("n", [5, 30, 60])
def test_matches_upstreams_loop(tok: LocalTokenizer, seed: int, output_len, n: int) -> None:
    got = sample_sharegpt_requests(ENTRIES, tok, n, output_len, seed, batch_size=7)
    assert as_tuples(got) == upstream_sample(ENTRIES, tok, n, output_len, seed)


def test_the_filter_edges(tok: LocalTokenizer) -> None:
    got = sample_sharegpt_requests(ENTRIES[:8], tok, 8, None, 0, disable_shuffle=True)
    kept = {len(p.split()) for p in got.prompts}  # one token per word, plus a BOS
    # Each text is one token per word plus a BOS. Prompts of 3 words (4 tokens) and 1023 words
    # (1024) are kept, 2 and 1024 words are not; a 3-word completion (4 tokens) is kept, 2 words
    # is not; 900 + 1100 words (2002 tokens) fit in 2048, 900 + 1147 (2049) do not.
    assert kept == {3, 10, 1023, 900}
    assert min(got.output_lens.tolist()) == 4


def test_no_oversample_keeps_only_the_valid_entries(tok: LocalTokenizer) -> None:
    got = sample_sharegpt_requests(ENTRIES[:8], tok, 100, None, 0, no_oversample=True)
    assert len(got.prompts) == 4


def test_an_entrys_image_or_video_goes_with_it_as_upstream_makes_the_part(
    tok: LocalTokenizer,
) -> None:
    media = [
        ({"image": "cat.png"}, {"type": "image_url", "image_url": {"url": "file://cat.png"}}),
        ({"image": "https://x/a.jpg"}, {"type": "image_url", "image_url": {"url": "https://x/a.jpg"}}),
        ({"image": "", "video": "/v/c.mp4"}, {"type": "video_url", "video_url": {"url": "file:///v/c.mp4"}}),
        ({"video": "file:///d.mp4"}, {"type": "video_url", "video_url": {"url": "file:///d.mp4"}}),
        ({}, None),
    ]  # fmt: skip
    entries = [{**entry(i, 10 + i, 10), **fields} for i, (fields, _) in enumerate(media)]
    got = sample_sharegpt_requests(entries, tok, 5, None, 0, disable_shuffle=True)
    assert got.mm_contents == [[part] if part else [] for _, part in media]
    topped = sample_sharegpt_requests(entries[:3], tok, 9, None, 0, disable_shuffle=True)
    part_of = {p: mm for p, mm in zip(got.prompts, got.mm_contents, strict=True)}
    assert len(topped.mm_contents) == 9  # a top-up draws an entry with its own part
    assert all(mm == part_of[p] for p, mm in zip(topped.prompts, topped.mm_contents, strict=True))
    text_only = sample_sharegpt_requests(entries[4:], tok, 1, None, 0)
    assert text_only.mm_contents is None
    with pytest.raises(ValueError, match="entry 'e0': its image must be a URL or a path"):
        sample_sharegpt_requests([{**entry(0, 10, 10), "image": {"bytes": 1}}], tok, 1, None, 0)


def test_load_keeps_entries_with_two_turns(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    one_turn = {"conversations": [{"from": "human", "value": "hi"}]}
    path.write_text(json.dumps([entry(0, 5, 5), one_turn, {"id": "x"}, entry(1, 6, 6)]))
    assert [e["id"] for e in load_sharegpt_entries(str(path))] == ["e0", "e1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"conversations": []}', "a JSON list of entries"),
        ("[]", "no entry has two conversation turns"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "sg.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_sharegpt_entries(str(path))


def test_the_part_reaches_a_chat_body_and_not_a_completions_one(tok: LocalTokenizer) -> None:
    entries = [{**entry(0, 10, 10), "image": "https://x/a.jpg"}, entry(1, 11, 10)]
    sampled = sample_sharegpt_requests(entries, tok, 2, None, 0, disable_shuffle=True)
    chat = RunConfig(dataset_name="sharegpt", backend="openai-chat", model="m")
    bodies = [orjson.loads(b) for b in serialize(chat, sampled, ["m", "m"])]
    contents = [body["messages"][0]["content"] for body in bodies]
    assert contents[0][1] == {"type": "image_url", "image_url": {"url": "https://x/a.jpg"}}
    assert [part["type"] for part in contents[1]] == ["text"]
    plain = RunConfig(dataset_name="sharegpt", backend="openai", model="m")
    prompts = [orjson.loads(b)["prompt"] for b in serialize(plain, sampled, ["m", "m"])]
    assert prompts == sampled.prompts  # the text alone, as upstream's completions
