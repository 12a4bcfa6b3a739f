"""What every dataset sampler returns: the prompts to send, in order, with their token counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampledPrompts:
    """The prompts of a run with their token counts and requested output lengths."""

    prompts: list[str]
    prompt_lens: np.ndarray  # int64 [N]: the prompt's tokens as the dataset counts them
    output_lens: np.ndarray  # int64 [N]: max_tokens to request
    length_mismatches: int = 0  # random: prompts whose length != target after MAX_RETRY retries
