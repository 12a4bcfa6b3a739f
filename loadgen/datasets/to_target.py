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


@dataclass
class _Round:
    """The texts of a round: ``encodings[j]`` is how ``texts[j]``'s encoding ends, from a piece
    boundary after its first ``starts[j]`` tokens."""

    texts: list[str]
    encodings: list[Encoding]
    starts: np.ndarray

    def lengths(self) -> np.ndarray:
        """Each text's token count."""
        sizes = np.fromiter(map(len, self.encodings), dtype=np.int64, count=len(self.encodings))
        return self.starts + sizes


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
    encodings = first_encodings(local.encode, first, progress)
    current = _Round(first, encodings, np.zeros(len(first), dtype=np.int64))
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
        encoding, start = current.encodings[j], int(current.starts[j])
        kept = min(int(want[i]), start + len(encoding)) - start  # tokens of ``encoding`` kept
        if kept < 0:  # the change reaches before ``encoding``: the whole text again
            encoding = local.encode([current.texts[j]])[0]
            kept, start = int(want[i]), 0
        cut = _piece_start(encoding, kept - TAIL_TOKENS)
        old_tails.append(encoding.ids[cut:])
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
    return _Round(texts, local.encode(ends), boundaries)


def _piece_start(encoding: Encoding, index: int) -> int:
    """The start of the piece (pre-tokenizer word) holding token ``index``; 0 at or before 0."""
    if index <= 0:
        return 0
    word = encoding.token_to_word(index)
    while index > 0 and encoding.token_to_word(index - 1) == word:
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
