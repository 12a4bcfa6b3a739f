"""End to end: BFCL (hf), speed_bench and burstgpt from local copies the tests write, through the
real CLI (in process), real workers and the mock."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from helpers import only_json, refusal, run_in_process

from loadgen.text.tokenizer import load_tokenizer

BFCL = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
CHAT = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
SAVED = ["--disable-tqdm", "--save-result", "--save-detailed"]


def write_bfcl(directory: Path) -> None:
    function = {"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}}}
    for category, n in (("simple", 4), ("multiple", 2)):
        rows = [
            {"id": f"{category}_{i}", "question": [[{"role": "user", "content": f"q {i}"}]],
             "function": [function]}
            for i in range(n)
        ]  # fmt: skip
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (directory / f"BFCL_v3_{category}.json").write_text(text)


def test_bfcl_runs_from_a_local_copy_with_chat_only(tmp_path: Path) -> None:
    write_bfcl(tmp_path)
    args = [
        "--mock", "--dataset-name", "hf", "--dataset-path", str(tmp_path), "--hf-name", BFCL,
        "--bfcl-categories", "simple,multiple", "--num-prompts", "8", "--hf-output-len", "5",
    ]  # fmt: skip
    proc = run_in_process(*args, *CHAT, *SAVED, "--result-dir", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert result["completed"] == 8 and result["output_lens"] == [5] * 8
    refused = refusal(*args, "--disable-tqdm")  # the default backend, openai
    assert refused.returncode == 2
    assert "BFCL dataset requires the 'openai-chat' backend" in refused.stderr
    missing = run_in_process(
        *args[:-4], "--bfcl-categories", "live_simple", *CHAT, "--disable-tqdm"
    )
    assert missing.returncode != 0
    assert "BFCL_v3_live_simple.json is not there" in missing.stderr


def test_speed_bench_reads_the_subset_directory(tmp_path: Path) -> None:
    lines = [
        {
            "category": "qa" if i % 2 else "coding",
            "messages": [{"role": "user", "content": f"w{i}"}],
        }
        for i in range(7)
    ]
    (tmp_path / "throughput_1k.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    proc = run_in_process(
        "--mock", "--dataset-name", "speed_bench", "--dataset-path", str(tmp_path),
        "--speed-bench-dataset-subset", "throughput_1k", "--speed-bench-category", "qa",
        "--speed-bench-output-len", "3", "--num-prompts", "3", "--skip-chat-template",
        *SAVED, "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    prompts = [x["messages"][0]["content"] for x in lines if x["category"] == "qa"]
    random.Random(0).shuffle(prompts)
    tokenizer = load_tokenizer("loadgen-mock")
    assert result["input_lens"] == [len(tokenizer.encode(p).ids) for p in prompts[:3]]
    assert result["output_lens"] == [3] * 3
    absent = run_in_process(
        "--mock", "--dataset-name", "speed_bench", "--dataset-path", str(tmp_path)
    )
    assert absent.returncode != 0
    assert "qualitative.jsonl is not in the directory" in absent.stderr


def cache_hub_subset(cache: Path, subset: str, rows: list[dict]) -> None:
    """Leave in the datasets cache ``cache`` what ``load_dataset("nvidia/SPEED-Bench", subset,
    split="test")`` leaves: a Parquet build of the rows, moved where the hub's build goes."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.packaged_modules.parquet.parquet import Parquet

    source = cache.parent / f"{subset}.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source)
    builder = Parquet(
        cache_dir=str(cache), dataset_name="SPEED-Bench", config_name=subset,
        data_files={"test": [str(source)]}, hash="0" * 16,
    )  # fmt: skip
    builder.download_and_prepare()
    built = next((cache / "speed-bench").glob(f"{subset}-*"))  # the config id has a suffix
    (cache / "nvidia___speed-bench").mkdir(exist_ok=True)
    built.rename(cache / "nvidia___speed-bench" / subset)


def test_speed_bench_reads_the_hub_subset_from_the_datasets_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets.config

    placeholder = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
    rows = [
        {"category": "qa" if i % 2 else "coding", "turns": [f"h{i}", "next"] if i % 3 else
         [f"{placeholder}\n\n{{question}}"], "source": "s", "src_id": str(i)}
        for i in range(9)
    ]  # fmt: skip
    cache = tmp_path / "cache"
    cache_hub_subset(cache, "qualitative", rows)
    # HF_DATASETS_CACHE, as the datasets library read it when it was imported (in this process).
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    run = ["--mock", "--dataset-name", "speed_bench", "--dataset-path", "nvidia/SPEED-Bench"]
    proc = run_in_process(
        *run, "--speed-bench-output-len", "2", "--num-prompts", "0", "--skip-chat-template",
        *SAVED, "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: 3 of 9 nvidia/SPEED-Bench qualitative rows need text" in proc.stdout
    prompts = [row["turns"][0] for row in rows if not row["turns"][0].startswith(placeholder)]
    random.Random(0).shuffle(prompts)
    tokenizer = load_tokenizer("loadgen-mock")
    assert only_json(tmp_path / "out")["input_lens"] == [
        len(tokenizer.encode(p).ids) for p in prompts
    ]
    absent = run_in_process(*run, "--speed-bench-dataset-subset", "throughput_2k")
    assert absent.returncode != 0
    assert "the subset throughput_2k is not in the datasets cache" in absent.stderr


def test_burstgpt_sends_the_traces_lengths(tmp_path: Path) -> None:
    rows = "".join(f"{i},GPT-4,{8 + i},{1 + i % 3},0,Conversation log\n" for i in range(6))
    path = tmp_path / "burst.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + rows)
    proc = run_in_process(
        "--mock", "--dataset-name", "burstgpt", "--dataset-path", str(path), "--num-prompts", "9",
        *SAVED, "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert result["completed"] == 9
    picks = np.random.RandomState(0).choice(6, size=9, replace=True)  # pandas' df.sample
    # input_lens are the mock's usage.prompt_tokens; the dataset's are checked in tests/unit
    assert result["output_lens"] == [1 + int(i) % 3 for i in picks]
