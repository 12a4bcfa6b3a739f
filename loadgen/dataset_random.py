"""vLLM's ``random`` dataset: prompts of random token ids with exact, seeded token lengths.

Lengths (``--seed`` s, N prompts, ``num_special`` = special tokens one encode adds):

    real_in     = max(0, input_len - num_special)
    input_len_i ~ U[floor(real_in (1 - r_in)), ceil(real_in (1 + r_in))]
    output_i    ~ U[max(1, floor(out (1 - r_out))), max(1, ceil(out (1 + r_out)))]
    offset_i    ~ U[0, vocab_size)

drawn in that order from ``np.random.default_rng(s)``, so lengths and offsets match vLLM's for the
same seed. Prompt i is ``prefix + allowed[(offset_i + i + arange(input_len_i)) % len(allowed)]``
with target ``prefix_len + input_len_i``, where ``allowed`` is the base vocabulary minus the special
ids and the prefix (shared by every prompt) is ``prefix_len`` random allowed ids.

Decoding then re-encoding ids is not injective, so each token list goes through vLLM's
decode -> encode loop: encode(decode(ids)); stop if the length is the target, else pad with random
ids from the full base vocabulary or truncate, at most 10 times. The prompt is the last decoded
text, and ``prompt_len`` is the length of its encoding, which may still miss the target.

Unlike vLLM, which runs that loop prompt by prompt, the loop runs in batch rounds over all unsettled
prompts (``decode_batch`` / ``encode_batch``, which release the GIL and use every core). Padding
draws come from the same generator, but in round order rather than prompt order, so for a given
seed the prompts that needed padding are not byte-identical to vLLM's; lengths, targets and the
semantics are.
"""

from __future__ import annotations

import json
import math

import numpy as np

from loadgen.sampled_prompts import SampledPrompts
from loadgen.tokenizer import TokenCodec

MAX_RETRY = 10


def parse_range_ratio(value: str) -> tuple[float, float]:
    """Parse ``--random-range-ratio``: ``"r"`` or ``'{"input": r_in, "output": r_out}'``."""
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    try:
        if isinstance(parsed, dict):
            ratios = (float(parsed["input"]), float(parsed["output"]))
        else:
            ratios = (float(parsed), float(parsed))
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"--random-range-ratio must be a number or a JSON object "
            f'{{"input": r, "output": r}}, got {value!r}'
        ) from None
    for ratio in ratios:
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"--random-range-ratio values must be in [0, 1), got {value!r}")
    return ratios


def sample_random_requests(
    tokenizer: TokenCodec,
    num_requests: int,
    input_len: int,
    output_len: int,
    prefix_len: int,
    range_ratio: tuple[float, float],
    seed: int,
) -> SampledPrompts:
    """Build vLLM's ``random`` dataset (formulas in the module docstring)."""
    _validate(num_requests, input_len, output_len, prefix_len)
    in_ratio, out_ratio = range_ratio
    num_special = tokenizer.num_special_tokens
    real_in = max(0, input_len - num_special)
    in_lo = math.floor(real_in * (1 - in_ratio))
    in_hi = math.ceil(real_in * (1 + in_ratio))
    out_lo = max(1, math.floor(output_len * (1 - out_ratio)))
    out_hi = max(1, math.ceil(output_len * (1 + out_ratio)))
    if prefix_len + in_lo < 1:
        raise ValueError(
            f"--random-prefix-len ({prefix_len}) plus the shortest input length ({in_lo}, "
            f"from --random-input-len {input_len} minus {num_special} special tokens) must be >= 1"
        )

    vocab_size = tokenizer.vocab_size
    rng = np.random.default_rng(seed)
    input_lens = rng.integers(in_lo, in_hi + 1, size=num_requests)
    output_lens = rng.integers(out_lo, out_hi + 1, size=num_requests)
    offsets = rng.integers(0, vocab_size, size=num_requests)
    # Set iteration order, as vLLM builds it, decides which id each position maps to.
    allowed = np.array(list(set(range(vocab_size)) - set(tokenizer.special_ids)))

    prefix = np.empty(0, dtype=np.int64)
    if prefix_len > 0:
        drawn = allowed[rng.integers(0, len(allowed), size=prefix_len)]
        texts, _ = _decode_encode_to_target(tokenizer, [drawn], np.array([prefix_len]), rng)
        # The settled text's encoding is the prefix vLLM prepends (possibly != prefix_len long).
        prefix = np.array(tokenizer.encode_batch(texts[:1])[0], np.int64)

    token_lists = _initial_token_lists(prefix, allowed, offsets, input_lens)
    targets = prefix_len + input_lens
    prompts, prompt_lens = _decode_encode_to_target(tokenizer, token_lists, targets, rng)
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=prompt_lens,
        output_lens=output_lens.astype(np.int64),
        length_mismatches=int(np.count_nonzero(prompt_lens != targets)),
    )


def _validate(num_requests: int, input_len: int, output_len: int, prefix_len: int) -> None:
    checks = (
        ("--num-prompts", num_requests, 1),
        ("--random-input-len", input_len, 0),
        ("--random-output-len", output_len, 1),
        ("--random-prefix-len", prefix_len, 0),
    )
    for flag, value, minimum in checks:
        if value < minimum:
            raise ValueError(f"{flag} must be >= {minimum}, got {value}")


def _initial_token_lists(
    prefix: np.ndarray, allowed: np.ndarray, offsets: np.ndarray, input_lens: np.ndarray
) -> list[np.ndarray]:
    """Token list i = prefix + allowed[(offsets[i] + i + arange(input_lens[i])) % len(allowed)]."""
    ends = np.cumsum(input_lens)
    # Position of every flat element within its own request: arange(total) - start of its request.
    within = np.arange(ends[-1]) - np.repeat(ends - input_lens, input_lens)
    starts = np.repeat(offsets + np.arange(len(offsets)), input_lens)
    inner = allowed[(starts + within) % len(allowed)]
    return [np.concatenate((prefix, part)) for part in np.split(inner, ends[:-1])]


def _decode_encode_to_target(
    tokenizer: TokenCodec,
    token_lists: list[np.ndarray] | list[list[int]],
    targets: np.ndarray,
    rng: np.random.Generator,
) -> tuple[list[str], np.ndarray]:
    """vLLM's ``gen_prompt_decode_to_target_len`` over a batch: returns (texts, token counts).

    Each round decodes and re-encodes every unsettled list. A list settles when its encoding has
    ``target`` tokens or after MAX_RETRY adjustments; otherwise it is truncated to ``target`` or
    padded with ``target - len`` ids drawn from ``U[0, vocab_size)``, special ids included.
    """
    vocab_size = tokenizer.vocab_size
    texts: list[str] = [""] * len(token_lists)
    lengths = np.zeros(len(token_lists), dtype=np.int64)
    pending = np.arange(len(token_lists))
    batch = list(token_lists)
    for attempt in range(MAX_RETRY + 1):
        decoded = tokenizer.decode_batch(batch)
        encoded = tokenizer.encode_batch(decoded)
        got = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        want = targets[pending]
        settled = (got == want) | (attempt == MAX_RETRY)
        for j in np.flatnonzero(settled):
            texts[pending[j]] = decoded[j]
        lengths[pending[settled]] = got[settled]

        unsettled = np.flatnonzero(~settled)
        if len(unsettled) == 0:
            break
        deficits = np.maximum(want[unsettled] - got[unsettled], 0)
        pads = np.split(rng.integers(0, vocab_size, size=deficits.sum()), np.cumsum(deficits)[:-1])
        batch = [
            encoded[j][: want[j]] + pad.tolist() for j, pad in zip(unsettled, pads, strict=True)
        ]
        pending = pending[unsettled]
    return texts, lengths
