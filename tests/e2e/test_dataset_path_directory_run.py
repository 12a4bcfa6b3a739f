"""A --dataset-path that names a directory, for a dataset that reads one file, is refused in one
line naming it, exit 1, before anything is sent (it said "No such file", of a path that
exists); hf and speed_bench, which read a directory, take one."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import mock_server, mock_stats, refusal

from loadgen.config import RunConfig
from loadgen.session.flag_checks import dataset_path_problem


@pytest.mark.parametrize("dataset", ["custom", "sharegpt", "sonnet", "burstgpt"])
def test_a_directory_is_one_line_naming_it_and_nothing_is_sent(
    tmp_path: Path, dataset: str
) -> None:
    with mock_server() as url:
        before = mock_stats(url)["requests"]
        proc = refusal(
            "--base-url", url, "--tokenizer", "loadgen-mock", "--dataset-name", dataset,
            "--dataset-path", str(tmp_path), "--num-prompts", "4", "--disable-tqdm",
        )  # fmt: skip
        sent = mock_stats(url)["requests"]
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: --dataset-path {tmp_path} is a directory: --dataset-name {dataset} reads one file"
    ]
    assert sent == before == {}  # nothing sent


@pytest.mark.parametrize("dataset", ["hf", "speed_bench"])
def test_datasets_that_read_a_directory_take_one(tmp_path: Path, dataset: str) -> None:
    config = RunConfig(dataset_name=dataset, dataset_path=str(tmp_path))
    assert dataset_path_problem(config) is None


def test_a_missing_file_is_still_no_such_file(tmp_path: Path) -> None:
    missing = tmp_path / "no.jsonl"
    config = RunConfig(dataset_name="custom", dataset_path=str(missing))
    assert dataset_path_problem(config) == f"--dataset-path {missing}: No such file"
