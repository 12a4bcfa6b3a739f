"""Tokenizer loading from a file, a directory and the packaged one (the hub while offline, in a
fresh process: tests/e2e/test_tokenizer_hub_offline.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadgen.text.tokenizer import (
    MOCK_MODEL_NAME,
    PACKAGED_TOKENIZER,
    TokenizerLoadError,
    base_vocab_size,
    load_tokenizer,
    num_special_tokens_to_add,
    special_token_ids,
)


def test_packaged_tokenizer_is_shaped_like_a_chat_model() -> None:
    tok = load_tokenizer(MOCK_MODEL_NAME)
    assert num_special_tokens_to_add(tok) == 1
    assert special_token_ids(tok) == [0, 1]
    assert base_vocab_size(tok) == 8192
    assert tok.encode("hello world").ids[0] == 0  # BOS added
    assert tok.decode(tok.encode("hello world", add_special_tokens=False).ids) == "hello world"


def test_file_and_directory(tmp_path: Path) -> None:
    shutil.copy(PACKAGED_TOKENIZER, tmp_path / "tokenizer.json")
    by_dir = load_tokenizer(str(tmp_path))
    by_file = load_tokenizer(str(tmp_path / "tokenizer.json"))
    assert by_dir.encode("abc").ids == by_file.encode("abc").ids


def test_directory_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(TokenizerLoadError, match=r"holds no tokenizer\.json"):
        load_tokenizer(str(tmp_path))


def test_corrupt_file_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerLoadError, match="cannot read tokenizer"):
        load_tokenizer(str(bad))


def test_missing_local_path() -> None:
    with pytest.raises(TokenizerLoadError, match="does not exist"):
        load_tokenizer("./no/such/dir")
