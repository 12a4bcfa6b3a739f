"""The Berkeley Function Calling Leaderboard (``hf`` with
gorilla-llm/Berkeley-Function-Calling-Leaderboard), sampled as upstream's ``BFCLDataset``.

BFCL ships one JSON-lines file per category, ``BFCL_v3_{category}.json``, each line
``{id, question, function}``. Upstream downloads the files of ``--bfcl-categories`` (default
simple, live_simple, multiple) with ``hf_hub_download``; loadgen reads them from a local copy:
``--dataset-path`` a directory holding them (with ``--hf-name`` naming the dataset), or the hub
id, read from the Hugging Face cache only. The categories' rows are interleaved round-robin,
shuffled with ``random.Random(seed)`` unless ``--disable-shuffle``, and taken in order, skipping
rows without a first turn or functions, until ``--num-prompts``; then topped up as upstream's
``maybe_oversample_requests``. Each request sends the first turn's messages as they are, with
``tools`` (the functions in OpenAI's tool form, BFCL's type names made JSON Schema's) and
``tool_choice: "auto"`` merged over --extra-body. ``prompt_len`` is the messages rendered with
the chat template and the tools (a plain join of the contents without a template), counted
with special tokens; the output length is --hf-output-len or 512.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.sampled_prompts import SampledPrompts, top_up
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec

BFCL_PATH = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
BFCL_OUTPUT_LEN = 512
DEFAULT_CATEGORIES = ("simple", "live_simple", "multiple")
# BFCL's type names that JSON Schema lacks, as upstream maps them (grammar backends refuse them).
TYPE_REMAP = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def category_file(category: str) -> str:
    """The file one BFCL v3 category ships as."""
    return f"BFCL_v3_{category}.json"


def resolve_categories(categories: list[str] | None) -> list[str]:
    """--bfcl-categories stripped of blanks, or upstream's default three."""
    chosen = [name.strip() for name in categories or () if name.strip()]
    return chosen or list(DEFAULT_CATEGORIES)


def to_openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL functions as OpenAI tools, their schemas' type names translated."""
    return [{"type": "function", "function": _translate_schema(fn)} for fn in functions]


def _translate_schema(node: Any) -> Any:
    if isinstance(node, dict):
        translated = {key: _translate_schema(value) for key, value in node.items()}
        kind = translated.get("type")
        if isinstance(kind, str) and kind in TYPE_REMAP:
            translated["type"] = TYPE_REMAP[kind]
        return translated
    if isinstance(node, list):
        return [_translate_schema(value) for value in node]
    return node


def interleave(per_category: list[list[dict]], seed: int, disable_shuffle: bool) -> list[dict]:
    """The categories' rows round-robin (balanced with --disable-shuffle), then shuffled."""
    longest = max((len(rows) for rows in per_category), default=0)
    rows = [group[i] for i in range(longest) for group in per_category if i < len(group)]
    if not disable_shuffle:
        random.Random(seed).shuffle(rows)
    return rows


def first_turn(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """(the first turn's messages, the functions) of a row, or None where upstream skips it."""
    question, functions = row.get("question"), row.get("function")
    if not question or not functions or not isinstance(question, list):
        return None
    turn = question[0]
    if not isinstance(turn, list) or not turn:
        return None
    return turn, functions if isinstance(functions, list) else [functions]


def sample_bfcl_requests(
    rows: list[dict[str, Any]],
    tokenizer: TokenCodec,
    template: ChatTemplate | None,
    num_requests: int,
    output_len: int | None,
    seed: int,
    no_oversample: bool,
) -> SampledPrompts:
    """Upstream's BFCL sampling of the interleaved ``rows`` (see the module docstring)."""
    wanted = output_len if output_len is not None else BFCL_OUTPUT_LEN
    kept: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    rendered: list[str] = []
    for row in rows:
        if len(kept) >= num_requests:
            break
        turn = first_turn(row)
        if turn is None:
            continue
        messages, functions = turn
        tools = to_openai_tools(functions)
        kept.append((messages, {"tools": tools, "tool_choice": "auto"}))
        if template is not None:
            rendered.append(template.render(messages, {"tools": tools}))
        else:  # upstream's fallback when the template cannot render
            rendered.append("\n".join(str(m.get("content", "")) for m in messages))
    if not kept:
        raise ValueError("no BFCL row has a first turn with functions")
    specials = tokenizer.num_special_tokens
    lens = [len(ids) + specials for ids in tokenizer.encode_batch(rendered)]
    outputs = [wanted] * len(kept)
    if not no_oversample:
        kept, outputs, lens = top_up(kept, outputs, lens, num_requests, seed)
    return dataclasses.replace(
        SampledPrompts.of([_last_content(messages) for messages, _ in kept], lens, outputs),
        chat_messages=[messages for messages, _ in kept],
        request_overrides=[overrides for _, overrides in kept],
    )


def _last_content(messages: list[dict[str, Any]]) -> str:
    """The prompt upstream keeps beside the messages: the last message's content."""
    content = messages[-1].get("content", "") if messages else ""
    return content if isinstance(content, str) else str(content)


def category_rows(path: str, categories: list[str]) -> list[list[dict]]:
    """Each category's rows, from the directory ``path`` or the hub id's cached files."""
    per_category = []
    for category in categories:
        file = _local_file(path, category_file(category))
        per_category.append([row for _, row in json_lines(str(file)) if isinstance(row, dict)])
    return per_category


def _local_file(path: str, filename: str) -> Path:
    """``filename`` in the directory ``path``, or in the Hugging Face cache of the hub id."""
    defaults = ", ".join(DEFAULT_CATEGORIES)
    directory = Path(path).expanduser()
    if directory.is_dir():
        if (directory / filename).is_file():
            return directory / filename
        raise ValueError(
            f"--dataset-path {path}: BFCL category file {filename} is not there; check "
            f"--bfcl-categories (default {defaults})"
        )
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, filename, repo_type="dataset")
    if isinstance(cached, str):
        return Path(cached)
    raise ValueError(
        f"--dataset-path {path}: {filename} is neither a local directory's nor in the Hugging "
        f"Face cache; fetch it (huggingface-cli download --repo-type dataset {BFCL_PATH} "
        f"{filename} --local-dir DIR) and give --dataset-path DIR --hf-name {BFCL_PATH}"
    )


def load_bfcl(
    path: str, categories: list[str] | None, seed: int, disable_shuffle: bool
) -> list[dict[str, Any]]:
    """The rows of --bfcl-categories from the local copy, interleaved and shuffled as upstream."""
    return interleave(category_rows(path, resolve_categories(categories)), seed, disable_shuffle)
