"""Tests for the dataset registry and its dispatch: what each entry names exists, and errors are
classified by type (a flag's value, or the file's contents)."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from helpers import ROOT, config_given

from loadgen.config import FLAGS, RUN_FLAGS, UPSTREAM_DATASETS, RunConfig
from loadgen.datasets.errors import FlagError
from loadgen.datasets.registry import DATASETS, check_dataset
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


def test_a_trace_flag_at_fault_is_a_flag_error(terminal, tok, tmp_path, capsys):
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


@pytest.mark.parametrize("name", [name for name, d in DATASETS.items() if d.check is not None])
def test_each_dataset_check_reads_run_config_fields(name):
    check = DATASETS[name].check
    assert set(inspect.signature(check).parameters) <= FIELDS


@pytest.mark.parametrize("name", list(DATASETS))
def test_a_file_dataset_needs_a_path_and_a_synthetic_one_refuses_it(name):
    dataset = DATASETS[name]
    path = None if dataset.synthetic else "data.file"
    wrong = RunConfig(dataset_name=name, dataset_path="data.file" if path is None else None)
    with pytest.raises(ValueError) as refused:
        check_dataset(wrong)
    if dataset.synthetic:
        assert str(refused.value) == f"--dataset-path is not read by --dataset-name {name}"
    else:
        assert dataset.path_help, name
        assert str(refused.value) == (
            f"--dataset-name {name} needs --dataset-path ({dataset.path_help})"
        )


def test_the_needs_dataset_path_refusal_is_written_once():
    sources = (ROOT / "loadgen").rglob("*.py")
    assert sum(path.read_text().count("needs --dataset-path") for path in sources) == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dataset_name": "sonnet", "skip_tokenizer_init": True}, "--skip-tokenizer-init"),
        ({"dataset_name": "custom", "custom_output_len": 0}, "--custom-output-len must be >= 1"),
        ({"dataset_name": "spec_bench", "spec_bench_output_len": 0}, "--spec-bench-output-len"),
        ({"dataset_name": "speed_bench", "speed_bench_output_len": 0}, "--speed-bench-output"),
        ({"dataset_name": "timed_trace", "backend": "openai-chat"}, "completions backend"),
        ({"dataset_name": "custom_image", "backend": "openai"}, "not supported on backend"),
        ({"dataset_name": "hf", "hf_name": "nobody/nothing"}, "Unsupported dataset path"),
        ({"dataset_name": "random-mm", "backend": "openai"}, "not supported on backend"),
    ],
)
def test_each_datasets_own_check_refuses_through_the_registry(fields, message):
    config = RunConfig(**fields)
    if not DATASETS[config.dataset_name].synthetic:
        config = dataclasses.replace(config, dataset_path="data.file")
    with pytest.raises(ValueError, match=message):
        check_dataset(config)


def test_a_file_read_once_serves_another_seeds_draw(tok, tmp_path, monkeypatch):
    # A campaign draws each run's prompts with its own --seed (loadgen/session/campaign.py):
    # the file's rows are read once, kept in ``read``, and sampled again in another order.
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt {i} " * 3}) + "\n" for i in range(40)))
    reads = []
    custom = DATASETS["custom"]

    def counting_load(path):
        reads.append(path)
        return custom.load(path)

    monkeypatch.setitem(DATASETS, "custom", dataclasses.replace(custom, load=counting_load))
    read: dict = {}
    first = RunConfig(dataset_name="custom", dataset_path=str(path), num_prompts=10, seed=1)
    drawn = [
        sample_dataset(dataclasses.replace(first, seed=seed), tok, read=read).prompts
        for seed in (1, 2, 1)
    ]
    assert reads == [str(path)]
    assert drawn[0] == drawn[2] != drawn[1]
    assert drawn[0] == sample_dataset(first, tok).prompts  # what a run without ``read`` draws
