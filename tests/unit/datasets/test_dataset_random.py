"""Tests for vLLM's ``random`` dataset: lengths, seeds, the prefix and the encode invariant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.datasets.random import (
    batch_prompts,
    parse_range_ratio,
    sample_random_requests,
    sample_random_rerank_requests,
)
from loadgen.datasets.sampled_prompts import SampledPrompts, texts_of


def encoded_len(tok, text: str) -> int:
    return len(tok.encode_batch([text])[0])


def common_prefix(texts: list[str]) -> str:
    """The longest string every text starts with (character by character)."""
    first, last = min(texts), max(texts)
    size = next(
        (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first)
    )
    return first[:size]


# --- parse_range_ratio -----------------------------------------------------------------------


def test_range_ratio_scalar():
    assert parse_range_ratio("0.1") == (0.1, 0.1)
    assert parse_range_ratio("0") == (0.0, 0.0)


def test_range_ratio_json():
    assert parse_range_ratio('{"input": 0.1, "output": 0.2}') == (0.1, 0.2)


@pytest.mark.parametrize("value", ["1", "1.0", "-0.1", "nan", '{"input": 0.1, "output": 1.5}'])
def test_range_ratio_out_of_range(value):
    with pytest.raises(ValueError, match="--random-range-ratio") as exc:
        parse_range_ratio(value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "value", ["abc", "", "[0.1]", '{"input": 0.1}', '{"input": "x", "output": 0}']
)
def test_range_ratio_garbage(value):
    with pytest.raises(ValueError, match="--random-range-ratio") as exc:
        parse_range_ratio(value)
    assert "\n" not in str(exc.value)


# --- sample_random_requests --------------------------------------------------------------------


def test_same_seed_same_dataset(tok):
    a = sample_random_requests(tok, 50, 100, 20, 10, (0.5, 0.5), seed=7)
    b = sample_random_requests(tok, 50, 100, 20, 10, (0.5, 0.5), seed=7)
    assert a.prompts == b.prompts
    np.testing.assert_array_equal(a.prompt_lens, b.prompt_lens)
    np.testing.assert_array_equal(a.output_lens, b.output_lens)
    assert a.length_mismatches == b.length_mismatches


def test_different_seed_different_dataset(tok):
    a = sample_random_requests(tok, 50, 100, 20, 10, (0.5, 0.5), seed=7)
    b = sample_random_requests(tok, 50, 100, 20, 10, (0.5, 0.5), seed=8)
    assert a.prompts != b.prompts
    assert not np.array_equal(a.output_lens, b.output_lens)


def test_prompt_len_is_the_encoded_length(tok):
    ds = sample_random_requests(tok, 200, 100, 20, 0, (0.3, 0.0), seed=0)
    assert len(ds.prompts) == len(ds.prompt_lens) == len(ds.output_lens) == 200
    assert ds.prompt_lens.dtype == np.int64 and ds.output_lens.dtype == np.int64
    assert [encoded_len(tok, p) for p in ds.prompts] == ds.prompt_lens.tolist()


def test_targets_follow_vllm_draws_and_are_met(tok):
    n, seed, ratio = 200, 3, 0.3
    ds = sample_random_requests(tok, n, 100, 20, 0, (ratio, ratio), seed=seed)
    # The first draws of default_rng(seed) are the input lengths, as in vLLM; 1 special token.
    lo, hi = math.floor(99 * (1 - ratio)), math.ceil(99 * (1 + ratio))
    targets = np.random.default_rng(seed).integers(lo, hi + 1, size=n)
    missed = np.count_nonzero(ds.prompt_lens != targets)
    assert missed == ds.length_mismatches
    assert missed <= n // 10  # decode/encode round trips that never settle are rare
    assert np.all(np.abs(ds.prompt_lens - targets) <= 3)


def test_input_lens_within_bounds(tok):
    ratio = 0.5
    ds = sample_random_requests(tok, 300, 100, 20, 0, (ratio, 0.0), seed=1)
    lo, hi = math.floor(99 * (1 - ratio)), math.ceil(99 * (1 + ratio))
    outside = (ds.prompt_lens < lo) | (ds.prompt_lens > hi)
    assert np.count_nonzero(outside) <= ds.length_mismatches
    assert ds.prompt_lens.min() < 60 and ds.prompt_lens.max() > 140  # the range is used


def test_output_lens_within_bounds(tok):
    ds = sample_random_requests(tok, 300, 20, 10, 0, (0.0, 0.5), seed=2)
    assert ds.output_lens.min() >= 5 and ds.output_lens.max() <= 15
    assert len(set(ds.output_lens.tolist())) > 5


def test_output_lens_at_least_one(tok):
    ds = sample_random_requests(tok, 100, 20, 1, 0, (0.0, 0.9), seed=2)
    assert set(ds.output_lens.tolist()) <= {1, 2}
    assert ds.output_lens.min() == 1


def test_zero_range_ratio_gives_equal_lengths(tok):
    ds = sample_random_requests(tok, 100, 64, 32, 0, (0.0, 0.0), seed=4)
    assert np.count_nonzero(ds.prompt_lens != 63) == ds.length_mismatches
    assert set(ds.output_lens.tolist()) == {32}


def test_prefix_is_shared(tok):
    prefix_len = 40
    ds = sample_random_requests(tok, 50, 30, 8, prefix_len, (0.5, 0.0), seed=5)
    common = common_prefix(ds.prompts)
    assert encoded_len(tok, common) >= prefix_len
    # The prefix tokens decode to the same text in every prompt (the last one may merge with
    # the first token after it).
    heads = set(tok.decode_batch([ids[: prefix_len - 1] for ids in tok.encode_batch(ds.prompts)]))
    assert len(heads) == 1
    assert common.startswith(heads.pop())


def test_no_prefix_means_no_shared_text(tok):
    ds = sample_random_requests(tok, 50, 30, 8, 0, (0.0, 0.0), seed=5)
    assert encoded_len(tok, common_prefix(ds.prompts)) <= 2


def test_targets_include_prefix(tok):
    ds = sample_random_requests(tok, 100, 30, 8, 20, (0.0, 0.0), seed=6)
    assert np.count_nonzero(ds.prompt_lens != 20 + 29) == ds.length_mismatches
    assert ds.length_mismatches <= 10


def test_prefix_only_prompts(tok):
    # input_len 1 leaves no room after the BOS token: every prompt is just the prefix.
    ds = sample_random_requests(tok, 10, 1, 8, 12, (0.0, 0.0), seed=0)
    assert len(set(ds.prompts)) == 1
    assert [encoded_len(tok, p) for p in ds.prompts] == ds.prompt_lens.tolist()


@pytest.mark.parametrize(("input_len", "ratio"), [(1, 0.0), (0, 0.0), (10, 0.95)])
def test_error_when_prompt_can_be_empty(tok, input_len, ratio):
    with pytest.raises(ValueError, match="--random-prefix-len") as exc:
        sample_random_requests(tok, 10, input_len, 8, 0, (ratio, 0.0), seed=0)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"num_requests": 0}, "--num-prompts"),
        ({"input_len": -1}, "--random-input-len"),
        ({"output_len": 0}, "--random-output-len"),
        ({"prefix_len": -1}, "--random-prefix-len"),
    ],
)
def test_invalid_arguments(tok, kwargs, flag):
    args = {
        "num_requests": 5,
        "input_len": 10,
        "output_len": 5,
        "prefix_len": 0,
        "range_ratio": (0.0, 0.0),
        "seed": 0,
    }
    with pytest.raises(ValueError, match=flag) as exc:
        sample_random_requests(tok, **(args | kwargs))
    assert "\n" not in str(exc.value)


# --- batches and random-rerank ----------------------------------------------------------------


def test_batches_group_consecutive_prompts_and_sum_their_lengths(tok):
    single = sample_random_requests(tok, 10, 32, 8, 0, (0.2, 0.0), seed=5)
    batched = batch_prompts(single, 4)
    assert batched.prompts == [single.prompts[0:4], single.prompts[4:8], single.prompts[8:10]]
    lens = single.prompt_lens
    assert batched.prompt_lens.tolist() == [lens[0:4].sum(), lens[4:8].sum(), lens[8:].sum()]
    assert batched.output_lens.tolist() == [0, 0, 0]
    assert batch_prompts(single, 1) is single


def test_only_texts_are_batched():
    assert texts_of(["a", "b", "c"]) == ["a", "b", "c"]
    ids = SampledPrompts.of([[1, 2], [3]], [2, 1], [2, 2])  # timed_trace's token ids
    with pytest.raises(TypeError, match="not all texts"):
        batch_prompts(ids, 2)


def upstream_rerank_lengths(tok, n, input_len, ratio, seed, reranker=True):
    """The query and document lengths of upstream's RandomDatasetForReranking, drawn the way it
    draws them: get_sampling_params for 1 query, then for the documents, from one generator."""
    rng = np.random.default_rng(seed)
    special = 1  # the packaged tokenizer adds BOS

    def draw(count, length):
        real = max(0, length - special)
        lo, hi = math.floor(real * (1 - ratio)), math.ceil(real * (1 + ratio))
        lens = rng.integers(lo, hi + 1, size=count)
        rng.integers(1, 2, size=count)  # the output lengths, unused
        rng.integers(0, tok.vocab_size, size=count)  # the offsets
        return lens

    query = int(draw(1, input_len // 2 - 1 if reranker else input_len)[0])
    docs = draw(n - (0 if reranker else 1), input_len - query - 1 if reranker else input_len)
    return query, docs


def test_rerank_requests_hold_the_query_then_batch_documents(tok):
    ds = sample_random_rerank_requests(tok, 10, 64, 0.25, 4, True, seed=2)
    query_len, doc_lens = upstream_rerank_lengths(tok, 10, 64, 0.25, 2)
    assert [len(p) for p in ds.prompts] == [5, 5, 3]  # [query, 4 docs], ..., [query, 2 docs]
    query = ds.prompts[0][0]
    assert all(p[0] == query for p in ds.prompts)
    assert ds.length_mismatches == 0  # the packaged tokenizer settles every sequence
    assert encoded_len(tok, query) == query_len
    docs = [d for p in ds.prompts for d in p[1:]]
    assert [encoded_len(tok, d) for d in docs] == doc_lens.tolist()
    # A reranker reads the query and a separator once per document.
    per_doc = query_len + 1
    expected = [per_doc * 4 + doc_lens[0:4].sum(), per_doc * 4 + doc_lens[4:8].sum()]
    assert ds.prompt_lens.tolist() == [*expected, per_doc * 2 + doc_lens[8:].sum()]
    assert ds.output_lens.tolist() == [0, 0, 0]
    same = sample_random_rerank_requests(tok, 10, 64, 0.25, 4, True, seed=2)
    assert same.prompts == ds.prompts


def test_no_reranker_gives_the_query_a_document_place(tok):
    ds = sample_random_rerank_requests(tok, 9, 20, 0.0, 3, False, seed=0)
    query_len, doc_lens = upstream_rerank_lengths(tok, 9, 20, 0.0, 0, reranker=False)
    assert query_len == 19 and doc_lens.tolist() == [19] * 8
    assert [len(p) for p in ds.prompts] == [3, 3, 3, 3]  # 8 documents, 2 per request
    # The query counted once per request; each document as it encodes.
    counted = [sum(encoded_len(tok, text) for text in p) for p in ds.prompts]
    assert ds.prompt_lens.tolist() == counted
    assert counted[0] == 19 * 3
    with pytest.raises(ValueError, match="--no-reranker needs"):
        sample_random_rerank_requests(tok, 9, 20, 0.0, 1, False, seed=0)
