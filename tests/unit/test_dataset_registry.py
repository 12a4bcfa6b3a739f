"""Tests for the dataset registry and its dispatch: what each entry names exists, and errors are
classified by type (a flag's value, or the file's contents)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import config_given

from loadgen.config import FLAGS, RUN_FLAGS, UPSTREAM_DATASETS, RunConfig
from loadgen.datasets.errors import FlagError
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sample import sample_dataset

FIELDS = {field.name for field in dataclasses.fields(RunConfig)}


@pytest.mark.parametrize("name", list(DATASETS))
def test_loader_and_sampler_read_run_config_fields(name):
    assert set(DATASETS[name].reads) <= FIELDS


def readers(flag: str) -> set[str]:
    """The datasets the flag table says read ``flag``."""
    return {reader for reader in FLAGS[flag].readers if reader in UPSTREAM_DATASETS}


@pytest.mark.parametrize("flag", [flag for flag in RUN_FLAGS if readers(flag.name)])
def test_the_datasets_a_flag_names_as_readers_are_built(flag):
    assert readers(flag.name) <= set(DATASETS), flag.name


def test_skip_chat_template_is_read_where_it_skips_the_template():
    templated = {name for name, d in DATASETS.items() if d.templated == "unless skipped"}
    assert readers("--skip-chat-template") == templated


def test_a_flag_at_fault_is_a_flag_error(tok):
    config = RunConfig(dataset_name="random", num_prompts=2, random_output_len=0)
    with pytest.raises(FlagError, match="--random-output-len must be >= 1"):
        sample_dataset(config, tok)


def test_a_trace_flag_at_fault_is_a_flag_error(tok, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    row = {"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}
    trace.write_text(json.dumps(row) + "\n")
    config = RunConfig(
        dataset_name="timed_trace",
        dataset_path=str(trace),
        num_prompts=1,
        timed_trace_chunk_hash_size=0,
    )
    with pytest.raises(FlagError, match="--timed-trace-chunk-hash-size must be >= 1"):
        sample_dataset(config, tok)
    assert capsys.readouterr().out.startswith("timed-trace: chunk_size: 0,")


def test_a_file_at_fault_names_the_path_and_is_no_flag_error(tok, tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": "hello"}) + "\n")
    config = RunConfig(
        dataset_name="custom", dataset_path=str(path), num_prompts=1, custom_output_len=-1
    )
    with pytest.raises(ValueError, match=f"^--dataset-path {path}: --custom-output-len -1") as e:
        sample_dataset(config, tok)
    assert not isinstance(e.value, FlagError)


def test_hf_takes_disable_shuffle_and_no_oversample_as_upstream():
    config = config_given(
        dataset_name="hf", dataset_path="x", disable_shuffle=True, no_oversample=True
    )
    assert config.ignored_flag_warnings() == []
    assert readers("--disable-shuffle") >= {"custom", "hf"}
