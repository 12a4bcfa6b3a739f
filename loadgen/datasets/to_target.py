"""vLLM's decode -> encode loop that settles random token lists on their target lengths.

Each round decodes and re-encodes every unsettled list. A list settles when its encoding has
``target`` tokens or after MAX_RETRY adjustments; otherwise it is truncated to ``target`` or
padded with ``target - len`` ids drawn from ``U[0, vocab_size)``, special ids included, and goes
to the next round. Unlike vLLM, which runs the loop prompt by prompt, it runs in batch rounds
over all unsettled lists (``decode_batch`` / ``encode_batch`` use every core), and the padding of
a round is one draw in list order.

For a local byte-level BPE tokenizer whose encoding is local (loadgen/datasets/byte_level.py),
a truncated or padded list is not decoded and re-encoded whole: its text is the previous text up
to a piece boundary some tokens before the change plus the decoded end, and its encoding the
previous tokens up to there plus the end's encoding, which that module shows is exact. The first
round, which must encode every text, decodes through a byte table. So a build costs about one
``encode_batch`` of the prompts rather than two, with the same texts and lengths.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Encoding

from loadgen.datasets.byte_level import WHITESPACE, ByteLevelBPE
from loadgen.datasets.progress import Progress
from loadgen.text.tokenizer import TokenCodec, TokenIds

MAX_RETRY = 10
# Tokens re-encoded at least before a truncation or padding point (more when a piece is longer).
TAIL_TOKENS = 16
# With a progress to report to, the first round is encoded in about this many steps, each of at
# least PROGRESS_MIN_CHUNK lists (fewer, larger batches keep encode_batch's threads busy).
PROGRESS_STEPS = 50
PROGRESS_MIN_CHUNK = 64
# Texts encoded at once (their Encoding objects are let go once made into _Tokens).
ENCODE_CHUNK = 4096


@dataclass(frozen=True)
class TokenWindows:
    """Token lists ``prefix + cycle[(starts[i] + arange(lengths[i])) % len(cycle)]``, the random
    datasets' first lists, described rather than built."""

    prefix: np.ndarray
    cycle: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def decode_with(self, local: ByteLevelBPE) -> list[str] | None:
        """The decoded lists through ``local``'s byte table, or None where it does not apply."""
        return local.decode_windows(self.prefix, self.cycle, self.starts, self.lengths)

    def lists(self) -> list[np.ndarray]:
        """The token lists themselves."""
        ends = np.cumsum(self.lengths)
        # Position of every flat element within its own list: arange(total) - its list's start.
        within = np.arange(ends[-1]) - np.repeat(ends - self.lengths, self.lengths)
        inner = self.cycle[(np.repeat(self.starts, self.lengths) + within) % len(self.cycle)]
        return [np.concatenate((self.prefix, part)) for part in np.split(inner, ends[:-1])]


TokenLists = list[np.ndarray] | list[list[int]] | TokenWindows


def decode_encode_to_target(
    tokenizer: TokenCodec,
    token_lists: TokenLists,
    targets: np.ndarray,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[list[str], np.ndarray]:
    """vLLM's ``gen_prompt_decode_to_target_len`` over a batch: returns (texts, token counts)
    (the loop in the module docstring). ``progress`` is told how many lists have settled."""
    local = ByteLevelBPE.of(tokenizer)
    if local is None:
        return whole_rounds(tokenizer, token_lists, targets, rng, progress)
    return tail_rounds(local, token_lists, targets, rng, progress)


def whole_rounds(
    tokenizer: TokenCodec,
    token_lists: TokenLists,
    targets: np.ndarray,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[list[str], np.ndarray]:
    """The loop for any tokenizer: every round decodes and re-encodes whole lists."""
    if isinstance(token_lists, TokenWindows):
        token_lists = token_lists.lists()
    texts: list[str] = [""] * len(token_lists)
    lengths = np.zeros(len(token_lists), dtype=np.int64)
    pending = np.arange(len(token_lists))
    batch: list[TokenIds] = list(token_lists)
    for attempt in range(MAX_RETRY + 1):
        decoded = tokenizer.decode_batch(batch)
        if attempt == 0:
            encoded = first_encodings(tokenizer.encode_batch, decoded, progress)
        else:
            encoded = tokenizer.encode_batch(decoded)
        got = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        want = targets[pending]
        settled = (got == want) | (attempt == MAX_RETRY)
        for j in np.flatnonzero(settled):
            texts[pending[j]] = decoded[j]
        lengths[pending[settled]] = got[settled]

        unsettled = np.flatnonzero(~settled)
        if len(unsettled) == 0:
            break
        pads = _padding(rng, want[unsettled] - got[unsettled], tokenizer.vocab_size)
        batch = [
            encoded[j][: want[j]] + pad.tolist() for j, pad in zip(unsettled, pads, strict=True)
        ]
        pending = pending[unsettled]
    return texts, lengths


@dataclass(frozen=True)
class _Tokens:
    """Encodings laid end to end: list j's token ids and word ids at bounds[j]:bounds[j+1].

    A tokenizers ``Encoding`` holds about 150 bytes a token (its tokens' strings, offsets and
    masks): 40,000 prompts of 32 tokens took 200 MB at once, and glibc kept most of it after.
    These arrays hold 8 bytes a token, and ``encode_compact`` makes them a chunk at a time."""

    ids: np.ndarray
    words: np.ndarray  # the piece (pre-tokenizer word) of each token; -1 for none
    bounds: np.ndarray

    @classmethod
    def of(cls, encodings: Sequence[Encoding]) -> _Tokens:
        """The ids and word ids of ``encodings``."""
        sizes = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
        total = int(sizes.sum())
        ids = np.fromiter(
            itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int32, count=total
        )
        words: list[int | None] = list(itertools.chain.from_iterable(e.word_ids for e in encodings))
        if None in words:
            words = [-1 if word is None else word for word in words]
        bounds = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        return cls(ids, np.array(words, dtype=np.int32), bounds)

    @classmethod
    def join(cls, parts: Sequence[_Tokens]) -> _Tokens:
        """``parts`` one after the other."""
        sizes = np.concatenate([part.sizes() for part in parts] or [np.zeros(0, np.int64)])
        bounds = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        return cls(
            np.concatenate([part.ids for part in parts] or [np.zeros(0, np.int32)]),
            np.concatenate([part.words for part in parts] or [np.zeros(0, np.int32)]),
            bounds,
        )

    def sizes(self) -> np.ndarray:
        """Each list's token count."""
        return np.diff(self.bounds)

    def ids_of(self, j: int) -> np.ndarray:
        """List j's token ids."""
        return self.ids[self.bounds[j] : self.bounds[j + 1]]

    def words_of(self, j: int) -> np.ndarray:
        """List j's word ids."""
        return self.words[self.bounds[j] : self.bounds[j + 1]]


def encode_compact(
    local: ByteLevelBPE, texts: list[str], progress: Progress | None = None
) -> _Tokens:
    """The texts' encodings as ``_Tokens``, ENCODE_CHUNK texts at a time (so that only one
    chunk's ``Encoding`` objects live at once); ``progress`` is told the texts encoded so far."""
    chunk = ENCODE_CHUNK
    if progress is not None:
        chunk = min(chunk, max(PROGRESS_MIN_CHUNK, -(-len(texts) // PROGRESS_STEPS)))
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(_Tokens.of(local.encode(texts[start : start + chunk])))
        if progress is not None:
            progress(min(start + chunk, len(texts)), len(texts))
    return _Tokens.join(parts)


@dataclass
class _Round:
    """The texts of a round: ``ends`` holds how ``texts[j]``'s encoding ends, from a piece
    boundary after its first ``starts[j]`` tokens."""

    texts: list[str]
    ends: _Tokens
    starts: np.ndarray

    def lengths(self) -> np.ndarray:
        """Each text's token count."""
        return self.starts + self.ends.sizes()


def tail_rounds(
    local: ByteLevelBPE,
    token_lists: TokenLists,
    targets: np.ndarray,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[list[str], np.ndarray]:
    """The loop for a local byte-level BPE tokenizer: after the first round only the ends of
    the lists are decoded and re-encoded (module docstring); same texts and counts."""
    texts: list[str] = [""] * len(token_lists)
    lengths = np.zeros(len(token_lists), dtype=np.int64)
    pending = np.arange(len(token_lists))
    first = token_lists.decode_with(local) if isinstance(token_lists, TokenWindows) else None
    if first is None:
        lists = token_lists.lists() if isinstance(token_lists, TokenWindows) else token_lists
        first = local.decode(lists)
    current = _Round(first, encode_compact(local, first, progress), np.zeros(len(first), np.int64))
    for attempt in range(MAX_RETRY + 1):
        got = current.lengths()
        want = targets[pending]
        settled = (got == want) | (attempt == MAX_RETRY)
        for j, index in zip(
            np.flatnonzero(settled).tolist(), pending[settled].tolist(), strict=True
        ):
            texts[index] = current.texts[j]
        lengths[pending[settled]] = got[settled]

        unsettled = np.flatnonzero(~settled)
        if len(unsettled) == 0:
            break
        pads = _padding(rng, want[unsettled] - got[unsettled], local.vocab_size)
        current = _next_round(local, current, unsettled, want[unsettled], pads)
        pending = pending[unsettled]
    return texts, lengths


def first_encodings(
    encode: Callable[[list[str]], Sequence[Any]], texts: list[str], progress: Progress | None
) -> list[Any]:
    """``encode(texts)``; with a ``progress``, in steps, each telling it how many texts are
    encoded so far. The first round encodes every text whole: most of a build's time (the
    later rounds re-encode the few lists that missed their target, and with a local tokenizer
    only their ends), so it is what the progress counts."""
    if progress is None:
        return list(encode(texts))
    chunk = max(PROGRESS_MIN_CHUNK, -(-len(texts) // PROGRESS_STEPS))
    encodings: list[Any] = []
    for start in range(0, len(texts), chunk):
        encodings += encode(texts[start : start + chunk])
        progress(len(encodings), len(texts))
    return encodings


def _padding(rng: np.random.Generator, deficits: np.ndarray, vocab_size: int) -> list[np.ndarray]:
    """Each list's padding ids (none for a list to truncate), drawn in one call as vLLM's order
    of lists would draw them."""
    deficits = np.maximum(deficits, 0)
    return np.split(rng.integers(0, vocab_size, size=deficits.sum()), np.cumsum(deficits)[:-1])


def _next_round(
    local: ByteLevelBPE,
    current: _Round,
    chosen: np.ndarray,
    want: np.ndarray,
    pads: list[np.ndarray],
) -> _Round:
    """The texts and encodings of ``current``'s lists ``chosen`` truncated to ``want`` or
    padded with ``pads``: each re-encoded from a piece boundary before the change when that is
    shown exact, else whole."""
    old_tails: list[list[int]] = []
    new_tails: list[list[int]] = []
    boundaries = np.zeros(len(chosen), dtype=np.int64)  # tokens before each re-encoded end
    for i, j in enumerate(chosen):
        ids, words = current.ends.ids_of(j), current.ends.words_of(j)
        start = int(current.starts[j])
        kept = min(int(want[i]), start + len(ids)) - start  # tokens of the end kept
        if kept < 0:  # the change reaches before the end: the whole text again
            whole = _Tokens.of(local.encode([current.texts[j]]))
            ids, words = whole.ids, whole.words
            kept, start = int(want[i]), 0
        cut = _piece_start(words, kept - TAIL_TOKENS)
        old_tails.append(ids[cut:].tolist())
        new_tails.append(old_tails[-1][: kept - cut] + pads[i].tolist())
        boundaries[i] = start + cut
    decoded = local.decode(old_tails + new_tails)
    texts: list[str] = [""] * len(chosen)
    ends: list[str] = [""] * len(chosen)  # what is encoded of each new text
    redo = []
    for i, j in enumerate(chosen):
        text, old_end, new_end = current.texts[j], decoded[i], decoded[len(chosen) + i]
        if boundaries[i] == 0:  # the whole list is the end
            texts[i] = ends[i] = new_end
        elif (
            local.added_ids.isdisjoint(old_tails[i])
            and text.endswith(old_end)
            and _end_is_local(old_end, new_end, local.added_margin)
        ):
            texts[i], ends[i] = text[: len(text) - len(old_end)] + new_end, new_end
        else:
            redo.append(i)
    if redo:  # not shown exact: those lists whole, as whole_rounds makes them
        encoded = local.encode([current.texts[chosen[i]] for i in redo])
        lists = [
            e.ids[: int(want[i])] + pads[i].tolist() for e, i in zip(encoded, redo, strict=True)
        ]
        for i, text in zip(redo, local.decode(lists), strict=True):
            texts[i] = ends[i] = text
            boundaries[i] = 0
    return _Round(texts, encode_compact(local, ends), boundaries)


def _piece_start(words: np.ndarray, index: int) -> int:
    """The start of the piece (pre-tokenizer word) holding token ``index`` (``words``: each
    token's word id); 0 at or before 0."""
    if index <= 0:
        return 0
    word = words[index]
    while index > 0 and words[index - 1] == word:
        index -= 1
    return index


def _end_is_local(old_end: str, new_end: str, added_margin: int) -> bool:
    """Whether the old text's pieces before ``old_end`` are the new text's: the ends agree on
    enough characters, past the longest added token, holding a non-whitespace one (module
    docstring of loadgen/datasets/byte_level.py)."""
    if new_end.startswith(old_end):  # padded
        agreed = len(old_end)
    elif old_end.startswith(new_end):  # truncated on a character boundary
        agreed = len(new_end)
    elif old_end.startswith(new_end[:-1]):  # truncated inside a character: one U+FFFD
        agreed = len(new_end) - 1
    else:
        return False
    limit = agreed - added_margin
    return limit >= 2 and old_end[:limit].strip(WHITESPACE) != ""
