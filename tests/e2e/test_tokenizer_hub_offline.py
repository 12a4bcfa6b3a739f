"""Tokenizer loading from the hub while offline, each in a fresh Python process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from loadgen.text.tokenizer import PACKAGED_TOKENIZER


def load_in_fresh_process(name: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """huggingface_hub reads HF_HUB_OFFLINE and HF_HUB_CACHE at import, so use a new process."""
    code = (
        "from loadgen.text.tokenizer import load_tokenizer, base_vocab_size\n"
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
