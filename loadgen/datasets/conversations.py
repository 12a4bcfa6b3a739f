"""Conversations for ``--multi-turn``: synthetic ones from the random dataset, or ShareGPT's
own, every turn of them, as the Rust client builds them.

A run's requests are its conversations' turns laid out one conversation after another
(``prompts[i]`` is turn ``turn[i]`` of conversation ``conversation[i]``); each turn's prompt is
only its user message: the history (earlier turns and the server's answers) is added by the
worker that holds the conversation (workers/conversations.py). ``think_ns[i]`` is the think time
before turn i (0 before a first turn).

- **random**: each conversation has ``--multi-turn-num-turns`` turns, or a count drawn from
  ``[--multi-turn-min-turns, --multi-turn-max-turns]`` with ``--seed``; its first turn has
  ``--random-input-len`` tokens, later ones ``--per-turn-input-len`` (or the same), each built
  as the random dataset builds a prompt; every turn asks for ``--random-output-len`` tokens.
- **sharegpt**: entries with at least two human/assistant pairs, in seeded order; each human
  message is a turn (up to ``--multi-turn-max-turns``; 0: all), asking for as many tokens as
  the recorded answer has, or ``--sharegpt-output-len``; ``--num-prompts`` conversations (no
  oversampling: a conversation is not repeated).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.datasets.sampled_prompts import SampledPrompts, seeded_order
from loadgen.text.tokenizer import TokenCodec

THINK_SEED_OFFSET = 0x7E1  # think times draw from their own generator, seeded from --seed


@dataclass(frozen=True)
class Turns:
    """Which conversation each request belongs to, its turn, and the think time before it."""

    conversation: np.ndarray  # int64 [N]
    turn: np.ndarray  # int64 [N]
    think_ns: np.ndarray  # int64 [N]

    @property
    def num_conversations(self) -> int:
        """How many conversations the run has."""
        return int(self.conversation.max()) + 1 if len(self.conversation) else 0

    def frame(self, indices: np.ndarray) -> np.ndarray:
        """The [len(indices), 3] int64 array a worker's SHARD carries for these requests."""
        return np.stack(
            [self.conversation[indices], self.turn[indices], self.think_ns[indices]], axis=1
        ).astype(np.int64)

    @classmethod
    def of(cls, counts: list[int] | np.ndarray, think_ns: np.ndarray) -> Turns:
        """The turns of conversations with ``counts[c]`` turns each, in conversation order."""
        counts = np.asarray(counts, dtype=np.int64)
        conversation = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        turn = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
        return cls(conversation, turn, np.where(turn > 0, think_ns, 0).astype(np.int64))


def turn_counts(conversations: int, low: int, high: int, seed: int) -> np.ndarray:
    """Each synthetic conversation's turn count: ``low`` when ``low == high``, else drawn
    uniformly from [low, high] with ``seed``."""
    if low == high:
        return np.full(conversations, low, dtype=np.int64)
    return np.random.default_rng(seed).integers(low, high + 1, size=conversations)


def think_times_ns(count: int, mean_ms: float, distribution: str, seed: int) -> np.ndarray:
    """``count`` think times: ``mean_ms`` each (fixed), or exponential with that mean."""
    if mean_ms <= 0:
        return np.zeros(count, dtype=np.int64)
    if distribution == "fixed":
        return np.full(count, round(mean_ms * 1e6), dtype=np.int64)
    rng = np.random.default_rng(seed + THINK_SEED_OFFSET)
    return np.round(rng.exponential(mean_ms * 1e6, size=count)).astype(np.int64)


def synthetic_conversations(
    config: Any, build: Any, tokenizer: TokenCodec
) -> tuple[SampledPrompts, Turns]:
    """Random conversations: first turns and later turns built by ``build`` (the random
    dataset's builder, given a config), laid out conversation by conversation."""
    low = config.multi_turn_min_turns or config.multi_turn_num_turns
    high = config.multi_turn_max_turns or config.multi_turn_num_turns
    counts = turn_counts(config.num_prompts, low, high, config.seed)
    later = int(counts.sum()) - len(counts)
    firsts = build(dataclasses.replace(config, num_prompts=len(counts)))
    rest = None
    if later:
        rest = build(
            dataclasses.replace(
                config,
                num_prompts=later,
                random_input_len=config.per_turn_input_len or config.random_input_len,
                random_prefix_len=0,  # the prefix is the conversation's start: turn 0 has it
                seed=config.seed + 1,
            )
        )
    prompts: list[Any] = []
    lens: list[int] = []
    outputs: list[int] = []
    j = 0
    for c, n in enumerate(counts):
        prompts.append(firsts.prompts[c])
        lens.append(int(firsts.prompt_lens[c]))
        outputs.append(int(firsts.output_lens[c]))
        for _ in range(int(n) - 1):
            assert rest is not None
            prompts.append(rest.prompts[j])
            lens.append(int(rest.prompt_lens[j]))
            outputs.append(int(rest.output_lens[j]))
            j += 1
    think = think_times_ns(len(prompts), config.multi_turn_delay_ms,
                           config.multi_turn_delay_distribution, config.seed)  # fmt: skip
    mismatches = firsts.length_mismatches + (rest.length_mismatches if rest else 0)
    sampled = dataclasses.replace(
        SampledPrompts.of(prompts, lens, outputs), length_mismatches=mismatches
    )
    return sampled, Turns.of(counts, think)


def sharegpt_conversations(
    entries: list[dict],
    tokenizer: TokenCodec,
    conversations: int,
    max_turns: int,
    output_len: int | None,
    seed: int,
    delay_ms: float = 0.0,
    distribution: str = "fixed",
) -> tuple[SampledPrompts, Turns]:
    """ShareGPT's conversations, every human turn of them (see the module docstring)."""
    order = seeded_order(
        [e for e in entries if len(e.get("conversations") or []) >= 4], seed, False
    )
    if not order:
        raise ValueError("no ShareGPT entry has two human/assistant pairs, as --multi-turn needs")
    specials = tokenizer.num_special_tokens
    prompts: list[str] = []
    lens: list[int] = []
    outputs: list[int] = []
    counts: list[int] = []
    for entry in order:
        if len(counts) >= conversations:
            break
        pairs = _pairs(entry["conversations"], max_turns)
        if len(pairs) < 2:
            continue
        users = tokenizer.encode_batch([user for user, _ in pairs])
        answer_lens = (
            [max(1, len(ids)) for ids in tokenizer.encode_batch([a for _, a in pairs])]
            if output_len is None
            else [output_len] * len(pairs)
        )
        for k, (user, _) in enumerate(pairs):
            prompts.append(user)
            lens.append(len(users[k]) + specials)
            outputs.append(answer_lens[k])
        counts.append(len(pairs))
    if not counts:
        raise ValueError("no ShareGPT entry has two human/assistant pairs, as --multi-turn needs")
    think = think_times_ns(len(prompts), delay_ms, distribution, seed)
    return SampledPrompts.of(prompts, lens, outputs), Turns.of(counts, think)


def _pairs(messages: list, max_turns: int) -> list[tuple[str, str]]:
    """The (human, assistant) message pairs of a ShareGPT conversation, in order."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i + 1 < len(messages) and (max_turns <= 0 or len(pairs) < max_turns):
        user, answer = messages[i], messages[i + 1]
        text = user.get("value") if isinstance(user, dict) else None
        if not isinstance(text, str) or not text or user.get("from") != "human":
            i += 1
            continue
        reply = answer.get("value") if isinstance(answer, dict) else None
        pairs.append((text, reply if isinstance(reply, str) else ""))
        i += 2
    return pairs
