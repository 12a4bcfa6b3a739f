"""The decode -> encode loop's two paths give the same texts and lengths: re-encoding only the end
of a truncated or padded list (local byte-level BPE tokenizers) and re-encoding whole texts."""

from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

from loadgen.datasets import byte_level, to_target
from loadgen.datasets.byte_level import CL100K_PATTERN, WHITESPACE, ByteLevelBPE
from loadgen.datasets.random import plan_random_text
from loadgen.datasets.to_target import TokenWindows, _end_is_local, tail_rounds, whole_rounds
from loadgen.text.tokenizer import MOCK_MODEL_NAME, LocalTokenizer, load_tokenizer


def with_pre_tokenizer(pre_tokenizer: pre_tokenizers.PreTokenizer) -> LocalTokenizer:
    """The packaged tokenizer with another pre-tokenizer."""
    raw = load_tokenizer(MOCK_MODEL_NAME)
    raw.pre_tokenizer = pre_tokenizer
    return LocalTokenizer(raw)


def cl100k_split() -> pre_tokenizers.PreTokenizer:
    """Llama 3's (cl100k's) split then a ByteLevel that does not split again."""
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K_PATTERN), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


@pytest.fixture(scope="module", params=["gpt2", "cl100k"])
def codec(request) -> LocalTokenizer:
    """The packaged tokenizer (GPT-2's split), and the same vocabulary with Llama 3's split."""
    if request.param == "gpt2":
        return LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME))
    return with_pre_tokenizer(cl100k_split())


def both_paths(codec, token_lists, targets, seed: int):
    """(tail_rounds, whole_rounds) results and the generator states after each."""
    local = ByteLevelBPE.of(codec)
    assert local is not None
    fast_rng, whole_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    fast = tail_rounds(local, token_lists, targets, fast_rng)
    whole = whole_rounds(codec, token_lists, targets, whole_rng)
    return fast, whole, fast_rng.bit_generator.state, whole_rng.bit_generator.state


@pytest.mark.parametrize(
    ("n", "input_len", "prefix_len", "ratio", "seed"),
    [
        (200, 64, 0, 0.0, 0),
        (200, 300, 12, 0.5, 1),
        (60, 1500, 0, 0.2, 2),
        (300, 12, 3, 0.9, 3),
        (100, 3, 2, 0.0, 4),
    ],
)
@pytest.mark.parametrize("table", [False, True], ids=["tokenizer-decode", "table-decode"])
def test_ends_only_gives_the_whole_rounds_texts(
    codec, n, input_len, prefix_len, ratio, seed, table, monkeypatch
):
    if table:  # the byte table decodes even these small batches
        monkeypatch.setattr(byte_level, "TABLE_DECODE_MIN_IDS", 0)
    rng = np.random.default_rng(seed)
    plan = plan_random_text(codec, n, input_len, 8, prefix_len, (ratio, ratio), rng)
    input_lens, _, offsets, allowed, prefix = plan
    lists = TokenWindows(prefix, allowed, offsets + np.arange(n), input_lens)
    targets = prefix_len + input_lens
    fast, whole, fast_state, whole_state = both_paths(codec, lists, targets, seed)
    assert fast[0] == whole[0]
    np.testing.assert_array_equal(fast[1], whole[1])
    assert fast_state == whole_state  # the same padding draws


def test_whitespace_runs_and_special_tokens_fall_back_exactly(codec, monkeypatch):
    """Lists mostly of spaces and newlines, with special and random ids: many ends cannot be
    shown local (only whitespace before the change, an added token after it), and those lists
    go whole; the texts are still the whole rounds'."""
    outcomes = []
    checked = to_target._end_is_local
    monkeypatch.setattr(
        to_target, "_end_is_local", lambda *a: outcomes.append(checked(*a)) or outcomes[-1]
    )
    names = ("Ġ", "Ċ", "ĠĠ", "ĊĊ", "ĉ", "a", "<|begin_of_text|>")
    ids = [codec.tokenizer.token_to_id(name) for name in names]
    assert None not in ids
    rng = np.random.default_rng(5)
    alphabet = np.array(ids[:5] * 40 + ids[5:] + rng.integers(0, codec.vocab_size, 6).tolist())
    lists = [rng.choice(alphabet, size=int(rng.integers(20, 200))) for _ in range(300)]
    targets = np.array([len(ids_) + int(rng.integers(-8, 9)) for ids_ in lists])
    fast, whole, fast_state, whole_state = both_paths(codec, lists, targets, 6)
    assert fast[0] == whole[0]
    np.testing.assert_array_equal(fast[1], whole[1])
    assert fast_state == whole_state
    assert True in outcomes and False in outcomes  # both kinds of end were met


def test_the_byte_table_decodes_as_the_tokenizer(codec, monkeypatch):
    local = ByteLevelBPE.of(codec)
    rng = np.random.default_rng(0)
    lists = [rng.integers(0, codec.vocab_size, int(rng.integers(0, 50))) for _ in range(400)]
    expected = codec.tokenizer.decode_batch([x.tolist() for x in lists], skip_special_tokens=False)
    assert any("\ufffd" in text for text in expected)  # invalid UTF-8 is covered
    assert local.decode_with_table(lists) == expected
    monkeypatch.setattr(byte_level, "TABLE_DECODE_MIN_IDS", 0)
    assert local.decode(lists) == expected


def test_windows_decode_from_the_table_as_their_lists(codec, monkeypatch):
    monkeypatch.setattr(byte_level, "TABLE_DECODE_MIN_IDS", 0)
    local = ByteLevelBPE.of(codec)
    rng = np.random.default_rng(1)
    cycle = rng.permutation(codec.vocab_size)[:500]  # windows wrap around its end
    for prefix in (np.empty(0, dtype=np.int64), cycle[:7]):
        windows = TokenWindows(prefix, cycle, rng.integers(0, 2000, 300), rng.integers(0, 501, 300))
        lists = [ids.tolist() for ids in windows.lists()]
        assert windows.decode_with(local) == codec.tokenizer.decode_batch(
            lists, skip_special_tokens=False
        )
    too_long = TokenWindows(cycle[:0], cycle, np.array([3]), np.array([501]))
    assert too_long.decode_with(local) is None  # the lists are built instead


def test_only_known_local_shapes_take_the_end_path():
    assert ByteLevelBPE.of(LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME))) is not None
    assert ByteLevelBPE.of(with_pre_tokenizer(cl100k_split())) is not None
    other_pattern = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\w+|\W"), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    assert ByteLevelBPE.of(with_pre_tokenizer(other_pattern)) is None
    prefix_space = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    assert ByteLevelBPE.of(with_pre_tokenizer(prefix_space)) is None
    normalized = load_tokenizer(MOCK_MODEL_NAME)
    normalized.normalizer = normalizers.NFC()
    assert ByteLevelBPE.of(LocalTokenizer(normalized)) is None


def test_a_tokenizer_of_another_shape_gets_whole_rounds(monkeypatch):
    raw: Tokenizer = load_tokenizer(MOCK_MODEL_NAME)
    raw.normalizer = normalizers.NFC()
    codec = LocalTokenizer(raw)
    called = []
    monkeypatch.setattr(to_target, "whole_rounds", lambda *a: called.append(a) or ([], None))
    to_target.decode_encode_to_target(codec, [[1, 2]], np.array([2]), np.random.default_rng(0))
    assert called


@pytest.mark.parametrize(
    ("old_end", "new_end", "margin", "local"),
    [
        ("abc def ghi", "abc def ghi jkl", 0, True),  # padded
        ("abc def ghi", "abc def", 0, True),  # truncated
        ("abc def ghi", "abc de\ufffd", 0, True),  # truncated inside a character
        ("abc def ghi", "abc def", 6, False),  # the longest added token reaches back
        ("a", "a b", 0, False),  # too short to show anything
        ("    \n  x", "    \n", 0, False),  # only whitespace before the change
        ("abc", "xyz", 0, False),  # not the same text at all
    ],
)
def test_end_is_local(old_end, new_end, margin, local):
    assert _end_is_local(old_end, new_end, margin) is local


def test_whitespace_holds_every_character_python_calls_space():
    assert all(chr(c) in WHITESPACE for c in range(0x110000) if chr(c).isspace())


def test_compact_tokens_hold_each_encodings_ids_and_word_ids(codec, monkeypatch):
    """The byte-level loop keeps its encodings as flat arrays (8 bytes a token, not a
    tokenizers Encoding's ~150), chunk by chunk: the same ids and word ids, list by list."""
    local = ByteLevelBPE.of(codec)
    assert local is not None
    texts = ["hello world", "", "a b  c<|endoftext|>", "the quick brown fox jumps"] * 3
    encodings = local.encode(texts)
    for chunk in (1, 5, 4096):
        monkeypatch.setattr(to_target, "ENCODE_CHUNK", chunk)
        tokens = to_target.encode_compact(local, texts)
        assert tokens.sizes().tolist() == [len(e) for e in encodings]
        for j, encoding in enumerate(encodings):
            assert tokens.ids_of(j).tolist() == encoding.ids
            assert tokens.words_of(j).tolist() == [
                -1 if w is None else w for w in encoding.word_ids
            ]


def test_the_byte_level_loop_encodes_a_chunk_at_a_time_with_the_same_texts(codec, monkeypatch):
    """No round holds every text's Encoding at once (a chunk of ENCODE_CHUNK texts at most),
    and the texts, lengths and padding draws do not depend on the chunk."""
    n, seed = 150, 5
    rng = np.random.default_rng(seed)
    input_lens, _, offsets, allowed, prefix = plan_random_text(codec, n, 40, 8, 0, (0.5, 0.5), rng)
    lists = TokenWindows(prefix, allowed, offsets + np.arange(n), input_lens)
    local = ByteLevelBPE.of(codec)
    assert local is not None
    whole_rng = np.random.default_rng(seed)
    want = tail_rounds(local, lists, input_lens, whole_rng)
    sizes: list[int] = []
    encode = ByteLevelBPE.encode

    def recording(self: ByteLevelBPE, texts: list[str]) -> list:
        sizes.append(len(texts))
        return encode(self, texts)

    monkeypatch.setattr(ByteLevelBPE, "encode", recording)
    monkeypatch.setattr(to_target, "ENCODE_CHUNK", 16)
    chunked_rng = np.random.default_rng(seed)
    got = tail_rounds(local, lists, input_lens, chunked_rng)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    assert chunked_rng.bit_generator.state == whole_rng.bit_generator.state
    assert sizes and max(sizes) <= 16 and sum(sizes) >= n  # every text encoded, 16 at most
