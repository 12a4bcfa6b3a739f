"""Tokenizer loading from the hub while offline, each in a fresh Python process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers import hang_guard, startups

from loadgen.text.tokenizer import PACKAGED_TOKENIZER


def load_in_fresh_process(
    name: str, cache: Path, endpoint: str | None = None
) -> subprocess.CompletedProcess[str]:
    """huggingface_hub reads HF_HUB_OFFLINE, HF_HUB_CACHE and HF_ENDPOINT at import, so use a new
    process: offline, or (``endpoint``) online with that hub."""
    code = (
        "from loadgen.text.tokenizer import load_tokenizer, base_vocab_size\n"
        f"print(base_vocab_size(load_tokenizer({name!r})))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    if endpoint is not None:
        del env["HF_HUB_OFFLINE"]
        env["HF_ENDPOINT"] = endpoint
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_guard(60),
    )


def test_hub_id_offline_and_uncached_is_one_clear_error(tmp_path: Path) -> None:
    proc = load_in_fresh_process("some-org/some-model", tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "TokenizerLoadError" in last
    assert "some-org/some-model" in last and "HF_HUB_OFFLINE" in last


def cache_tokenizer(cache: Path, repo_id: str) -> None:
    """Lay out a hub cache entry by hand, as huggingface_hub would have after a download."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    shutil.copy(PACKAGED_TOKENIZER, snapshot / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_hub_id_found_in_the_cache_offline(tmp_path: Path) -> None:
    cache_tokenizer(tmp_path, "some-org/cached-model")
    proc = load_in_fresh_process("some-org/cached-model", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8192"


def test_an_unreachable_hub_is_one_line_at_once_not_five_retries(tmp_path: Path) -> None:
    """huggingface_hub alone retried five times over 24 s, a warning line each."""
    port = closed_port()
    started = time.monotonic()
    proc = load_in_fresh_process("some-org/some-model", tmp_path, f"http://127.0.0.1:{port}")
    # Python and the imports, less than a CLI run; the hub's retries would add 24 s.
    took = time.monotonic() - started
    assert took < startups(3), took
    assert proc.returncode != 0
    assert "Retry" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "TokenizerLoadError" in last and f"127.0.0.1:{port}" in last
    assert "not in the Hugging Face cache" in last


def test_an_unreachable_hub_serves_the_cached_tokenizer(tmp_path: Path) -> None:
    cache_tokenizer(tmp_path, "some-org/cached-model")
    proc = load_in_fresh_process(
        "some-org/cached-model", tmp_path, f"http://127.0.0.1:{closed_port()}"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8192" and "Retry" not in proc.stderr
