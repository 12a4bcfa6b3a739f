"""Dataset parity: do loadgen's samplers send the same prompts as `vllm bench serve`?

For `sharegpt`, `custom` (as written, and with the tokenizer's chat template and keyword
arguments), `custom_image`, `custom_audio`, `spec_bench`, `speed_bench`, `burstgpt`, `hf` (local
copies, ASR and BFCL too; the multimodal ones as `hf-mm`), `prefix_repetition`, `random-mm`,
`random-rerank` and batched `random` it samples the same input with the same seed twice: once with
upstream's own dataset classes, run by the Python of a `vllm` install (scripts/bench/README.md:
"vllm bench serve, installed light", plus pandas for `custom`), and once with loadgen's. It prints,
per case, how many requests each gave and how many differ in prompt text (MD5), prompt_len or
output length (batched `random`: lengths only, its padding draws differ by design). Needs a local
tokenizer directory (tokenizer.json and tokenizer_config.json, whose chat template the templated
cases use) and a ShareGPT JSON file; the other input files (custom, custom_image with its images,
Spec-Bench, SPEED-Bench, BurstGPT, the hub copies and BFCL's category files, which upstream's side
reads in place of its download) are made here.

Over 500 lines because it is one table of cases and, beside each dataset, the two ways it is
sampled (upstream's script and loadgen's flags) and the input it is sampled from.

Run: python scripts/bench/dataset_parity.py --vllm-python /work/vllm-venv/bin/python \\
       --tokenizer DIR --sharegpt ShareGPT_V3_unfiltered_cleaned_split.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mm_hub_copies import ROWS, write_mm_copies

from loadgen.audio import read_wav
from loadgen.backends import chat_content
from loadgen.config import RunConfig
from loadgen.datasets.sample import sample_dataset
from loadgen.datasets.sharegpt import load_sharegpt_entries
from loadgen.text.chat_template import ChatTemplate, ChatTemplateError, load_chat_template
from loadgen.text.tokenizer import LocalTokenizer, load_tokenizer

# Upstream's side, run in the vllm install's Python; prints [md5, prompt_len, output_len] rows
# (md5 of the prompt, or of the JSON list of a batched or rerank prompt).
UPSTREAM = """
import hashlib, json, sys
from transformers import AutoTokenizer
from vllm.benchmarks.datasets import (CustomDataset, PrefixRepetitionRandomDataset,
    RandomDataset, RandomDatasetForReranking, RandomMultiModalDataset, ShareGPTDataset,
    SpecBench)
name, path, tokenizer, seed, n, kwargs = sys.argv[1:7]
tok = AutoTokenizer.from_pretrained(tokenizer)
seed, n, kwargs = int(seed), int(n), json.loads(kwargs)
if name in ("sharegpt", "sharegpt-mm"):
    reqs = ShareGPTDataset(dataset_path=path, random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
    if name == "sharegpt-mm":  # the text and its image or video part
        for r in reqs:
            r.prompt = [r.prompt, r.multi_modal_data]
elif name == "custom":
    reqs = CustomDataset(dataset_path=path, random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
elif name == "hf":  # a local copy named by hf_name, as get_samples builds the class
    from vllm.benchmarks.datasets import (AIMODataset, BlazeditDataset, ConversationDataset,
        InstructCoderDataset, MLPerfDataset, MTBenchDataset, NextEditPredictionDataset)
    hf_name, split = kwargs.pop("hf_name"), kwargs.pop("split")
    cls = next(c for c in (AIMODataset, BlazeditDataset, ConversationDataset,
                           InstructCoderDataset, MLPerfDataset, MTBenchDataset,
                           NextEditPredictionDataset) if hf_name in c.SUPPORTED_DATASET_PATHS)
    reqs = cls(dataset_path=path + "/" + hf_name.replace("/", "_"), dataset_split=split,
               random_seed=seed, hf_name=hf_name).sample(tokenizer=tok, num_requests=n, **kwargs)
elif name == "hf-mm":  # a local copy, built by get_samples itself (its split defaults, checks)
    import argparse, importlib
    module = importlib.import_module("vllm.benchmarks.datasets.datasets")
    copy = path + "/" + kwargs["hf_name"].replace("/", "_")
    class LocalSnapshot:  # MMVU's snapshot_download gives the local copy
        def snapshot_download(self, *args, **kw):
            return copy
    module.hf_api = LocalSnapshot
    args = argparse.Namespace(
        dataset_name="hf", dataset_path=copy, hf_name=kwargs["hf_name"],
        hf_split=kwargs.get("split"), hf_subset=None, hf_output_len=kwargs.get("output_len"),
        backend="openai-chat", seed=seed, num_prompts=n, no_stream=False, disable_shuffle=False,
        trust_remote_code=False, enable_multimodal_chat=False, no_oversample=False,
        skip_chat_template=False)
    reqs = module.get_samples(args, tok)
    for r in reqs:  # the text and its image or video, as the chat message carries them
        r.prompt = [r.prompt, [r.multi_modal_data] if r.multi_modal_data else []]
elif name == "custom_image":
    from vllm.benchmarks.datasets import CustomImageDataset
    reqs = CustomImageDataset(dataset_path=path, random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
    for r in reqs:  # the chat message's parts, as they are sent
        mm = r.multi_modal_data
        if not isinstance(r.prompt, list):
            r.prompt = [{"type": "text", "text": r.prompt}, *(mm if isinstance(mm, list) else [mm])]
elif name in ("custom_audio", "asr"):  # the prompt, and the clip as its upload encodes it
    import numpy as np
    if name == "custom_audio":
        from vllm.benchmarks.datasets import CustomAudioDataset
        reqs = CustomAudioDataset(dataset_path=path, random_seed=seed).sample(
            tokenizer=tok, num_requests=n, **kwargs)
    else:
        from vllm.benchmarks.datasets import ASRDataset
        reqs = ASRDataset(dataset_path=path + "/asr", dataset_split="train", random_seed=seed,
                          hf_name="openslr/librispeech_asr").sample(
            tokenizer=tok, num_requests=n, **kwargs)
    for r in reqs:
        y, sr = r.multi_modal_data["audio"]
        pcm = np.clip(np.round(np.asarray(y) * 32768), -32768, 32767).astype("<i2")
        r.prompt = [r.prompt, len(y) / sr, hashlib.md5(pcm.tobytes()).hexdigest()]
elif name == "spec_bench":  # as get_samples builds it: no seed (0), no template flags
    reqs = SpecBench(dataset_path=path, category=kwargs.pop("category", None)).sample(
        tokenizer=tok, num_requests=n, **kwargs)
elif name == "burstgpt":
    from vllm.benchmarks.datasets.datasets import BurstGPTDataset
    reqs = BurstGPTDataset(dataset_path=path, random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
elif name == "speed_bench":  # as get_samples builds it: no seed (0)
    from vllm.benchmarks.datasets.datasets import SpeedBench
    reqs = SpeedBench(dataset_path=path, dataset_subset=kwargs.pop("subset"),
                      category=kwargs.pop("category", None)).sample(
        tokenizer=tok, num_requests=n, **kwargs)
elif name == "bfcl":  # the category files read from the local copy, not hf_hub_download
    from vllm.benchmarks.datasets.datasets import BFCLDataset
    def local_category(self, category):
        with open(f"{path}/BFCL_v3_{category}.json") as f:
            return [json.loads(line) for line in f if line.strip()]
    BFCLDataset._load_category = local_category
    reqs = BFCLDataset(dataset_path=path, dataset_split="train", random_seed=seed,
                       hf_name="gorilla-llm/Berkeley-Function-Calling-Leaderboard").sample(
        tokenizer=tok, num_requests=n, **kwargs)
    for r in reqs:  # what the chat body carries: the messages, the tools and tool_choice
        r.prompt = [r.prompt, r.chat_messages, r.request_overrides]
elif name == "prefix_repetition":
    reqs = PrefixRepetitionRandomDataset(random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
elif name == "random-mm":
    kwargs["bucket_config"] = {tuple(json.loads(k)): v for k, v in kwargs["bucket_config"].items()}
    reqs = RandomMultiModalDataset(random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
    for r in reqs:  # the text and its images, as the chat message carries them
        r.prompt = [r.prompt, r.multi_modal_data]
elif name == "random-rerank":
    reqs = RandomDatasetForReranking(random_seed=seed).sample(
        tokenizer=tok, num_requests=n, **kwargs)
else:
    reqs = RandomDataset(random_seed=seed).sample(tokenizer=tok, num_requests=n, **kwargs)
text = lambda p: p if isinstance(p, str) else json.dumps(p)
print(json.dumps([[hashlib.md5(text(r.prompt).encode()).hexdigest(), r.prompt_len,
                   r.expected_output_len] for r in reqs]))
"""

# (dataset, seed, num_prompts, upstream's sample() keyword arguments): oversampled cases too.
CASES: list[tuple[str, int, int, dict]] = [
    ("sharegpt", 0, 1000, {"output_len": None}),
    ("sharegpt", 1, 1000, {"output_len": 256}),
    ("sharegpt", 0, 20000, {"output_len": None}),
    ("sharegpt-mm", 2, 300, {"output_len": None}),  # entries with an image or a video
    ("custom", 3, 300, {"output_len": 256, "skip_chat_template": True}),
    ("custom", 0, 1000, {"output_len": 128, "skip_chat_template": True}),
    ("custom", 0, 300, {"output_len": 128}),  # the tokenizer's chat template
    ("custom", 1, 100, {"output_len": 64, "chat_template_kwargs": {"enable_thinking": False}}),
    ("spec_bench", 0, 80, {"output_len": 256, "category": "coding"}),
    ("custom_image", 3, 40, {"output_len": 32}),
    ("custom_image", 3, 40, {"output_len": 32, "ensure_client_side_data": True}),
    # Upstream's get_samples passes no skip_chat_template (it templates the counted prompt when
    # the tokenizer has a template; loadgen does not: docs/compat.md, Audio), so it is passed.
    ("custom_audio", 0, 30, {"output_len": 16, "skip_chat_template": True}),
    ("custom_audio", 2, 12, {"output_len": -1, "skip_chat_template": True}),
    ("asr", 0, 20, {"asr_min_audio_len_sec": 0.3, "asr_max_audio_len_sec": 1.5}),
    ("asr", 1, 8, {"output_len": 64}),
    ("hf", 0, 300, {"hf_name": "likaixin/InstructCoder", "split": "train"}),
    ("hf", 1, 200, {"hf_name": "philschmid/mt-bench", "split": "train", "output_len": 64}),
    ("hf", 0, 300, {"hf_name": "AI-MO/NuminaMath-CoT", "split": "train"}),
    ("hf", 2, 300, {"hf_name": "Aeala/ShareGPT_Vicuna_unfiltered", "split": "train"}),
    (
        "hf",
        0,
        200,
        {
            "hf_name": "vdaita/edit_5k_char",
            "split": "train",
            "min_distance": 0.2,
            "max_distance": 0.7,
        },
    ),
    ("hf", 0, 200, {"hf_name": "zed-industries/zeta", "split": "train"}),
    ("hf", 1, 300, {"hf_name": "mgoin/mlperf-inference-llama3.1-data", "split": "train"}),
    ("spec_bench", 0, 300, {"output_len": 64}),
    (
        "prefix_repetition",
        0,
        200,
        {"prefix_len": 128, "suffix_len": 64, "num_prefixes": 7, "output_len": 32},
    ),
    ("random-rerank", 0, 200, {"input_len": 128, "range_ratio": 0.3, "batchsize": 8}),
    ("random-rerank", 2, 101, {"input_len": 64, "batchsize": 5, "is_reranker": False}),
    (
        "random-mm",
        0,
        40,
        {
            "input_len": 64,
            "output_len": 8,
            "base_items_per_request": 2,
            "num_mm_items_range_ratio": 0.5,
            "limit_mm_per_prompt": {"image": 2},
            "bucket_config": {"[64, 64, 1]": 0.7, "[48, 96, 1]": 0.3},
        },
    ),
    (  # videos too: random frames encoded as MP4 by OpenCV on both sides
        "random-mm",
        1,
        30,
        {
            "input_len": 32,
            "output_len": 8,
            "base_items_per_request": 2,
            "num_mm_items_range_ratio": 0.5,
            "limit_mm_per_prompt": {"image": 2, "video": 1},
            "bucket_config": {"[32, 32, 1]": 0.5, "[48, 64, 4]": 0.5},
        },
    ),
    ("burstgpt", 0, 200, {}),
    ("burstgpt", 3, 5000, {}),  # more than the GPT-4 rows: drawn with replacement
    ("speed_bench", 0, 300, {"subset": "qualitative", "output_len": 128}),
    ("speed_bench", 0, 100, {"subset": "throughput_1k", "category": "coding", "output_len": 64}),
    ("speed_bench", 1, 50, {"subset": "qualitative", "output_len": 32, "skip_chat_template": True}),
    ("bfcl", 0, 150, {}),
    ("bfcl", 2, 400, {"categories": ["simple", "multiple"], "output_len": 64}),  # topped up
    # The multimodal hub datasets (scripts/bench/mm_hub_copies.py): split defaults but LLaVA's.
    ("hf-mm", 0, 200, {"hf_name": "lmms-lab/LLaVA-OneVision-Data", "split": "train"}),
    (
        "hf-mm",
        1,
        100,
        {"hf_name": "lmms-lab/LLaVA-OneVision-Data", "split": "train", "output_len": 64},
    ),
    ("hf-mm", 0, 150, {"hf_name": "lmarena-ai/VisionArena-Chat"}),
    ("hf-mm", 2, 400, {"hf_name": "lmarena-ai/vision-arena-bench-v0.1", "output_len": 32}),
    ("hf-mm", 0, 150, {"hf_name": "Lin-Chen/MMStar"}),
    ("hf-mm", 0, 150, {"hf_name": "yale-nlp/MMVU"}),
    ("hf-mm", 3, 400, {"hf_name": "yale-nlp/MMVU", "output_len": 16}),  # topped up
    # Batched embeddings inputs; random's padding draws differ by design, so lengths only.
    ("random", 0, 300, {"input_len": 64, "output_len": 8, "batchsize": 16}),
]


def _hf_flags(path: str, kw: dict) -> dict[str, Any]:
    return {
        "dataset_path": f"{path}/{kw['hf_name'].replace('/', '_')}",  # a local copy
        "hf_name": kw["hf_name"],
        "hf_split": kw["split"],
        "hf_output_len": kw.get("output_len"),
        "blazedit_min_distance": kw.get("min_distance", 0.0),
        "blazedit_max_distance": kw.get("max_distance", 1.0),
    }


def _random_mm_flags(kw: dict) -> dict[str, Any]:
    return {
        "random_input_len": kw["input_len"],
        "random_output_len": kw["output_len"],
        "random_mm_base_items_per_request": kw["base_items_per_request"],
        "random_mm_num_mm_items_range_ratio": kw["num_mm_items_range_ratio"],
        "random_mm_limit_mm_per_prompt": json.dumps(kw["limit_mm_per_prompt"]),
        "random_mm_bucket_config": str(
            {tuple(json.loads(k)): v for k, v in kw["bucket_config"].items()}
        ),
    }


# Per dataset: the `loadgen run` flags (RunConfig fields) for a case's path and upstream's
# sample() keyword arguments.
FLAGS: dict[str, Callable[[str, dict], dict[str, Any]]] = {
    "sharegpt": lambda path, kw: {"dataset_path": path, "sharegpt_output_len": kw["output_len"]},
    "sharegpt-mm": lambda path, kw: {"dataset_path": path, "sharegpt_output_len": kw["output_len"]},
    "custom": lambda path, kw: {
        "dataset_path": path,
        "custom_output_len": kw["output_len"],
        "skip_chat_template": kw.get("skip_chat_template", False),
        "chat_template_kwargs": kw.get("chat_template_kwargs"),
    },
    "spec_bench": lambda path, kw: {
        "dataset_path": path,
        "spec_bench_output_len": kw["output_len"],
        "spec_bench_category": kw.get("category"),
    },
    "custom_image": lambda path, kw: {
        "dataset_path": path,
        "custom_output_len": kw["output_len"],
        "custom_ensure_client_side_data": kw.get("ensure_client_side_data", False),
    },
    "hf": _hf_flags,
    "hf-mm": lambda path, kw: {
        "dataset_path": f"{path}/{kw['hf_name'].replace('/', '_')}",  # a local copy
        "hf_name": kw["hf_name"],
        "hf_split": kw.get("split"),
        "hf_output_len": kw.get("output_len"),
        "backend": "openai-chat",
    },
    "custom_audio": lambda path, kw: {"dataset_path": path, "custom_output_len": kw["output_len"]},
    "asr": lambda path, kw: {
        "dataset_path": f"{path}/asr",  # a local copy
        "hf_name": "openslr/librispeech_asr",
        "hf_output_len": kw.get("output_len"),
        **{k: v for k, v in kw.items() if k.startswith("asr_")},
    },
    "burstgpt": lambda path, kw: {"dataset_path": path},
    "speed_bench": lambda path, kw: {
        "dataset_path": path,
        "speed_bench_dataset_subset": kw["subset"],
        "speed_bench_category": kw.get("category"),
        "speed_bench_output_len": kw["output_len"],
        "skip_chat_template": kw.get("skip_chat_template", False),
    },
    "bfcl": lambda path, kw: {
        "dataset_path": path,
        "hf_name": "gorilla-llm/Berkeley-Function-Calling-Leaderboard",
        "bfcl_categories": kw.get("categories"),
        "hf_output_len": kw.get("output_len"),
    },
    "prefix_repetition": lambda path, kw: {f"prefix_repetition_{k}": v for k, v in kw.items()},
    "random-mm": lambda path, kw: _random_mm_flags(kw),
    "random-rerank": lambda path, kw: {
        "random_input_len": kw["input_len"],
        "random_range_ratio": str(kw.get("range_ratio", 0.0)),
        "random_batch_size": kw["batchsize"],
        "no_reranker": not kw.get("is_reranker", True),
    },
    "random": lambda path, kw: {
        "random_input_len": kw["input_len"],
        "random_output_len": kw["output_len"],
        "random_batch_size": kw["batchsize"],
    },
}


def case_config(name: str, path: str, seed: int, n: int, kw: dict) -> RunConfig:
    """The configuration of `loadgen run` that asks for a case."""
    dataset = {"asr": "hf", "bfcl": "hf", "hf-mm": "hf", "sharegpt-mm": "sharegpt"}.get(name, name)
    return RunConfig(dataset_name=dataset, num_prompts=n, seed=seed, **FLAGS[name](path, kw))


def loadgen_rows(config: RunConfig, codec: LocalTokenizer, template: ChatTemplate | None
                 ) -> list[list]:  # fmt: skip
    """loadgen's sample, as a run builds it, as [md5, prompt_len, output_len] rows."""
    got = sample_dataset(config, codec, template if config.uses_chat_template else None)
    if config.dataset_name == "custom_image":  # the chat message's parts, as they are sent
        parts = [chat_content(p, mm) for p, mm in zip(got.prompts, got.mm_contents, strict=True)]
        got = dataclasses.replace(got, prompts=parts, mm_contents=None)
    if got.audios is not None:  # custom_audio, ASR: the prompt and the clip its upload encodes
        clips = [read_wav(clip.data) for clip in got.audios]
        pcm = [np.clip(np.round(y * 32768), -32768, 32767).astype("<i2") for y, _ in clips]
        got = dataclasses.replace(got, prompts=[
            [p, clip.duration_s, hashlib.md5(ints.tobytes()).hexdigest()]
            for p, clip, ints in zip(got.prompts, got.audios, pcm, strict=True)
        ])  # fmt: skip
    if got.chat_messages is not None:  # BFCL: the messages, the tools and tool_choice
        got = dataclasses.replace(got, prompts=[
            [p, messages, overrides] for p, messages, overrides
            in zip(got.prompts, got.chat_messages, got.request_overrides or [], strict=True)
        ])  # fmt: skip
    if got.mm_contents is not None and config.dataset_name == "sharegpt":  # one part or none
        got = dataclasses.replace(got, prompts=[
            [p, mm[0] if mm else None] for p, mm in zip(got.prompts, got.mm_contents, strict=True)
        ], mm_contents=None)  # fmt: skip
    if got.mm_contents is not None:  # random-mm: the text and its images (or videos)
        got = dataclasses.replace(
            got, prompts=[[p, mm] for p, mm in zip(got.prompts, got.mm_contents, strict=True)]
        )
    rows = []
    for prompt, length, output in zip(got.prompts, got.prompt_lens, got.output_lens, strict=True):
        text = prompt if isinstance(prompt, str) else json.dumps(prompt)
        rows.append([hashlib.md5(text.encode()).hexdigest(), int(length), int(output)])
    if config.dataset_name == "random":
        rows = [row[1:] for row in rows]
    return rows


def write_image_lines(directory: Path, entries: list[dict]) -> Path:
    """A custom_image file: RGB, RGBA and grayscale images, referenced both ways upstream reads
    (prompt with image_files, and interleaved content with an image_url object)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    files = [directory / name for name in ("rgb.png", "rgba.png", "gray.jpg")]
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(files[0])
    Image.fromarray(rng.integers(0, 256, (16, 16, 4), dtype=np.uint8), "RGBA").save(files[1])
    Image.fromarray(rng.integers(0, 256, (12, 10), dtype=np.uint8), "L").save(files[2])
    lines = []
    for i, entry in enumerate(entries):
        text = entry["conversations"][0]["value"][:300]
        if i % 3 == 0:
            lines.append({"content": [
                {"type": "text", "text": text}, {"type": "image", "image": str(files[0])},
                {"type": "image_url", "image_url": {"url": str(files[1]), "detail": "low"}},
            ]})  # fmt: skip
        else:
            lines.append({"prompt": text, "image_files": [str(f) for f in files[: 1 + i % 3]]})
    path = directory / "images.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def write_audio_files(directory: Path, entries: list[dict]) -> Path:
    """A custom_audio file of WAV clips (16-bit or float, mono or stereo; 0.2 to 2 s) and a
    local LibriSpeech-shaped parquet copy of its mono clips (``directory/asr``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from loadgen.audio import pcm16_wav

    rng = np.random.default_rng(0)
    lines, rows = [], []
    for i, entry in enumerate(entries):
        rate = (16000, 22050, 8000)[i % 3]
        frames = int(rate * (0.2 + 1.8 * rng.random()))
        samples = rng.uniform(-0.9, 0.9, (frames, 1 + i % 2))
        data = pcm16_wav(samples, rate) if i % 4 else _float_wav(samples, rate)
        (directory / f"clip{i}.wav").write_bytes(data)
        line = {
            "prompt": entry["conversations"][0]["value"][:200],
            "audio": str(directory / f"clip{i}.wav"),
        }
        lines.append(line | {"output_tokens": 1 + i % 50})
        if samples.shape[1] == 1:  # upstream's ASR length filter reads a stereo clip's length
            # as channels / rate (get_audio_duration's y.shape[-1]); ASR sets are mono
            rows.append({"audio": {"bytes": data, "path": f"clip{i}.wav"}, "text": line["prompt"]})
    (directory / "asr").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), directory / "asr" / "train-00000-of-00001.parquet")
    path = directory / "audio.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _float_wav(samples: Any, rate: int) -> bytes:
    """A 32-bit IEEE float WAV (format tag 3)."""
    import struct

    data = samples.astype("<f4").tobytes()
    channels = samples.shape[1]
    fmt = struct.pack("<HHIIHH", 3, channels, rate, rate * 4 * channels, 4 * channels, 32)
    body = b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data))
    return b"RIFF" + struct.pack("<I", len(body) + len(data)) + body + data


def write_hf_copies(directory: Path, entries: list[dict]) -> None:
    """Local copies, in each hub dataset's columns, of ShareGPT conversations (one JSONL each)."""

    def turns(entry: dict) -> tuple[str, str]:
        conversation = entry["conversations"]
        return conversation[0]["value"], conversation[1]["value"]

    rows = {
        "likaixin/InstructCoder": [
            {"instruction": p[:200], "input": c[:2000], "output": ""}
            for p, c in map(turns, entries)
        ],
        "philschmid/mt-bench": [{"turns": [p, "next"]} for p, _ in map(turns, entries)],
        "AI-MO/NuminaMath-CoT": [{"problem": p, "solution": c} for p, c in map(turns, entries)],
        "vdaita/edit_5k_char": [
            {"code": c[:1500], "change_request": p[:300], "norm_distance": (i % 10) / 10}
            for i, (p, c) in enumerate(map(turns, entries))
        ],
        "zed-industries/zeta": [
            {
                "events": p[:500],
                "input": c[:800],
                "output": f"x <|editable_region_start|>{c[:300]}" if i % 3 else c[:200],
            }
            for i, (p, c) in enumerate(map(turns, entries))
        ],
        "mgoin/mlperf-inference-llama3.1-data": [
            {"system_prompt": "You are a helpful assistant.", "question": p, "output": c}
            for p, c in map(turns, entries)
        ],
        "Aeala/ShareGPT_Vicuna_unfiltered": [
            {"conversations": e["conversations"][:2] if i % 10 else e["conversations"][:1]}
            for i, e in enumerate(entries)
        ],
    }
    for hub_id, dataset_rows in rows.items():
        folder = directory / hub_id.replace("/", "_")
        folder.mkdir()
        (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dataset_rows))


def write_sharegpt_media(directory: Path, entries: list[dict]) -> Path:
    """ShareGPT entries, some with an ``image`` or ``video`` (paths and URLs, as upstream reads
    them)."""
    media = [
        {}, {"image": "/data/a.jpg"}, {"image": "https://example.com/b.png"},
        {"video": "clips/c.mp4"}, {"video": "file:///v/d.mp4"}, {"image": "", "video": "e.mp4"},
    ]  # fmt: skip
    path = directory / "sharegpt-media.json"
    path.write_text(json.dumps([e | media[i % len(media)] for i, e in enumerate(entries)]))
    return path


def write_burstgpt(directory: Path) -> Path:
    """A BurstGPT-shaped CSV: GPT-4 and ChatGPT rows, some with no response (failed)."""
    rng = np.random.default_rng(0)
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for i in range(3000):
        model = "GPT-4" if i % 3 else "ChatGPT"
        request, response = int(rng.integers(1, 2000)), int(rng.integers(0, 600)) * (i % 7 > 0)
        lines.append(f"{i * 5},{model},{request},{response},{request + response},Conversation log")
    path = directory / "burstgpt.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_speed_bench(directory: Path, entries: list[dict]) -> Path:
    """A SPEED-Bench directory as NeMo-Skills' prepare script writes it: {subset}.jsonl files of
    ``messages`` and ``category`` lines."""
    folder = directory / "speed-bench"
    folder.mkdir()
    categories = ("coding", "writing", "reasoning")
    for subset in ("qualitative", "throughput_1k"):
        (folder / f"{subset}.jsonl").write_text("".join(
            json.dumps({"question_id": i, "category": categories[i % 3], "messages": [
                {"role": "user", "content": e["conversations"][0]["value"][: 300 + 700 * (i % 2)]}
            ]}) + "\n"
            for i, e in enumerate(entries)
        ))  # fmt: skip
    return folder


def write_bfcl(directory: Path, entries: list[dict]) -> Path:
    """BFCL v3 category files (``{id, question, function}`` lines, BFCL's type names), with some
    rows upstream skips (no functions, an empty first turn)."""
    folder = directory / "bfcl"
    folder.mkdir()
    for c, category in enumerate(("simple", "live_simple", "multiple")):
        lines = []
        for i, entry in enumerate(entries[c * 40 : c * 40 + 30 + 10 * c]):
            function = {
                "name": f"tool_{i}",
                "description": entry["conversations"][0]["value"][:80],
                "parameters": {"type": "dict", "properties": {
                    "x": {"type": "float", "description": "a number"},
                    "items": {"type": "tuple", "items": {"type": "any"}},
                }, "required": ["x"]},
            }  # fmt: skip
            question = [[{"role": "user", "content": entry["conversations"][0]["value"][:400]}]]
            if i % 11 == 5:
                question = [[]]
            functions = [] if i % 13 == 7 else [function] * (1 + (category == "multiple"))
            lines.append({"id": f"{category}_{i}", "question": question, "function": functions})
        (folder / f"BFCL_v3_{category}.json").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
    return folder


def main() -> None:
    """Sample every case both ways and print the differences."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", required=True, help="the Python of a vllm install")
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer directory")
    parser.add_argument("--sharegpt", required=True, help="a ShareGPT JSON file")
    parser.add_argument(
        "--only", action="append", help="run only this dataset's cases (repeatable)"
    )
    args = parser.parse_args()
    codec = LocalTokenizer(load_tokenizer(args.tokenizer))
    try:
        template: ChatTemplate | None = load_chat_template(args.tokenizer)
    except ChatTemplateError:
        template = None  # the templated custom cases are skipped
    with tempfile.TemporaryDirectory(prefix="dataset-parity-") as tmp:
        custom = Path(tmp) / "custom.jsonl"
        entries = load_sharegpt_entries(args.sharegpt)[:500]
        custom.write_text(
            "".join(json.dumps({"prompt": e["conversations"][0]["value"]}) + "\n" for e in entries)
        )
        write_hf_copies(Path(tmp), load_sharegpt_entries(args.sharegpt)[:2000])
        images = write_image_lines(Path(tmp), entries[:30])
        audio = write_audio_files(Path(tmp), entries[:24])
        sharegpt_mm = write_sharegpt_media(Path(tmp), load_sharegpt_entries(args.sharegpt)[:600])
        burstgpt = write_burstgpt(Path(tmp))
        speed = write_speed_bench(Path(tmp), entries)
        bfcl = write_bfcl(Path(tmp), entries)
        if not args.only or "hf-mm" in args.only:
            write_mm_copies(Path(tmp), load_sharegpt_entries(args.sharegpt)[:ROWS])
        spec = Path(tmp) / "question.jsonl"  # Spec-Bench's form, categories in turn
        categories = ("coding", "qa", "math_reasoning")
        spec.write_text(
            "".join(
                json.dumps({"question_id": i, "category": categories[i % 3],
                            "turns": [e["conversations"][0]["value"], "next"]}) + "\n"
                for i, e in enumerate(entries)
            )
        )  # fmt: skip
        print(f"{'dataset':<18}{'seed':>5}{'asked':>7}  {'arguments':<44}{'upstream':>9}"
              f"{'loadgen':>8}{'differ':>7}")  # fmt: skip
        for name, seed, n, kw in CASES:
            if args.only and name not in args.only:
                continue
            paths = {
                "sharegpt": args.sharegpt, "sharegpt-mm": str(sharegpt_mm), "custom": str(custom),
                "spec_bench": str(spec),
                "custom_image": str(images), "custom_audio": str(audio),
                "burstgpt": str(burstgpt), "speed_bench": str(speed), "bfcl": str(bfcl),
            }  # fmt: skip
            path = paths.get(name, tmp)  # hf: the directory of local dataset copies
            config = case_config(name, path, seed, n, kw)
            if config.uses_chat_template and template is None:
                continue
            done = subprocess.run(
                [args.vllm_python, "-c", UPSTREAM, name, path, args.tokenizer, str(seed), str(n),
                 json.dumps(kw)],
                capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"upstream's {name} case failed:\n{done.stderr[-3000:]}")
            upstream = json.loads(done.stdout.splitlines()[-1])
            if name == "random":
                upstream = [row[1:] for row in upstream]
            ours = loadgen_rows(config, codec, template)
            differ = sum(a != b for a, b in zip(upstream, ours, strict=False))
            differ += abs(len(upstream) - len(ours))
            shown = json.dumps(kw, separators=(",", ":"))[:43]
            print(f"{name:<18}{seed:>5}{n:>7}  {shown:<44}{len(upstream):>9}{len(ours):>8}"
                  f"{differ:>7}")  # fmt: skip


if __name__ == "__main__":
    main()
