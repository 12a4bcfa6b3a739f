"""Byte-level BPE tokenizers whose encoding is local: what lets the decode -> encode loop re-encode
only the end of a prompt it truncated or padded, and decode id lists with a byte table.

``ByteLevelBPE.of(codec)`` answers for a local tokenizer of a known shape: no normalizer, no
truncation or padding, BPE without dropout, a ByteLevel decoder, plain added tokens, and as
pre-tokenizer either ByteLevel with GPT-2's split (``use_regex``) or one ``Split`` by a pattern of
``LOCAL_PATTERNS`` followed by ByteLevel without its own split; never with a prefix space. Any
other tokenizer gets None and the loop re-encodes whole texts (loadgen/datasets/to_target.py).

Why re-encoding the end is exact for these tokenizers. An encoding is: added tokens cut out,
each remaining segment split by the pattern (leftmost-first matches, one after another), each
piece BPE-encoded on its own. Take a text T, its encoding E, and a new text P that agrees with T
on its first ``c`` characters. Let ``e`` be where a piece of E ends. The pattern's match starting
at ``q`` and ending at ``m`` is decided by the characters up to ``m + 1`` and, when the
characters after ``m`` are whitespace, up to the first character that is not (the alternatives
of these patterns scan runs of letters, digits, symbols or whitespace and look one character
past them; the contractions look at most 3 characters from ``q``). So if T has a character
outside ``WHITESPACE`` (every character any engine takes for whitespace) in ``[e, c')`` and
``e + 1 < c'``, every match ending by ``e`` reads only characters P shares, and P's pieces up
to ``e`` are T's; the patterns look nowhere before a match's start, so P's pieces from ``e`` on
are those of ``P[e:]`` alone. ``c'`` is ``c`` less
the longest added token: an added token found in P but not in T reaches past ``c``, so it starts
after ``c'`` (and T must have none after ``e``). Then ``encode(P) = E[:k] + encode(P[e:])``
where token ``k`` starts at ``e``, and because the ByteLevel decoder joins the tokens' bytes
before it reads them as UTF-8 (invalid bytes become U+FFFD), ``decode(E[:k] + X) =
T[:e] + decode(X)``: ``E[:k]`` is whole characters.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from tokenizers import Encoding, Tokenizer, decoders, models

from loadgen.text.tokenizer import LocalTokenizer, TokenCodec, TokenIds

# Split patterns whose matches are decided as the module docstring says (tokenizer.json text).
CL100K_PATTERN = (  # OpenAI's cl100k_base, also Llama 3's
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LOCAL_PATTERNS = frozenset({CL100K_PATTERN, GPT2_PATTERN})

# Every character any regex engine may count as whitespace (\s): Python's isspace() and Unicode's
# White_Space, plus the zero-width ones some engines include. Too many only costs speed.
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u180e\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"
)

# Below this many ids a batch is decoded by the tokenizer (building the byte table costs more).
TABLE_DECODE_MIN_IDS = 500_000


def byte_level_chars() -> dict[str, int]:
    """GPT-2's byte-to-character map, inverted: the character ByteLevel writes for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    chars = {chr(b): b for b in printable}
    chars.update({chr(256 + n): b for n, b in enumerate(others)})
    return chars


_CHAR_TO_BYTE = byte_level_chars()
_TO_LATIN1 = str.maketrans({c: chr(b) for c, b in _CHAR_TO_BYTE.items()})
_DROP_MAPPED = str.maketrans(dict.fromkeys(_CHAR_TO_BYTE))


@dataclass(eq=False)
class ByteLevelBPE:
    """A local byte-level BPE tokenizer of a shape whose encoding is local (module docstring)."""

    tokenizer: Tokenizer
    vocab_size: int  # ids the byte table covers: every id the random datasets draw
    added_ids: frozenset[int]  # ids of added tokens
    added_margin: int  # characters of the longest added token
    _table: np.ndarray | None = field(default=None, repr=False)  # each id's bytes (objects)
    _table_agrees: bool | None = field(default=None, repr=False)  # None: not checked yet

    @classmethod
    def of(cls, codec: TokenCodec) -> ByteLevelBPE | None:
        """The codec as a local byte-level BPE tokenizer, or None if its shape is not one."""
        if not isinstance(codec, LocalTokenizer):
            return None
        known = _KNOWN.get(codec)
        if known is None:
            known = _KNOWN[codec] = _inspect(codec) or False
        return known or None

    def encode(self, texts: list[str]) -> list[Encoding]:
        """The encodings of the texts without special tokens (they keep the pieces' word ids)."""
        return self.tokenizer.encode_batch(texts, add_special_tokens=False)

    def decode(self, token_lists: Sequence[TokenIds]) -> list[str]:
        """Text of each id list, special tokens kept: the tokenizer's ``decode_batch``, through
        the byte table for a large batch of base-vocabulary ids."""
        if sum(map(len, token_lists)) >= TABLE_DECODE_MIN_IDS and self._checked_table():
            lists = [np.asarray(ids, dtype=np.int64) for ids in token_lists]
            flat = np.concatenate(lists)
            if len(flat) == 0 or (flat.min() >= 0 and flat.max() < self.vocab_size):
                return self.decode_with_table(lists)
        # tokenizers reads int arrays as it reads lists; its stub names lists only.
        return self.tokenizer.decode_batch(token_lists, skip_special_tokens=False)  # type: ignore[arg-type]

    def decode_windows(
        self, prefix: np.ndarray, cycle: np.ndarray, starts: np.ndarray, lengths: np.ndarray
    ) -> list[str] | None:
        """``decode`` of the lists ``prefix + cycle[(starts[i] + arange(lengths[i])) % len(cycle)]``
        from the byte table without building them: each text is the prefix's bytes and a slice of
        the cycle's bytes laid twice end to end. None when the table does not apply (a small
        batch, other ids, a window longer than the cycle)."""
        total = len(lengths) * len(prefix) + int(lengths.sum())
        if len(lengths) == 0 or total < TABLE_DECODE_MIN_IDS or not self._checked_table():
            return None
        ids = np.concatenate((cycle, prefix))
        if lengths.max() > len(cycle) or ids.min() < 0 or ids.max() >= self.vocab_size:
            return None
        table = self._byte_table()
        pieces = table[cycle].tolist()
        sizes = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        ends = np.concatenate(([0], np.cumsum(np.concatenate((sizes, sizes)))))
        ring = b"".join(pieces) * 2
        head = b"".join(table[prefix].tolist())
        first = starts % len(cycle)
        bounds = zip(ends[first].tolist(), ends[first + lengths].tolist(), strict=True)
        return [(head + ring[lo:hi]).decode("utf-8", "replace") for lo, hi in bounds]

    def decode_with_table(self, token_lists: Sequence[np.ndarray]) -> list[str]:
        """Each list's ids' bytes joined, read as UTF-8 with U+FFFD for invalid bytes: what the
        ByteLevel decoder does (ids below ``vocab_size``)."""
        table = self._byte_table()
        return [b"".join(table[ids].tolist()).decode("utf-8", "replace") for ids in token_lists]

    def _byte_table(self) -> np.ndarray:
        """Each id's bytes (ids below ``vocab_size``): its characters through the ByteLevel map
        when all of them are in it, otherwise its UTF-8 (the decoder's rule)."""
        if self._table is None:
            id_to_token = self.tokenizer.id_to_token
            table = np.empty(self.vocab_size, dtype=object)
            table[:] = [_token_bytes(id_to_token(i) or "") for i in range(self.vocab_size)]
            self._table = table
        return self._table

    def _checked_table(self) -> bool:
        """Whether the byte table decodes every id as the tokenizer does (checked once, on the
        whole vocabulary in shuffled lists, so a decoder that differs is never trusted)."""
        if self._table_agrees is None:
            ids = np.random.default_rng(0).permutation(self.vocab_size)
            lists = np.array_split(ids, max(1, self.vocab_size // 997))
            expected = self.tokenizer.decode_batch(
                [part.tolist() for part in lists], skip_special_tokens=False
            )
            self._table_agrees = expected == self.decode_with_table(lists)
        return self._table_agrees


# Each codec inspected: its ByteLevelBPE, or False when its shape is not one.
_KNOWN: weakref.WeakKeyDictionary[LocalTokenizer, ByteLevelBPE | Literal[False]] = (
    weakref.WeakKeyDictionary()
)


def _token_bytes(token: str) -> bytes:
    if token.translate(_DROP_MAPPED):
        return token.encode("utf-8")
    return token.translate(_TO_LATIN1).encode("latin-1")


def _inspect(codec: LocalTokenizer) -> ByteLevelBPE | None:
    """``ByteLevelBPE`` for a tokenizer of the shape the module docstring names, else None."""
    raw = codec.tokenizer
    if raw.normalizer is not None or raw.truncation is not None or raw.padding is not None:
        return None
    if not isinstance(raw.model, models.BPE) or raw.model.dropout not in (None, 0.0):
        return None
    if not isinstance(raw.decoder, decoders.ByteLevel) or not _local_pre_tokenizer(raw):
        return None
    added = raw.get_added_tokens_decoder()
    for token_id, token in added.items():
        if token.lstrip or token.rstrip or token.single_word:
            return None
        if raw.decode([token_id], skip_special_tokens=False) != token.content:
            return None  # its bytes would not be its text: T[:e] would not decode as itself
    return ByteLevelBPE(
        tokenizer=raw,
        vocab_size=codec.vocab_size,
        added_ids=frozenset(added),
        added_margin=max((len(token.content) for token in added.values()), default=0),
    )


def _local_pre_tokenizer(raw: Tokenizer) -> bool:
    if raw.pre_tokenizer is None:
        return False
    state = json.loads(raw.pre_tokenizer.__getstate__())
    if state.get("type") == "ByteLevel":
        return state.get("use_regex") is True and state.get("add_prefix_space") is False
    steps = state.get("pretokenizers") if state.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return False
    split, byte_level = steps
    return (
        split.get("type") == "Split"
        and split.get("pattern", {}).get("Regex") in LOCAL_PATTERNS
        and split.get("behavior") == "Isolated"
        and split.get("invert") is False
        and byte_level.get("type") == "ByteLevel"
        and byte_level.get("use_regex") is False
        and byte_level.get("add_prefix_space") is False
    )
