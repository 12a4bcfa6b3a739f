"""The Rust client's ``--max-model-len`` filter: prompts that cannot fit the model's context are
dropped before the schedule is made.

The rule is vllm-bench's (``filter_requests_by_max_model_len``): a request is kept when
``prompt_len + output_len <= max_model_len``, its lengths as the dataset counts them. The kept
requests keep their order, and with them every per-request field of the dataset (images, chat
messages, a trace's send times, ...).

A conversation's turn carries the conversation so far, so (as vllm-bench's
``filter_turns_by_max_model_len``) a turn fits when every earlier turn's prompt and expected
output, its own prompt and its own output add up to no more than ``max_model_len``: a
conversation is cut before its first turn that does not fit, and one whose first turn does not
fit is dropped whole.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from loadgen.datasets.conversations import Turns
from loadgen.datasets.sampled_prompts import SampledPrompts


def fits(prompt_lens: np.ndarray, output_lens: np.ndarray, max_model_len: int) -> np.ndarray:
    """A mask of the requests whose prompt and output fit ``max_model_len`` tokens."""
    return np.asarray(prompt_lens, np.int64) + np.asarray(output_lens, np.int64) <= max_model_len


def keep_fitting(sampled: SampledPrompts, max_model_len: int) -> tuple[SampledPrompts, int]:
    """The requests that fit ``max_model_len`` (``fits``), and how many were dropped."""
    mask = fits(sampled.prompt_lens, sampled.output_lens, max_model_len)
    dropped = int(np.count_nonzero(~mask))
    if dropped == 0:
        return sampled, 0
    return select_requests(sampled, np.flatnonzero(mask)), dropped


def select_requests(sampled: SampledPrompts, indices: np.ndarray) -> SampledPrompts:
    """The dataset cut to the requests at ``indices``: every field that holds one entry per
    request (a list or an array as long as the prompts) is cut the same way."""
    count = len(sampled.prompts)
    changes = {}
    for field in dataclasses.fields(sampled):
        value = getattr(sampled, field.name)
        if isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == count:
            changes[field.name] = value[indices]
        elif isinstance(value, list) and len(value) == count:
            changes[field.name] = [value[i] for i in indices]
    return dataclasses.replace(sampled, **changes)


def shortest_need(sampled: SampledPrompts) -> int:
    """The fewest tokens of context any request needs (prompt and output)."""
    return int((sampled.prompt_lens + sampled.output_lens).min())


def turns_fit(
    prompt_lens: np.ndarray, output_lens: np.ndarray, conversation: np.ndarray, max_model_len: int
) -> np.ndarray:
    """A mask of the turns whose conversation so far, with their own output, fits
    ``max_model_len`` (turns in conversation order, each conversation's turns in order)."""
    need = np.asarray(prompt_lens, np.int64) + np.asarray(output_lens, np.int64)
    total = np.cumsum(need)
    starts = np.flatnonzero(np.r_[True, conversation[1:] != conversation[:-1]])
    before = np.repeat(total[starts] - need[starts], np.diff(np.r_[starts, len(need)]))
    return total - before <= max_model_len  # within a conversation it only grows: a prefix


def keep_fitting_turns(
    sampled: SampledPrompts, turns: Turns, max_model_len: int
) -> tuple[SampledPrompts, Turns, int, int]:
    """The turns that fit (``turns_fit``), the conversations renumbered; and how many turns
    and whole conversations were dropped."""
    mask = turns_fit(sampled.prompt_lens, sampled.output_lens, turns.conversation, max_model_len)
    dropped = int(np.count_nonzero(~mask))
    if dropped == 0:
        return sampled, turns, 0, 0
    kept = np.flatnonzero(mask)
    left, conversation = np.unique(turns.conversation[kept], return_inverse=True)
    cut = Turns(conversation.astype(np.int64), turns.turn[kept], turns.think_ns[kept])
    return select_requests(sampled, kept), cut, dropped, turns.num_conversations - len(left)
