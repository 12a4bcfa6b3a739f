"""Each request's output length as upstream counts it: the server's usage, else re-tokenized."""

from __future__ import annotations

import numpy as np

from loadgen.text.tokenizer import TokenCodec


def resolve_output_lens(
    records: np.ndarray, texts: dict[int, str], tokenizer: TokenCodec | None
) -> np.ndarray:
    """usage.completion_tokens, or upstream's fallback: re-tokenize the text (or 1 without a
    tokenizer) when the server reported none; 0 for failed requests."""
    success = records["success"].astype(bool)
    out = np.where(success, np.maximum(records["completion_tokens"], 0), 0).astype(np.int64)
    need = np.flatnonzero(success & (out == 0))
    if len(need):
        if tokenizer is None:
            out[need] = 1
        else:
            encoded = tokenizer.encode_batch([texts.get(int(i), "") for i in need])
            out[need] = [len(ids) for ids in encoded]
    return out
