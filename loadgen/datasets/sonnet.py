"""vLLM's ``sonnet`` dataset (deprecated upstream): prompts of poem lines picked at random.

Upstream's ``SonnetDataset``: the prompt is "Pick as many lines as you can from these poem
lines:\\n" followed by the file's first lines (the prefix, about ``prefix_len`` tokens) and
``random.choices`` lines (about ``input_len`` tokens in all, from the lines' average token
count, special tokens included), drawn from the generator that ``--seed`` seeded. A prompt is
kept when its chat-templated length is at most ``input_len`` and drawn again otherwise;
``prompt_len`` is that templated length. The chat backend gets the raw prompt (the server
templates it), the others the templated text.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from loadgen.backends import CHAT_BACKENDS
from loadgen.datasets.errors import FlagError
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec

BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"
MAX_DRAWS_PER_PROMPT = 1000  # upstream draws forever; a prompt that never fits is an error


def load_sonnet_lines(path: str) -> list[str]:
    """The file's lines, line ends kept, as upstream's ``readlines``."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--dataset-path {path}: {exc}") from None
    if not lines:
        raise ValueError(f"--dataset-path {path}: the file has no lines")
    return lines


def sample_sonnet_requests(
    lines: list[str],
    tokenizer: TokenCodec,
    template: Callable[[str], str],
    num_requests: int,
    input_len: int,
    prefix_len: int,
    output_len: int,
    seed: int,
    send_templated: bool,
) -> SampledPrompts:
    """Upstream's sonnet sampling (see the module docstring); ``template`` renders a prompt as
    one user message with the generation prompt."""
    special = tokenizer.num_special_tokens

    def count(texts: list[str]) -> list[int]:  # tokenizer(text).input_ids, special tokens in
        return [len(ids) + special for ids in tokenizer.encode_batch(texts)]

    average = sum(count(lines)) / len(lines)
    base_offset = count([template(BASE_PROMPT)])[0]
    if input_len <= base_offset:
        raise FlagError(
            f"--sonnet-input-len ({input_len}) must be higher than the base prompt length "
            f"({base_offset})"
        )
    num_input_lines = round((input_len - base_offset) / average)
    num_prefix_lines = max(round((prefix_len - base_offset) / average), 0)
    prefix = lines[:num_prefix_lines]
    rng = random.Random(seed)  # upstream: the global generator, seeded with --seed
    prompts: list[str] = []
    prompt_lens: list[int] = []
    draws = 0
    while len(prompts) < num_requests:
        draws += 1
        if draws > MAX_DRAWS_PER_PROMPT * num_requests:
            raise FlagError(
                f"--sonnet-input-len {input_len}: after {draws - 1} draws only {len(prompts)} "
                "prompts fit; raise it or lower --sonnet-prefix-len"
            )
        extra = rng.choices(lines, k=num_input_lines - num_prefix_lines)
        prompt = BASE_PROMPT + "".join(prefix + extra)
        formatted = template(prompt)
        length = count([formatted])[0]
        if length <= input_len:
            prompts.append(formatted if send_templated else prompt)
            prompt_lens.append(length)
    return SampledPrompts.of(prompts, prompt_lens, [output_len] * len(prompts))


def sample_sonnet(
    rows: list[str],
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None,
    num_prompts: int,
    sonnet_input_len: int,
    sonnet_prefix_len: int,
    sonnet_output_len: int,
    seed: int,
    backend: str,
) -> SampledPrompts:
    """The ``sonnet`` dataset from the file's lines and its flags."""
    assert chat_template is not None  # validate() keeps sonnet from --skip-tokenizer-init
    return sample_sonnet_requests(
        rows,
        tokenizer,
        chat_template.render_user_prompt,
        num_prompts,
        sonnet_input_len,
        sonnet_prefix_len,
        sonnet_output_len,
        seed,
        send_templated=backend not in CHAT_BACKENDS,  # the server templates chat
    )


def check_sonnet(skip_tokenizer_init: bool) -> None:
    """Refuse (ValueError) a sonnet run without a tokenizer: its prompts are measured with the
    tokenizer's chat template."""
    if skip_tokenizer_init:
        raise ValueError(
            "--dataset-name sonnet measures its prompts with the tokenizer's chat "
            "template; --skip-tokenizer-init leaves none"
        )
