"""What every dataset sampler returns: the prompts to send, in order, with their token counts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.audio import AudioClip

# One request's prompt: a text; a list of texts for a batched pooling request
# (--random-batch-size, random-rerank: the query first, then documents); token ids (timed_trace);
# the content parts of a custom_image row given as "content".
Prompt = str | list[str] | list[int] | list[dict[str, Any]]


def texts_of(prompts: Sequence[Prompt]) -> list[str]:
    """``prompts`` as the texts they are (TypeError when one is not a text)."""
    texts = [prompt for prompt in prompts if isinstance(prompt, str)]
    if len(texts) != len(prompts):
        raise TypeError("these prompts are not all texts")
    return texts


@dataclass(frozen=True)
class SampledPrompts:
    """The prompts of a run with their token counts and requested output lengths."""

    prompts: Sequence[Prompt]  # one per request
    prompt_lens: np.ndarray  # int64 [N]: the prompt's tokens as the dataset counts them
    output_lens: np.ndarray  # int64 [N]: max_tokens to request
    length_mismatches: int = 0  # random: prompts whose length != target after MAX_RETRY retries
    # Datasets that draw from upstream's global np.random leave it here, advanced, for the
    # arrival gaps that upstream draws from it next; None: the schedule seeds its own.
    arrival_rng: np.random.RandomState | None = None
    # A trace's own send offsets in seconds (timed_trace), used when it is self-timed.
    trace_offsets_s: np.ndarray | None = None
    # random-mm, custom_image: each request's image (or video) parts, sent beside its text.
    mm_contents: list[list[dict[str, Any]]] | None = None
    # BFCL: each request's chat messages, sent as they are in place of the prompt's message,
    # and its body fields (tools, tool_choice), merged over --extra-body as upstream does.
    chat_messages: list[list[dict[str, Any]]] | None = None
    request_overrides: list[dict[str, Any]] | None = None
    # custom_audio, hf ASR with openai-audio: each request's upload (loadgen/audio.py).
    audios: list[AudioClip] | None = None

    @classmethod
    def of(
        cls,
        prompts: Sequence[Prompt],
        lens: Sequence[int],
        outputs: Sequence[int],
    ) -> SampledPrompts:
        """Prompts with their token counts and output lengths as plain lists."""
        return cls(
            prompts=prompts,
            prompt_lens=np.asarray(lens, dtype=np.int64),
            output_lens=np.asarray(outputs, dtype=np.int64),
        )


def seeded_order(items: list[dict], seed: int, disable_shuffle: bool) -> list[dict]:
    """Upstream's ``load_data`` order: ``random.seed(seed)`` then ``random.shuffle``, unless
    ``--disable-shuffle``."""
    order = list(items)
    if not disable_shuffle:
        random.Random(seed).shuffle(order)
    return order


def chosen_rows(rows: list[dict], num_requests: int, seed: int, disable_shuffle: bool) -> list:
    """Upstream's custom datasets' pick: the first ``num_requests`` rows in seeded order, or
    every row for ``num_requests`` 0 or less (``top_up`` then adds none)."""
    order = seeded_order(rows, seed, disable_shuffle)
    return order if num_requests <= 0 else order[:num_requests]


def top_up(
    prompts: list[Any], outputs: list[int], lens: list[int], num_requests: int, seed: int
) -> tuple[list[Any], list[int], list[int]]:
    """Upstream's ``maybe_oversample_requests``: too few samples are topped up to
    ``num_requests`` by ``random.choice`` draws after ``random.seed(seed)``."""
    missing = num_requests - len(prompts)
    if missing <= 0:
        return prompts, outputs, lens
    rng = random.Random(seed)
    picks = [rng.choice(range(len(prompts))) for _ in range(missing)]
    return (
        prompts + [prompts[i] for i in picks],
        outputs + [outputs[i] for i in picks],
        lens + [lens[i] for i in picks],
    )
