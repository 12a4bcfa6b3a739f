"""Output token counts: usage.completion_tokens, else upstream's fallback, in the coordinator."""

from __future__ import annotations

import numpy as np

from loadgen.report.output_lens import resolve_output_lens
from loadgen.text.tokenizer import MOCK_MODEL_NAME, LocalTokenizer, load_tokenizer
from workers.protocol import RECORD_DTYPE


def records(success: list[bool], completion_tokens: list[int]) -> np.ndarray:
    rows = np.zeros(len(success), dtype=RECORD_DTYPE)
    rows["index"] = np.arange(len(success))
    rows["success"] = success
    rows["completion_tokens"] = completion_tokens
    return rows


def test_usage_counts_when_reported_and_failures_count_zero() -> None:
    out = resolve_output_lens(records([True, False, True], [7, 9, 1]), {}, None)
    assert out.tolist() == [7, 0, 1]


def test_without_usage_the_text_is_re_tokenized_without_special_tokens() -> None:
    tokenizer = LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME))
    texts = {0: " the the the", 2: ""}
    expected = len(tokenizer.encode_batch([" the the the"])[0])
    assert expected == 3  # one token per " the" in the packaged tokenizer, no BOS
    # -1: no usage at all; 0: usage said zero tokens; both fall back, as upstream's `not output`.
    out = resolve_output_lens(records([True, True, True], [-1, 5, 0]), texts, tokenizer)
    assert out.tolist() == [3, 5, 0]


def test_without_usage_or_tokenizer_a_success_counts_one_token() -> None:
    out = resolve_output_lens(records([True, True, False], [-1, 4, -1]), {0: "x y z"}, None)
    assert out.tolist() == [1, 4, 0]
