"""vLLM's ``prefix_repetition`` dataset: groups of prompts that share a random prefix.

For each of ``num_prefixes`` prefixes, ``num_requests // num_prefixes`` prompts are built as
``decode(prefix_ids + suffix_ids)``, where the prefix and every suffix are random token ids
(from the whole base vocabulary, special ids included) settled by the decode -> encode loop:
re-encode; if the length is not the target, pad with random ids or truncate, at most 10 times.
``prompt_len`` is ``len(prefix_ids + suffix_ids)`` after settling. The requests are then
shuffled with ``random.Random(seed)`` unless ``--disable-shuffle``.

Upstream draws every id from the global ``np.random`` after ``np.random.seed(seed)``, one
sequence at a time, and its arrival gaps (``np.random.gamma``) continue from the same global
generator afterwards. So this module draws from one ``RandomState(seed)``, sequence by sequence
in upstream's order, and hands that generator on (``SampledPrompts.arrival_rng``) for the
schedule: prompts and arrival times are upstream's for the same seed.

The requests carry no request id upstream (no ``x-request-id`` header); the runner sends none.
"""

from __future__ import annotations

import random

import numpy as np

from loadgen.datasets.errors import flag_errors
from loadgen.datasets.progress import Progress
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.tokenizer import TokenCodec

MAX_RETRY = 10


def settle_to_length(
    tokenizer: TokenCodec, token_ids: list[int], target: int, rng: np.random.RandomState
) -> tuple[str, list[int]]:
    """Upstream's ``gen_prompt_decode_to_target_len`` with padding from the global generator:
    the last decoded text and its encoding (which may still miss ``target`` after 10 tries)."""
    for attempt in range(MAX_RETRY + 1):
        text = tokenizer.decode_batch([token_ids])[0]
        token_ids = tokenizer.encode_batch([text])[0]
        if attempt == MAX_RETRY or len(token_ids) == target:
            break
        if len(token_ids) < target:
            pad = rng.randint(0, tokenizer.vocab_size, size=target - len(token_ids))
            token_ids = token_ids + pad.tolist()
        else:
            token_ids = token_ids[:target]
    return text, token_ids


def sample_prefix_repetition_requests(
    tokenizer: TokenCodec,
    num_requests: int,
    prefix_len: int,
    suffix_len: int,
    num_prefixes: int,
    output_len: int,
    seed: int,
    disable_shuffle: bool,
    progress: Progress | None = None,
) -> SampledPrompts:
    """Build upstream's ``prefix_repetition`` dataset (see the module docstring)."""
    _validate(num_requests, prefix_len, suffix_len, num_prefixes, output_len)
    rng = np.random.RandomState(seed)
    vocab_size = tokenizer.vocab_size

    def random_ids(length: int) -> list[int]:
        ids = rng.randint(0, vocab_size, size=length).tolist()
        return settle_to_length(tokenizer, ids, length, rng)[1]

    per_prefix = num_requests // num_prefixes
    token_lists = []
    mismatches = 0
    for _ in range(num_prefixes):
        prefix = random_ids(prefix_len)
        mismatches += len(prefix) != prefix_len
        for _ in range(per_prefix):
            suffix = random_ids(suffix_len)
            mismatches += len(suffix) != suffix_len
            token_lists.append(prefix + suffix)
            if progress is not None:
                progress(len(token_lists), per_prefix * num_prefixes)
    prompts = tokenizer.decode_batch(token_lists)
    rows = list(zip(prompts, map(len, token_lists), strict=True))
    if not disable_shuffle:
        random.Random(seed).shuffle(rows)
    return SampledPrompts(
        prompts=[prompt for prompt, _ in rows],
        prompt_lens=np.array([length for _, length in rows], dtype=np.int64),
        output_lens=np.full(len(rows), output_len, dtype=np.int64),
        length_mismatches=mismatches,
        arrival_rng=rng,
    )


def sample_prefix_repetition(
    tokenizer: TokenCodec,
    num_prompts: int,
    prefix_repetition_prefix_len: int,
    prefix_repetition_suffix_len: int,
    prefix_repetition_num_prefixes: int,
    prefix_repetition_output_len: int,
    seed: int,
    disable_shuffle: bool,
    progress: Progress | None = None,
) -> SampledPrompts:
    """The ``prefix_repetition`` dataset from its flags."""
    with flag_errors():
        return sample_prefix_repetition_requests(
            tokenizer,
            num_prompts,
            prefix_repetition_prefix_len,
            prefix_repetition_suffix_len,
            prefix_repetition_num_prefixes,
            prefix_repetition_output_len,
            seed,
            disable_shuffle,
            progress,
        )


def _validate(
    num_requests: int, prefix_len: int, suffix_len: int, num_prefixes: int, output_len: int
) -> None:
    checks = (
        ("--prefix-repetition-prefix-len", prefix_len, 0),
        ("--prefix-repetition-suffix-len", suffix_len, 0),
        ("--prefix-repetition-num-prefixes", num_prefixes, 1),
        ("--prefix-repetition-output-len", output_len, 1),
    )
    for flag, value, minimum in checks:
        if value < minimum:
            raise ValueError(f"{flag} must be >= {minimum}, got {value}")
    if prefix_len + suffix_len < 1:
        raise ValueError(
            "--prefix-repetition-prefix-len plus --prefix-repetition-suffix-len must be >= 1"
        )
    if num_requests < num_prefixes:
        raise ValueError(
            f"--num-prompts ({num_requests}) must be >= --prefix-repetition-num-prefixes "
            f"({num_prefixes}): each prefix needs at least one prompt"
        )
