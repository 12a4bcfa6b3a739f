"""The ``sharegpt`` dataset: a JSON list of conversations, sampled as upstream's ShareGPTDataset.

Upstream (reference §6.2): entries with at least two ``conversations`` turns are kept and
shuffled with ``random.seed(seed)`` unless ``--disable-shuffle``; then, in that order, turn 0 is
the prompt and turn 1 the completion. Both are tokenized with special tokens; the output length
is the completion's token count, or ``--sharegpt-output-len`` when given. An entry is skipped
unless prompt >= 4 tokens, output >= 4 (not checked with a fixed output length), prompt <= 1024
and prompt + output <= 2048. Sampling stops at ``--num-prompts`` kept entries; too few are topped
up by seeded draws unless ``--no-oversample``. Entries are tokenized in batches here, in order,
which keeps exactly the entries upstream's one-at-a-time loop keeps.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from loadgen.datasets.errors import file_errors
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
    outputs: list[int] = []
    lens: list[int] = []
    for start in range(0, len(order), batch_size):
        if len(prompts) >= num_requests:
            break
        batch = [_turns(entry) for entry in order[start : start + batch_size]]
        prompt_ids = tokenizer.encode_batch([prompt for prompt, _ in batch])
        completion_ids = (
            tokenizer.encode_batch([completion for _, completion in batch])
            if output_len is None
            else None
        )
        for k, (prompt, _) in enumerate(batch):
            prompt_len = len(prompt_ids[k]) + specials
            out = output_len if completion_ids is None else len(completion_ids[k]) + specials
            if not is_valid_sequence(prompt_len, out, output_len is not None):
                continue
            entry = order[start + k]
            if "image" in entry or "video" in entry:
                raise ValueError(
                    "not supported yet: ShareGPT entries with an image or video "
                    f"(entry {entry.get('id', '?')!r})"
                )
            prompts.append(prompt)
            outputs.append(out)
            lens.append(prompt_len)
            if len(prompts) >= num_requests:
                break
    if not prompts:
        raise ValueError("no ShareGPT entry passes upstream's length filter")
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    return SampledPrompts.of(prompts, lens, outputs)


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
