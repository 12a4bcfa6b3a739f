"""BFCL (hf, gorilla-llm/Berkeley-Function-Calling-Leaderboard) as upstream's BFCLDataset builds
it, and its tools in the chat body over --extra-body; without sockets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from loadgen.datasets.bfcl import (
    DEFAULT_CATEGORIES,
    interleave,
    load_bfcl,
    resolve_categories,
    sample_bfcl_requests,
    to_openai_tools,
)
from loadgen.payloads import serialize_bodies
from loadgen.text.chat_template import load_chat_template
from loadgen.text.tokenizer import LocalTokenizer

FUNCTION = {
    "name": "area",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "float"},
            "sides": {"type": "tuple", "items": {"type": "any"}},
        },
    },
}


def bfcl_row(i: int, category: str) -> dict:
    turn = [{"role": "user", "content": f"{category} question {i}"}]
    return {"id": f"{category}_{i}", "question": [turn], "function": [FUNCTION]}


def write_copy(directory: Path, sizes: dict[str, int]) -> None:
    for category, n in sizes.items():
        lines = [json.dumps(bfcl_row(i, category)) for i in range(n)]
        (directory / f"BFCL_v3_{category}.json").write_text("\n".join(lines) + "\n")


def test_schemas_become_json_schema_tools() -> None:
    (tool,) = to_openai_tools([FUNCTION])
    assert tool["type"] == "function"
    params = tool["function"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["base"]["type"] == "number"
    assert params["properties"]["sides"] == {"type": "array", "items": {"type": "string"}}
    assert FUNCTION["parameters"]["type"] == "dict"  # the row is not changed


def test_categories_default_to_upstreams_three() -> None:
    assert resolve_categories(None) == list(DEFAULT_CATEGORIES)
    assert resolve_categories([" ", ""]) == list(DEFAULT_CATEGORIES)
    assert resolve_categories([" simple", "multiple"]) == ["simple", "multiple"]


def test_rows_interleave_round_robin_then_shuffle_with_the_seed() -> None:
    a, b = [{"a": i} for i in range(3)], [{"b": i} for i in range(1)]
    assert interleave([a, b], 0, True) == [a[0], b[0], a[1], a[2]]
    expected = [a[0], b[0], a[1], a[2]]
    random.Random(5).shuffle(expected)
    assert interleave([a, b], 5, False) == expected


def test_local_copy_is_read_and_a_missing_category_named(tmp_path: Path) -> None:
    write_copy(tmp_path, {"simple": 2, "multiple": 1})
    rows = load_bfcl(str(tmp_path), ["simple", "multiple"], 0, True)
    assert [row["id"] for row in rows] == ["simple_0", "multiple_0", "simple_1"]
    with pytest.raises(ValueError, match=r"BFCL_v3_live_simple\.json is not there"):
        load_bfcl(str(tmp_path), None, 0, True)


def test_requests_carry_messages_and_tools_and_count_the_templated_prompt(
    tok: LocalTokenizer,
) -> None:
    rows = [bfcl_row(i, "simple") for i in range(3)] + [{"question": [], "function": [FUNCTION]}]
    template = load_chat_template("loadgen-mock")
    got = sample_bfcl_requests(rows, tok, template, 5, None, 0, no_oversample=False)
    assert len(got.prompts) == 5  # three kept rows, topped up to five
    assert got.output_lens.tolist() == [512] * 5
    assert got.prompts[:3] == [f"simple question {i}" for i in range(3)]
    assert got.chat_messages is not None and got.request_overrides is not None
    assert got.chat_messages[0] == rows[0]["question"][0]
    assert got.request_overrides[0] == {"tools": to_openai_tools([FUNCTION]), "tool_choice": "auto"}
    rendered = template.render(rows[0]["question"][0], {"tools": to_openai_tools([FUNCTION])})
    assert got.prompt_lens[0] == len(tok.encode_batch([rendered])[0]) + tok.num_special_tokens
    short = sample_bfcl_requests(rows, tok, None, 5, 7, 0, no_oversample=True)
    assert len(short.prompts) == 3 and short.output_lens.tolist() == [7] * 3
    joined = "simple question 0"  # no template: the contents joined, upstream's fallback
    assert short.prompt_lens[0] == len(tok.encode_batch([joined])[0]) + tok.num_special_tokens


def test_tools_reach_the_chat_body_over_the_extra_body(tok: LocalTokenizer) -> None:
    got = sample_bfcl_requests([bfcl_row(0, "simple")], tok, None, 1, 9, 0, no_oversample=True)
    (raw,) = serialize_bodies(
        "openai-chat",
        ["m"],
        got.prompts,
        got.output_lens.tolist(),
        logprobs=None,
        ignore_eos=False,
        extra_body={"temperature": 0.5, "tool_choice": "none", "tools": []},
        chat_messages=got.chat_messages,
        request_overrides=got.request_overrides,
    )
    body = orjson.loads(raw)
    assert body["messages"] == [{"role": "user", "content": "simple question 0"}]
    assert body["max_completion_tokens"] == 9
    assert body["temperature"] == 0.5  # --extra-body still reaches the body
    assert body["tool_choice"] == "auto"  # the request's own fields win, as upstream
    assert body["tools"] == to_openai_tools([FUNCTION])
