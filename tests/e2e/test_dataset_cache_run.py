"""The dataset cache through the real CLI (in process) against --mock: a second run with the
same tokenizer, flags and seed reads the dataset the first one stored and sends the same
prompts; --no-dataset-cache neither reads nor writes it."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import only_json, run_in_process

DATASET = ["--num-prompts", "40", "--random-input-len", "96", "--random-output-len", "4"]


def run(tmp_path: Path, name: str, *flags: str) -> tuple[str, dict]:
    """A run with its own XDG cache home; (stdout, result JSON)."""
    result_dir = tmp_path / name
    proc = run_in_process(
        "--mock", "--workers", "1", *DATASET, "--save-result", "--save-detailed",
        "--result-dir", str(result_dir), *flags, env={"XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, only_json(result_dir)


def cache_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("Dataset:", "warning"))]


def test_a_second_run_reads_the_dataset_and_no_cache_skips_it(tmp_path: Path) -> None:
    directory = tmp_path / "xdg" / "loadgen" / "datasets"
    first_out, first = run(tmp_path, "first")
    (stored,) = directory.glob("*.lgdata")
    assert cache_lines(first_out) == [cache_lines(first_out)[0]]
    assert cache_lines(first_out)[0].startswith("Dataset: built in ")
    assert str(stored) in first_out
    written = stored.stat().st_mtime_ns

    second_out, second = run(tmp_path, "second")
    (line,) = cache_lines(second_out)
    assert line.startswith("Dataset: read from the cache in ") and str(stored) in line
    assert second["input_lens"] == first["input_lens"]
    assert second["total_input_tokens"] == first["total_input_tokens"]

    os.utime(stored, ns=(written, written))
    third_out, third = run(tmp_path, "third", "--no-dataset-cache")
    assert cache_lines(third_out) == []
    assert list(directory.iterdir()) == [stored] and stored.stat().st_mtime_ns == written
    assert third["input_lens"] == first["input_lens"]

    other_out, _ = run(tmp_path, "other-seed", "--seed", "1")
    assert cache_lines(other_out)[0].startswith("Dataset: built in ")
    assert len(list(directory.glob("*.lgdata"))) == 2
