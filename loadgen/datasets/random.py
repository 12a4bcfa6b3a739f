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
decode -> encode loop (loadgen/datasets/to_target.py): encode(decode(ids)); stop if the length is
the target, else pad with random ids from the full base vocabulary or truncate, at most 10 times.
The prompt is the last decoded text, and ``prompt_len`` is the length of its encoding, which may
still miss the target. The loop runs in batch rounds over all unsettled prompts rather than
prompt by prompt: padding draws come from the same generator, but in round order rather than
prompt order, so for a given seed the prompts that needed padding are not byte-identical to
vLLM's; lengths, targets and the semantics are.

``--random-batch-size`` b > 1 (pooling backends) groups consecutive prompts into requests of b
texts whose ``prompt_len`` is the sum, as upstream. ``random-rerank`` draws one query and N
documents with the same machinery and sends [query, b documents] per request.
"""

from __future__ import annotations

import json
import math

import numpy as np

from loadgen.datasets.errors import flag_errors
from loadgen.datasets.progress import Progress
from loadgen.datasets.sampled_prompts import SampledPrompts, texts_of
from loadgen.datasets.to_target import TokenWindows, decode_encode_to_target
from loadgen.text.tokenizer import TokenCodec


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
    progress: Progress | None = None,
    token_ids: bool = False,
) -> SampledPrompts:
    """Build vLLM's ``random`` dataset (formulas in the module docstring); with ``token_ids``
    (the Rust client's --prompt-token-ids) each prompt is its token list, not decoded."""
    rng = np.random.default_rng(seed)
    plan = plan_random_text(
        tokenizer, num_requests, input_len, output_len, prefix_len, range_ratio, rng
    )
    input_lens, output_lens, offsets, allowed, prefix = plan
    token_lists = TokenWindows(prefix, allowed, offsets + np.arange(num_requests), input_lens)
    if token_ids:
        return token_id_prompts(token_lists, output_lens)
    targets = prefix_len + input_lens
    prompts, prompt_lens = decode_encode_to_target(tokenizer, token_lists, targets, rng, progress)
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=prompt_lens,
        output_lens=output_lens.astype(np.int64),
        length_mismatches=int(np.count_nonzero(prompt_lens != targets)),
    )


def token_id_prompts(token_lists: TokenWindows, output_lens: np.ndarray) -> SampledPrompts:
    """The token lists themselves as prompts, as the Rust client's --prompt-token-ids sends
    them: no decode -> encode, so each prompt_len is its list's length, exactly."""
    return SampledPrompts(
        prompts=[ids.tolist() for ids in token_lists.lists()],
        prompt_lens=len(token_lists.prefix) + token_lists.lengths.astype(np.int64),
        output_lens=output_lens.astype(np.int64),
    )


def plan_random_text(
    tokenizer: TokenCodec,
    num_requests: int,
    input_len: int,
    output_len: int,
    prefix_len: int,
    range_ratio: tuple[float, float],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The draws a random dataset starts with, in upstream's order, checked as upstream checks
    them: (input lengths, output lengths, offsets, the allowed ids, the shared prefix's ids)."""
    _validate(num_requests, input_len, output_len, prefix_len)
    num_special = tokenizer.num_special_tokens
    input_range, output_range = length_ranges(num_special, input_len, output_len, range_ratio)
    if prefix_len + input_range[0] < 1:
        raise ValueError(
            f"--random-prefix-len ({prefix_len}) plus the shortest input length "
            f"({input_range[0]}, from --random-input-len {input_len} minus {num_special} special "
            "tokens) must be >= 1"
        )
    input_lens, output_lens, offsets = draw_lengths(
        rng, num_requests, input_range, output_range, tokenizer.vocab_size
    )
    allowed = allowed_ids(tokenizer)
    prefix = np.empty(0, dtype=np.int64)
    if prefix_len > 0:
        drawn = allowed[rng.integers(0, len(allowed), size=prefix_len)]
        texts, _ = decode_encode_to_target(tokenizer, [drawn], np.array([prefix_len]), rng)
        # The settled text's encoding is the prefix vLLM prepends (possibly != prefix_len long).
        prefix = np.array(tokenizer.encode_batch(texts[:1])[0], np.int64)
    return input_lens, output_lens, offsets, allowed, prefix


def length_ranges(
    num_special: int, input_len: int, output_len: int, range_ratio: tuple[float, float]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Upstream's ``get_sampling_params`` bounds: the input range around ``input_len`` less the
    special tokens, and the output range, at least 1 (both inclusive)."""
    in_ratio, out_ratio = range_ratio
    real_in = max(0, input_len - num_special)
    return (
        (math.floor(real_in * (1 - in_ratio)), math.ceil(real_in * (1 + in_ratio))),
        (
            max(1, math.floor(output_len * (1 - out_ratio))),
            max(1, math.ceil(output_len * (1 + out_ratio))),
        ),
    )


def draw_lengths(
    rng: np.random.Generator,
    n: int,
    input_range: tuple[int, int],
    output_range: tuple[int, int],
    vocab_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upstream's ``get_sampling_params`` draws, in its order: input lengths, output lengths,
    then offsets into the vocabulary."""
    input_lens = rng.integers(input_range[0], input_range[1] + 1, size=n)
    output_lens = rng.integers(output_range[0], output_range[1] + 1, size=n)
    offsets = rng.integers(0, vocab_size, size=n)
    return input_lens, output_lens, offsets


def allowed_ids(tokenizer: TokenCodec) -> np.ndarray:
    """The ids random prompts are made of: the base vocabulary without special ids."""
    # Set iteration order, as vLLM builds it, decides which id each position maps to.
    return np.array(list(set(range(tokenizer.vocab_size)) - set(tokenizer.special_ids)))


def batch_prompts(sampled: SampledPrompts, batch_size: int) -> SampledPrompts:
    """``--random-batch-size``: consecutive prompts grouped ``batch_size`` to a request (the
    last may hold fewer), ``prompt_len`` summed, no output; unchanged for a size of 1."""
    if batch_size <= 1:
        return sampled
    texts = texts_of(sampled.prompts)
    starts = range(0, len(texts), batch_size)
    return SampledPrompts(
        prompts=[texts[i : i + batch_size] for i in starts],
        prompt_lens=np.add.reduceat(sampled.prompt_lens, np.array(starts, dtype=np.int64)),
        output_lens=np.zeros(len(starts), dtype=np.int64),
        length_mismatches=sampled.length_mismatches,
    )


def sample_random_rerank_requests(
    tokenizer: TokenCodec,
    num_documents: int,
    input_len: int,
    range_ratio: float,
    batch_size: int,
    is_reranker: bool,
    seed: int,
    progress: Progress | None = None,
) -> SampledPrompts:
    """Upstream's ``random-rerank``: one random query and ``num_documents`` random documents,
    sent as [query, up to ``batch_size`` documents] per request.

    For a native reranker (``is_reranker``) the query is ``input_len // 2 - 1`` tokens long and
    each document ``input_len - query - 1`` (one separator token per pair), and a request's
    prompt_len counts the query and its separator once per document. Otherwise (--no-reranker,
    scoring by embeddings) the query takes one of the documents' places: ``num_documents - 1``
    documents of ``input_len`` tokens, ``batch_size - 1`` per request, and the query counted
    once per request.
    """
    _validate(num_documents, input_len, 1, 0)
    if batch_size < 1:
        raise ValueError(f"--random-batch-size must be >= 1, got {batch_size}")
    if not is_reranker and (num_documents < 2 or batch_size < 2):
        raise ValueError(
            "--no-reranker needs --num-prompts and --random-batch-size of at least 2 "
            "(the query takes one place in each)"
        )
    separators = int(is_reranker)
    num_special = tokenizer.num_special_tokens
    rng = np.random.default_rng(seed)
    allowed = allowed_ids(tokenizer)

    def draw(n: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        ranges = length_ranges(num_special, length, 0, (range_ratio, range_ratio))
        lens, _, offsets = draw_lengths(rng, n, *ranges, tokenizer.vocab_size)
        return lens, offsets

    query_lens, query_offsets = draw(1, input_len // 2 - separators if is_reranker else input_len)
    query_len = int(query_lens[0])
    if is_reranker:
        doc_len = input_len - query_len - separators
    else:
        num_documents, batch_size, doc_len = num_documents - 1, batch_size - 1, input_len
    doc_lens, doc_offsets = draw(num_documents, doc_len)
    # The query is sequence 0 and document i sequence i + 1 of upstream's generator.
    lens = np.concatenate((query_lens, doc_lens))
    offsets = np.concatenate((query_offsets, doc_offsets))
    token_lists = TokenWindows(
        np.empty(0, dtype=np.int64), allowed, offsets + np.arange(len(lens)), lens
    )
    texts, counts = decode_encode_to_target(tokenizer, token_lists, lens, rng, progress)
    query, query_count = texts[0], int(counts[0])
    prompts, prompt_lens = [], []
    for start in range(0, num_documents, batch_size):
        docs = texts[1 + start : 1 + start + batch_size]
        per_query = (query_count + separators) * len(docs) if is_reranker else query_count
        prompts.append([query, *docs])
        prompt_lens.append(per_query + int(counts[1 + start : 1 + start + batch_size].sum()))
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=np.array(prompt_lens, dtype=np.int64),
        output_lens=np.zeros(len(prompts), dtype=np.int64),
        length_mismatches=int(np.count_nonzero(counts != lens)),
    )


def sample_random(
    tokenizer: TokenCodec,
    num_prompts: int,
    random_input_len: int,
    random_output_len: int,
    random_prefix_len: int,
    random_range_ratio: str,
    random_batch_size: int,
    seed: int,
    prompt_token_ids: bool = False,
    progress: Progress | None = None,
) -> SampledPrompts:
    """The ``random`` dataset from its flags, batched by --random-batch-size; token ids as
    prompts with --prompt-token-ids."""
    with flag_errors():
        sampled = sample_random_requests(
            tokenizer,
            num_prompts,
            random_input_len,
            random_output_len,
            random_prefix_len,
            parse_range_ratio(random_range_ratio),
            seed,
            progress,
            token_ids=prompt_token_ids,
        )
    return batch_prompts(sampled, random_batch_size)


def sample_random_rerank(
    tokenizer: TokenCodec,
    num_prompts: int,
    random_input_len: int,
    random_range_ratio: str,
    random_batch_size: int,
    no_reranker: bool,
    seed: int,
    progress: Progress | None = None,
) -> SampledPrompts:
    """The ``random-rerank`` dataset from its flags (the input range ratio applies)."""
    with flag_errors():
        return sample_random_rerank_requests(
            tokenizer,
            num_prompts,
            random_input_len,
            parse_range_ratio(random_range_ratio)[0],
            random_batch_size,
            not no_reranker,
            seed,
            progress,
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
