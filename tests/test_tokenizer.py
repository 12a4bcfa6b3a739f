"""Tokenizer loading from a file, a directory, the packaged one, and the hub while offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.tokenizer import (
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


def load_in_fresh_process(name: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """huggingface_hub reads HF_HUB_OFFLINE and HF_HUB_CACHE at import, so use a new process."""
    code = (
        "from loadgen.tokenizer import load_tokenizer, base_vocab_size\n"
        f"print(base_vocab_size(load_tokenizer({name!r})))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_hub_id_offline_and_uncached_is_one_clear_error(tmp_path: Path) -> None:
    proc = load_in_fresh_process("some-org/some-model", tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "TokenizerLoadError" in last
    assert "some-org/some-model" in last and "HF_HUB_OFFLINE" in last


def test_hub_id_found_in_the_cache_offline(tmp_path: Path) -> None:
    # Lay out a hub cache entry by hand, as huggingface_hub would have after a download.
    repo = tmp_path / "models--some-org--cached-model"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    shutil.copy(PACKAGED_TOKENIZER, snapshot / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    proc = load_in_fresh_process("some-org/cached-model", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8192"
