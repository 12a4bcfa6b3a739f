"""The ``custom`` dataset: a JSONL file of ``{"prompt": ...}`` lines, sampled as upstream does.

Upstream's ``CustomDataset`` (reference §6.2): the lines are shuffled with ``random.seed(seed)``
unless ``--disable-shuffle``; the first ``--num-prompts`` are taken; ``prompt_len`` is the
prompt's token count with special tokens; every request asks for ``--custom-output-len`` tokens,
or, at -1, for the line's own ``output_tokens``. When the file has fewer lines than
``--num-prompts``, the rest are drawn with ``random.choice`` after re-seeding, unless
``--no-oversample``. Upstream's global ``random`` calls give the same draws as a
``random.Random(seed)`` of their own, which is what is used here. Unless
``--skip-chat-template``, each chosen prompt is first rendered as a user message with the
tokenizer's chat template (``loadgen/text/chat_template.py``), and counted as rendered.

``spec_bench`` (Spec-Bench's ``question.jsonl``) is sampled the same way from each question's
first turn, as upstream's ``SpecBench`` subclass of ``CustomDataset`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadgen.datasets.errors import file_errors
from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.sampled_prompts import SampledPrompts, chosen_rows, top_up
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec

OUTPUT_LEN_FROM_FILE = -1


def load_custom_rows(path: str) -> list[dict]:
    """The JSON objects of a ``.jsonl`` file, each with a string ``prompt``; blank lines skipped.

    Raises ValueError naming the file (and line) at fault.
    """
    if not path.endswith(".jsonl"):
        raise ValueError(f"--dataset-path {path}: --dataset-name custom reads only .jsonl files")
    rows = []
    for number, row in json_lines(path):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise ValueError(f'{path}:{number}: each line must be an object with a string "prompt"')
        rows.append(row)
    if not rows:
        raise ValueError(f"--dataset-path {path}: the file has no prompts")
    return rows


def load_spec_bench_rows(path: str, category: str | None) -> list[dict]:
    """Spec-Bench's ``question.jsonl`` as custom rows: each line's first turn is the prompt; with
    ``category`` (--spec-bench-category) only that category's lines. Raises ValueError naming
    the file (and line) at fault."""
    rows = []
    for number, row in json_lines(path):
        turns = row.get("turns") if isinstance(row, dict) else None
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str):
            raise ValueError(f'{path}:{number}: each line needs "turns", a list of strings')
        if not category or row.get("category") == category:
            rows.append({"prompt": turns[0]})
    if not rows:
        which = f" of category {category!r}" if category else ""
        raise ValueError(f"--dataset-path {path}: the file has no questions{which}")
    return rows


def sample_custom_requests(
    rows: list[dict],
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int,
    seed: int,
    disable_shuffle: bool = False,
    no_oversample: bool = False,
    template: Callable[[str], str] | None = None,
) -> SampledPrompts:
    """Upstream's custom sampling of ``rows`` (see the module docstring); pure but for encoding.
    ``template`` renders a prompt as the chat template does."""
    chosen = chosen_rows(rows, num_requests, seed, disable_shuffle)
    prompts = [row["prompt"] for row in chosen]
    if template is not None:
        prompts = [template(prompt) for prompt in prompts]
    outputs = [
        row_output_len(row, output_len, f"the prompt {row['prompt'][:40]!r}") for row in chosen
    ]
    lens = [len(ids) + tokenizer.num_special_tokens for ids in tokenizer.encode_batch(prompts)]
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    return SampledPrompts.of(prompts, lens, outputs)


def load_spec_bench(path: str, spec_bench_category: str | None) -> list[dict]:
    """Spec-Bench's questions, of --spec-bench-category when given."""
    return load_spec_bench_rows(path, spec_bench_category)


def sample_custom(
    rows: list[dict],
    path: str,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None,
    num_prompts: int,
    custom_output_len: int,
    seed: int,
    disable_shuffle: bool,
    no_oversample: bool,
    chat_template_kwargs: dict[str, Any] | None,
) -> SampledPrompts:
    """The ``custom`` dataset from the file's rows and its flags; templated when
    ``chat_template`` is given, with --chat-template-kwargs."""
    with file_errors(path):
        return sample_custom_requests(
            rows,
            tokenizer,
            num_prompts,
            custom_output_len,
            seed,
            disable_shuffle,
            no_oversample,
            template=_template_function(chat_template, chat_template_kwargs),
        )


def sample_spec_bench(
    rows: list[dict],
    path: str,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None,
    num_prompts: int,
    spec_bench_output_len: int,
    disable_shuffle: bool,
    no_oversample: bool,
) -> SampledPrompts:
    """The ``spec_bench`` dataset: sampled as ``custom``, but as upstream builds it, with seed
    0 and no --chat-template-kwargs."""
    with file_errors(path):
        return sample_custom_requests(
            rows,
            tokenizer,
            num_prompts,
            spec_bench_output_len,
            0,
            disable_shuffle,
            no_oversample,
            template=_template_function(chat_template, None),
        )


def _template_function(
    template: ChatTemplate | None, kwargs: dict[str, Any] | None
) -> Callable[[str], str] | None:
    if template is None:
        return None
    return lambda prompt: template.render_user_prompt(prompt, kwargs)


def row_output_len(row: dict, output_len: int, what: str) -> int:
    """``output_len``, or with --custom-output-len -1 the line's ``output_tokens``; ValueError
    naming ``what`` (the line's prompt or audio) when that is not a positive integer."""
    if output_len != OUTPUT_LEN_FROM_FILE:
        return output_len
    value = row.get("output_tokens")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            '--custom-output-len -1 takes each line\'s "output_tokens", a positive integer; '
            f"got {value!r} for {what}"
        )
    return value


def check_custom(custom_output_len: int) -> None:
    """Refuse (ValueError) an output length that is neither at least 1 nor -1 (each line's)."""
    if custom_output_len < 1 and custom_output_len != -1:
        raise ValueError(
            f"--custom-output-len must be >= 1, or -1 for each line's output_tokens; "
            f"got {custom_output_len}"
        )


def check_spec_bench(spec_bench_output_len: int) -> None:
    """Refuse (ValueError) an output length below 1."""
    if spec_bench_output_len < 1:
        raise ValueError(f"--spec-bench-output-len must be >= 1, got {spec_bench_output_len}")
