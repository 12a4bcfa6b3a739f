"""The ``sharegpt`` dataset: a JSON list of conversations, sampled as upstream's ShareGPTDataset.

Upstream (reference §6.2): entries with at least two ``conversations`` turns are kept and
shuffled with ``random.seed(seed)`` unless ``--disable-shuffle``; then, in that order, turn 0 is
the prompt and turn 1 the completion. Both are tokenized with special tokens; the output length
is the completion's token count, or ``--sharegpt-output-len`` when given. An entry is skipped
unless prompt >= 4 tokens, output >= 4 (not checked with a fixed output length), prompt <= 1024
and prompt + output <= 2048. Sampling stops at ``--num-prompts`` kept entries; too few are topped
up by seeded draws unless ``--no-oversample``. Entries are tokenized in batches here, in order,
which keeps exactly the entries upstream's one-at-a-time loop keeps.

An entry's ``image`` (or else ``video``), a URL or a local path, goes with its request as
upstream's ``process_image``/``process_video`` make a string into a part: an ``image_url`` (or
``video_url``) part whose URL is the string as written when it is an ``http(s)://`` or
``file://`` URL (or, for an image, a ``data:image/`` URL), else ``file://`` and the path. The
server reads it (vLLM: ``--allowed-local-media-path`` for files). A chat request sends the part
after the text; a completions request sends the text alone, as upstream's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from loadgen.datasets.errors import file_errors
from loadgen.datasets.media import url_part
from loadgen.datasets.sampled_prompts import SampledPrompts, seeded_order, top_up
from loadgen.text.tokenizer import TokenCodec

MIN_LEN = 4
MAX_PROMPT_LEN = 1024
MAX_TOTAL_LEN = 2048


def load_sharegpt_entries(path: str) -> list[dict]:
    """The entries of a ShareGPT JSON file that have at least two conversation turns."""
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"--dataset-path {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"--dataset-path {path}: not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"--dataset-path {path}: a ShareGPT file is a JSON list of entries")
    kept = [
        entry
        for entry in data
        if isinstance(entry, dict)
        and isinstance(entry.get("conversations"), list)
        and len(entry["conversations"]) >= 2
    ]
    if not kept:
        raise ValueError(f"--dataset-path {path}: no entry has two conversation turns")
    return kept


def is_valid_sequence(
    prompt_len: int,
    output_len: int,
    fixed_output_len: bool,
    max_prompt_len: int = MAX_PROMPT_LEN,
    max_total_len: int = MAX_TOTAL_LEN,
) -> bool:
    """Upstream's length filter for conversation entries (ShareGPT's limits by default)."""
    return (
        prompt_len >= MIN_LEN
        and (fixed_output_len or output_len >= MIN_LEN)
        and prompt_len <= max_prompt_len
        and prompt_len + output_len <= max_total_len
    )


def sample_sharegpt_requests(
    entries: list[dict],
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int | None,
    seed: int,
    disable_shuffle: bool = False,
    no_oversample: bool = False,
    batch_size: int = 1024,
) -> SampledPrompts:
    """Upstream's ShareGPT sampling of ``entries`` (see the module docstring)."""
    order = seeded_order(entries, seed, disable_shuffle)
    specials = tokenizer.num_special_tokens
    prompts: list[str] = []
    media: list[list[dict[str, Any]]] = []  # each kept entry's image or video part
    outputs: list[int] = []
    lens: list[int] = []
    for start in range(0, len(order), batch_size):
        if len(prompts) >= num_requests:
            break
        batch = [_turns(entry) for entry in order[start : start + batch_size]]
        prompt_ids = tokenizer.encode_batch([prompt for prompt, _ in batch])
        completion_lens = (
            [
                len(ids) + specials
                for ids in tokenizer.encode_batch([completion for _, completion in batch])
            ]
            if output_len is None
            else [output_len] * len(batch)
        )
        for k, (prompt, _) in enumerate(batch):
            prompt_len = len(prompt_ids[k]) + specials
            out = completion_lens[k]
            if not is_valid_sequence(prompt_len, out, output_len is not None):
                continue
            media.append(media_parts(order[start + k]))
            prompts.append(prompt)
            outputs.append(out)
            lens.append(prompt_len)
            if len(prompts) >= num_requests:
                break
    if not prompts:
        raise ValueError("no ShareGPT entry passes upstream's length filter")
    kept = list(zip(prompts, media, strict=True))
    if not no_oversample:
        kept, outputs, lens = top_up(kept, outputs, lens, num_requests, seed)
    sampled = SampledPrompts.of([prompt for prompt, _ in kept], lens, outputs)
    if not any(media):
        return sampled
    return dataclasses.replace(sampled, mm_contents=[parts for _, parts in kept])


def media_parts(entry: dict) -> list[dict[str, Any]]:
    """The entry's image or video as the one part upstream sends with it (none without)."""
    image, video = entry.get("image"), entry.get("video")
    media, kind = (image, "image") if image else (video, "video")
    if not media:
        return []
    if not isinstance(media, str):
        raise ValueError(
            f"ShareGPT entry {entry.get('id', '?')!r}: its {kind} must be a URL or a path"
        )
    return [url_part(media, kind)]


def sample_sharegpt(
    rows: list[dict],
    path: str,
    tokenizer: TokenCodec,
    num_prompts: int,
    sharegpt_output_len: int | None,
    seed: int,
    disable_shuffle: bool,
    no_oversample: bool,
) -> SampledPrompts:
    """The ``sharegpt`` dataset from the file's entries and its flags."""
    with file_errors(path):
        return sample_sharegpt_requests(
            rows, tokenizer, num_prompts, sharegpt_output_len, seed, disable_shuffle, no_oversample
        )


def _turns(entry: dict) -> tuple[str, str]:
    turns = entry["conversations"]
    prompt, completion = (
        turn.get("value") if isinstance(turn, dict) else None for turn in turns[:2]
    )
    if not isinstance(prompt, str) or not isinstance(completion, str):
        raise ValueError(
            f"ShareGPT entry {entry.get('id', '?')!r}: the first two turns need a string 'value'"
        )
    return prompt, completion
