"""Each request's output length: the server's usage count, else the text re-tokenized."""

from __future__ import annotations

import numpy as np

from loadgen.config.sections import Server
from loadgen.records.collected import Collected
from loadgen.report.output_lens import resolve_output_lens
from loadgen.text.tokenizer import TokenCodec


def output_lens_of(config: Server, collected: Collected, tokenizer: TokenCodec) -> np.ndarray:
    """The run's output lengths: none for pooling, else ``resolve_output_lens``."""
    if config.pooling:
        return np.zeros(len(collected.records), dtype=np.int64)
    return resolve_output_lens(
        collected.records,
        collected.texts,
        None if config.skip_tokenizer_init else tokenizer,
    )
