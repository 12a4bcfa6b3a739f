"""vLLM's ``hf`` datasets: text datasets from the Hugging Face hub, sampled as upstream does.

``--dataset-path`` is a hub id (or a local copy named by ``--hf-name``); the dataset is loaded
with the ``datasets`` library exactly as upstream loads it (``load_dataset(path,
name=--hf-subset, split=--hf-split, streaming=not --no-stream)``, then ``shuffle(seed)`` unless
``--disable-shuffle``), so the rows come in upstream's order. Each supported dataset turns a row
into a prompt (and, for some, a reference completion whose token count is the output length);
the rows are taken in order until ``--num-prompts`` are kept, then topped up as upstream's
``maybe_oversample_requests`` does. The ``datasets`` library is the ``[hf]`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loadgen.dataset_sharegpt import is_valid_sequence
from loadgen.sampled_prompts import SampledPrompts, top_up
from loadgen.tokenizer import TokenCodec

CODE_ONLY = " Just output the code, do not include any explanation."


@dataclass(frozen=True)
class HFDataset:
    """How upstream samples one family of hub datasets."""

    paths: tuple[str, ...]
    prompt: Callable[[dict[str, Any]], str]  # a row's user message
    split: str | None = None  # the default --hf-split
    subset: str | None = None  # the default --hf-subset
    output_len: int | None = None  # the default --hf-output-len; None: the completion's length
    completion: str | None = None  # the field whose token count is the output length
    templated: bool = True  # rendered with the chat template unless --skip-chat-template
    row_filter: Callable[[dict[str, Any]], bool] | None = None
    max_prompt_len: int = 1024  # the length filter of completion-sized requests
    max_total_len: int = 2048


SUPPORTED = (
    HFDataset(
        paths=("likaixin/InstructCoder",),
        prompt=lambda row: f"{row['input']}\n\n{row['instruction']}{CODE_ONLY}",
        split="train",
        output_len=200,
    ),
    HFDataset(
        paths=("philschmid/mt-bench",),
        prompt=lambda row: row["turns"][0],
        split="train",
        output_len=256,
    ),
    HFDataset(
        paths=("openai/openai_humaneval",),
        prompt=lambda row: row["prompt"],
        split="test",
        output_len=256,
    ),
    HFDataset(
        paths=("openai/gsm8k",),
        prompt=lambda row: row["question"],
        split="test",
        subset="main",
        output_len=256,
    ),
    HFDataset(
        paths=("Aeala/ShareGPT_Vicuna_unfiltered",),
        prompt=lambda row: row["conversations"][0]["value"],
        completion="conversations",
        templated=False,
        row_filter=lambda row: len(row["conversations"]) >= 2,
    ),
    HFDataset(
        paths=("AI-MO/aimo-validation-aime", "AI-MO/NuminaMath-1.5", "AI-MO/NuminaMath-CoT"),
        prompt=lambda row: row["problem"],
        split="train",
        completion="solution",
        templated=False,
        max_prompt_len=2048,
        max_total_len=32000,
    ),
)


def find_hf_dataset(dataset_path: str, hf_name: str | None) -> HFDataset:
    """The supported dataset ``--dataset-path`` (or ``--hf-name``) names; ValueError if none."""
    for family in SUPPORTED:
        if dataset_path in family.paths or hf_name in family.paths:
            return family
    names = ", ".join(sorted(p for family in SUPPORTED for p in family.paths))
    raise ValueError(
        f"not supported yet: --dataset-name hf with {hf_name or dataset_path} "
        f"(built so far: {names}; a local copy needs --hf-name)"
    )


def load_hf_rows(
    dataset_path: str,
    family: HFDataset,
    subset: str | None,
    split: str | None,
    streaming: bool,
    seed: int,
    disable_shuffle: bool,
) -> Iterable[dict[str, Any]]:
    """The rows in upstream's order: ``load_dataset``, ``shuffle(seed)``, then the filter."""
    from datasets import load_dataset  # the [hf] extra

    data = load_dataset(
        dataset_path,
        name=subset if subset is not None else family.subset,
        split=split if split is not None else family.split,
        streaming=streaming,
    )
    if not disable_shuffle:
        data = data.shuffle(seed=seed)
    # Upstream filters the shuffled rows, which keeps the shuffle's order.
    return data.filter(family.row_filter) if family.row_filter is not None else data


def sample_hf_requests(
    rows: Iterable[dict[str, Any]],
    family: HFDataset,
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int | None,
    seed: int,
    template: Callable[[str], str] | None,
    no_oversample: bool = False,
) -> SampledPrompts:
    """Take rows in order until ``num_requests`` are kept (see the module docstring)."""
    specials = tokenizer.num_special_tokens
    fixed = output_len if output_len is not None else family.output_len
    prompts: list[str] = []
    lens: list[int] = []
    outputs: list[int] = []
    for row in rows:
        if len(prompts) >= num_requests:
            break
        prompt = family.prompt(row)
        if template is not None and family.templated:
            prompt = template(prompt)
        if fixed is not None:
            prompt_len = len(tokenizer.encode_batch([prompt])[0]) + specials
            wanted = fixed
        else:
            completion = row[family.completion] if family.completion else ""
            if family.completion == "conversations":
                completion = completion[1]["value"]
            prompt_ids, completion_ids = tokenizer.encode_batch([prompt, completion])
            prompt_len, wanted = len(prompt_ids) + specials, len(completion_ids) + specials
            if not is_valid_sequence(
                prompt_len, wanted, False, family.max_prompt_len, family.max_total_len
            ):
                continue
        prompts.append(prompt)
        lens.append(prompt_len)
        outputs.append(wanted)
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    return SampledPrompts.of(prompts, lens, outputs)
