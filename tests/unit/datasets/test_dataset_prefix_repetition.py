"""vLLM's ``prefix_repetition`` dataset: shared prefixes, upstream's draws, shuffle and RNG."""

from __future__ import annotations

import random

import numpy as np
import pytest

from loadgen.datasets.prefix_repetition import (
    sample_prefix_repetition_requests,
    settle_to_length,
)
from loadgen.schedule import arrival_offsets_s


def upstream_prefix_repetition(tok, n, prefix_len, suffix_len, num_prefixes, seed):
    """A literal transcription of upstream's loops on its global generator: np.random.seed,
    randint per sequence, gen_prompt_decode_to_target_len with np.random padding, random.shuffle.
    Returns the (prompt, prompt_len) rows and the generator, for the arrival draws after them."""
    np.random.seed(seed)
    random.seed(seed)

    def exact(target):
        ids = np.random.randint(0, tok.vocab_size, size=target).tolist()
        remain = 10
        while True:
            prompt = tok.decode_batch([ids])[0]
            ids = tok.encode_batch([prompt])[0]
            if remain <= 0 or len(ids) == target:
                break
            if len(ids) < target:
                ids.extend(np.random.randint(0, tok.vocab_size, size=target - len(ids)).tolist())
            else:
                ids = ids[:target]
            remain -= 1
        return ids

    rows = []
    for _ in range(num_prefixes):
        prefix = exact(prefix_len)
        for _ in range(n // num_prefixes):
            combined = prefix + exact(suffix_len)
            rows.append((tok.decode_batch([combined])[0], len(combined)))
    random.shuffle(rows)
    return rows


def test_prompts_lengths_order_and_arrivals_match_upstreams_loops(tok):
    ds = sample_prefix_repetition_requests(tok, 23, 40, 12, 4, 7, seed=11, disable_shuffle=False)
    rows = upstream_prefix_repetition(tok, 23, 40, 12, 4, seed=11)
    assert list(zip(ds.prompts, ds.prompt_lens.tolist(), strict=True)) == rows
    assert len(rows) == 20  # 4 prefixes x (23 // 4) prompts
    assert ds.output_lens.tolist() == [7] * 20
    # Upstream's gamma gaps come next from the same global generator.
    upstream_gaps = np.random.gamma(shape=1.0, scale=1 / 5.0, size=20)
    expected = np.cumsum(upstream_gaps) * (20 / 5.0) / upstream_gaps.sum()
    offsets = arrival_offsets_s(20, 5.0, 1.0, seed=11, rng=ds.arrival_rng)
    np.testing.assert_allclose(offsets, expected, rtol=1e-12)


def test_each_prefix_is_shared_by_its_group_of_prompts(tok):
    ds = sample_prefix_repetition_requests(tok, 9, 30, 5, 3, 4, seed=0, disable_shuffle=True)
    # Unshuffled: three groups of three, each group's prompts starting with the same text.
    for group in range(3):
        texts = ds.prompts[3 * group : 3 * group + 3]
        shared = min(len(t) for t in texts)
        while len({t[:shared] for t in texts}) > 1:
            shared -= 1
        prefix_text = tok.decode_batch([tok.encode_batch([texts[0]])[0][:30]])[0]
        assert shared >= len(prefix_text) - 8  # the 30-token prefix, give or take a token
    assert ds.prompts[0][:20] != ds.prompts[3][:20]  # different prefixes per group
    shuffled = sample_prefix_repetition_requests(tok, 9, 30, 5, 3, 4, seed=0, disable_shuffle=False)
    assert sorted(shuffled.prompts) == sorted(ds.prompts) and shuffled.prompts != ds.prompts


def test_settled_sequences_encode_to_their_ids(tok):
    rng = np.random.RandomState(3)
    for target in (0, 1, 17, 64):
        ids = rng.randint(0, tok.vocab_size, size=target).tolist()
        text, settled = settle_to_length(tok, ids, target, rng)
        assert tok.encode_batch([text])[0] == settled


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_prefixes": 0}, "--prefix-repetition-num-prefixes must be >= 1, got 0"),
        ({"num_requests": 3}, r"--num-prompts \(3\) must be >= --prefix-repetition-num-prefixes"),
        ({"prefix_len": 0, "suffix_len": 0}, "prefix-len plus --prefix-repetition-suffix-len"),
        ({"output_len": 0}, "--prefix-repetition-output-len must be >= 1, got 0"),
        ({"suffix_len": -1}, "--prefix-repetition-suffix-len must be >= 0, got -1"),
    ],
)
def test_invalid_arguments_name_the_flag(tok, kwargs, message):
    args = (
        dict(num_requests=10, prefix_len=8, suffix_len=8, num_prefixes=5, output_len=4, seed=0)
        | kwargs
    )
    with pytest.raises(ValueError, match=message):
        sample_prefix_repetition_requests(tok, **args, disable_shuffle=False)
