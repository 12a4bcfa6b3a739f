"""vLLM's ``hf`` datasets: text datasets from the Hugging Face hub, sampled as upstream does.

(The ASR, BFCL and multimodal ones are read and sampled by hf_asr.py, bfcl.py and
hf_multimodal.py.)

``--dataset-path`` is a hub id (or a local copy named by ``--hf-name``); the dataset is loaded
with the ``datasets`` library exactly as upstream loads it (``load_dataset(path,
name=--hf-subset, split=--hf-split, streaming=not --no-stream)``, then ``shuffle(seed)`` unless
``--disable-shuffle``), so the rows come in upstream's order. Each supported dataset turns a row
into a prompt (and, for some, a reference completion whose token count is the output length);
the rows are taken in order until ``--num-prompts`` are kept, then topped up as upstream's
``maybe_oversample_requests`` does. The ``datasets`` library is the ``[hf]`` extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from loadgen.datasets.bfcl import BFCL_OUTPUT_LEN, BFCL_PATH, load_bfcl, sample_bfcl_requests
from loadgen.datasets.errors import flag_errors
from loadgen.datasets.hf_asr import ASR_OUTPUT_LEN, ASR_PATHS, load_asr_rows, sample_asr_requests
from loadgen.datasets.hf_multimodal import (
    IMAGE_PATHS,
    LLAVA_PATHS,
    MM_OUTPUT_LEN,
    MM_SPLITS,
    MMSTAR_PATHS,
    MMVU_PATHS,
    MULTIMODAL_PATHS,
    VISION_ARENA_PATHS,
    mmvu_root,
    multimodal_backend_problem,
    sample_mm_requests,
)
from loadgen.datasets.sampled_prompts import SampledPrompts, top_up
from loadgen.datasets.sharegpt import is_valid_sequence
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec

CODE_ONLY = " Just output the code, do not include any explanation."


BLAZEDIT_PROMPT = (  # the Blazedit authors' prompt, as upstream sends it
    "Given a code file, please apply the change requests and generate the new file.\n\n"
    "Original file:\n```python\n{code}\n```\n\nChange request:\n{change_request}\n\n"
    'Please generate the new code file in the "New file" section below.'
)
ZETA_PROMPT = (  # Zed's next-edit prompt, as upstream sends it
    "### Instruction:\nYou are a code completion assistant and your task is to analyze user "
    "edits and then rewrite an excerpt that the user provides, suggesting the appropriate edits "
    "within the excerpt, taking into account the cursor location.\n\n### User Edits:\n\n{}"
    "\n\n### User Excerpt:\n\n{}\n\n### Response:\n\n"
)


@dataclass(frozen=True)
class HFDataset:
    """How upstream samples one family of hub datasets.

    The output length is ``output_len`` (--hf-output-len overrides it) or, where it is None,
    the token count of the row's ``completion``: with special tokens (``completion_specials``)
    or without, and kept only within the length limits unless --hf-output-len is given
    (``filter_fixed``: always).
    """

    paths: tuple[str, ...]
    prompt: Callable[[dict[str, Any]], str | list[dict[str, str]]]  # text, or chat messages
    split: str | None = None  # the default --hf-split
    subset: str | None = None  # the default --hf-subset
    reads_subset: bool = True  # False: --hf-subset is not passed on (upstream clears it)
    output_len: int | None = None  # the default --hf-output-len
    completion: Callable[[dict[str, Any]], str] | None = None
    completion_specials: bool = True
    templated: str = "unless skipped"  # "unless skipped" (--skip-chat-template), "never", "always"
    row_filter: Callable[[dict[str, Any]], bool] | None = None
    length_limits: tuple[int, int] | None = (1024, 2048)  # max prompt, max total; None: none
    filter_fixed: bool = False
    fixed_ignored: bool = False  # the output length is always the completion's (Zeta)
    edit_distance: bool = False  # rows outside --blazedit-min/max-distance are skipped


def _zeta_expected(row: dict[str, Any]) -> str:
    output = row["output"]
    return output[output.find("<|editable_region_start|>") :]


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
        paths=("vdaita/edit_5k_char", "vdaita/edit_10k_char"),
        prompt=lambda row: BLAZEDIT_PROMPT.format(
            code=row["code"], change_request=row["change_request"]
        ),
        split="train",
        output_len=4000,
        edit_distance=True,
    ),
    HFDataset(
        paths=("Aeala/ShareGPT_Vicuna_unfiltered",),
        prompt=lambda row: row["conversations"][0]["value"],
        completion=lambda row: row["conversations"][1]["value"],
        templated="never",
        row_filter=lambda row: len(row["conversations"]) >= 2,
    ),
    HFDataset(
        paths=("AI-MO/aimo-validation-aime", "AI-MO/NuminaMath-1.5", "AI-MO/NuminaMath-CoT"),
        prompt=lambda row: row["problem"],
        split="train",
        completion=lambda row: row["solution"],
        templated="never",
        length_limits=(2048, 32000),
    ),
    HFDataset(
        paths=("zed-industries/zeta",),
        prompt=lambda row: ZETA_PROMPT.format(row["events"], row["input"]),
        split="train",
        completion=_zeta_expected,
        templated="never",
        length_limits=None,
        fixed_ignored=True,
    ),
    HFDataset(
        paths=("mgoin/mlperf-inference-llama2-data", "mgoin/mlperf-inference-llama3.1-data"),
        prompt=lambda row: [
            {"role": "system", "content": row["system_prompt"]},
            {"role": "user", "content": row["question"]},
        ],
        split="train",
        completion=lambda row: row["output"],
        completion_specials=False,
        templated="always",
        filter_fixed=True,
    ),
    HFDataset(  # read and sampled by loadgen/datasets/bfcl.py; templated to count its tools
        paths=(BFCL_PATH,),
        prompt=lambda row: row["question"][0],
        output_len=BFCL_OUTPUT_LEN,
        templated="always",
    ),
    HFDataset(  # read and sampled by loadgen/datasets/hf_asr.py; the prompt is not sent
        paths=ASR_PATHS,
        prompt=lambda row: "",
        output_len=ASR_OUTPUT_LEN,
        templated="never",
    ),
    # Sampled by loadgen/datasets/hf_multimodal.py, never templated, as upstream. LLaVA-OneVision
    # has no default split (--hf-split names it) and keeps the rows with two turns or more.
    HFDataset(
        paths=LLAVA_PATHS,
        prompt=lambda row: "",
        output_len=None,
        templated="never",
        row_filter=lambda row: len(row["conversations"]) >= 2,
    ),
    *(
        HFDataset(
            paths=paths,
            prompt=lambda row: "",
            split=MM_SPLITS[paths[0]],
            reads_subset=False,
            output_len=MM_OUTPUT_LEN,
            templated="never",
        )
        for paths in (VISION_ARENA_PATHS, MMSTAR_PATHS, MMVU_PATHS)
    ),
)


def find_hf_dataset(dataset_path: str, hf_name: str | None) -> HFDataset:
    """The supported dataset ``--dataset-path`` (or ``--hf-name``) names; ValueError if none."""
    for family in SUPPORTED:
        if dataset_path in family.paths or hf_name in family.paths:
            return family
    names = ", ".join(sorted(p for family in SUPPORTED for p in family.paths))
    raise ValueError(
        f"Unsupported dataset path: {hf_name or dataset_path}. --dataset-name hf reads one of: "
        f"{names} (a local copy's directory with --hf-name naming one)"
    )


def check_hf(
    backend: str, dataset_path: str, hf_name: str | None, hf_output_len: int | None
) -> None:
    """Refuse (ValueError) a hub dataset loadgen does not build, a backend it cannot be sent
    with, an output length below 1, and a missing library (datasets; pillow for images)."""
    paths = find_hf_dataset(dataset_path, hf_name).paths
    if BFCL_PATH in paths:
        if backend != "openai-chat":
            raise ValueError(
                "BFCL dataset requires the 'openai-chat' backend because it sends "
                f"per-request tool schemas via chat completions; got --backend {backend}"
            )
    elif importlib.util.find_spec("datasets") is None:
        raise ValueError("--dataset-name hf needs the datasets library: pip install 'loadgen[hf]'")
    if hf_output_len is not None and hf_output_len < 1:
        raise ValueError(f"--hf-output-len must be >= 1, got {hf_output_len}")
    if problem := multimodal_backend_problem(backend, paths):
        raise ValueError(problem)
    if paths[0] in IMAGE_PATHS and importlib.util.find_spec("PIL") is None:
        raise ValueError("the hf image datasets need pillow: pip install 'loadgen[mm]'")


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
        name=subset if subset is not None and family.reads_subset else family.subset,
        split=split if split is not None else family.split,
        streaming=streaming,
    )
    if isinstance(data, dict):  # no split given and none by default: every split, by name
        raise ValueError(f"name the split with --hf-split (this copy has: {', '.join(data)})")
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
    template: ChatTemplate | None,
    no_oversample: bool = False,
    distance_range: tuple[float, float] = (0.0, 1.0),
) -> SampledPrompts:
    """Take rows in order until ``num_requests`` are kept (see the module docstring).
    ``template`` is the chat template, None with --skip-chat-template; ``distance_range`` the
    Blazedit rows kept (--blazedit-min-distance, --blazedit-max-distance)."""
    specials = tokenizer.num_special_tokens
    fixed = None if family.fixed_ignored else output_len
    fixed = fixed if fixed is not None else family.output_len
    low, high = distance_range
    prompts: list[str] = []
    lens: list[int] = []
    outputs: list[int] = []
    for row in rows:
        if len(prompts) >= num_requests:
            break
        if family.edit_distance and not low <= row["norm_distance"] <= high:
            continue
        prompt = _render(family, family.prompt(row), template)
        prompt_len = len(tokenizer.encode_batch([prompt])[0]) + specials
        wanted = fixed
        if wanted is None:
            assert family.completion is not None
            completion = tokenizer.encode_batch([family.completion(row)])[0]
            wanted = len(completion) + (specials if family.completion_specials else 0)
        limits = family.length_limits if fixed is None or family.filter_fixed else None
        if limits is not None and not is_valid_sequence(prompt_len, wanted, False, *limits):
            continue
        prompts.append(prompt)
        lens.append(prompt_len)
        outputs.append(wanted)
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    return SampledPrompts.of(prompts, lens, outputs)


def load_hf(
    path: str,
    hf_name: str | None,
    hf_subset: str | None,
    hf_split: str | None,
    no_stream: bool,
    seed: int,
    disable_shuffle: bool,
    bfcl_categories: list[str] | None,
) -> Iterable[dict[str, Any]]:
    """The rows of the hub dataset --dataset-path (or --hf-name) names, in upstream's order."""
    with flag_errors():
        family = find_hf_dataset(path, hf_name)
    if BFCL_PATH in family.paths:
        return load_bfcl(path, bfcl_categories, seed, disable_shuffle)
    with _hub_errors(path):
        if family.paths == ASR_PATHS:
            streaming, shuffle = not no_stream, not disable_shuffle
            return load_asr_rows(path, hf_subset, hf_split, streaming, seed, shuffle)
        return load_hf_rows(path, family, hf_subset, hf_split, not no_stream, seed, disable_shuffle)


def sample_hf(
    rows: Iterable[dict[str, Any]],
    path: str,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None,
    hf_name: str | None,
    num_prompts: int,
    hf_output_len: int | None,
    seed: int,
    no_oversample: bool,
    blazedit_min_distance: float,
    blazedit_max_distance: float,
    asr_min_audio_len_sec: float,
    asr_max_audio_len_sec: float,
) -> SampledPrompts:
    """The ``hf`` dataset from its rows and flags; ``chat_template`` without
    --chat-template-kwargs, as upstream."""
    with flag_errors():
        family = find_hf_dataset(path, hf_name)
    if BFCL_PATH in family.paths:
        with _hub_errors(path):
            return sample_bfcl_requests(
                list(rows), tokenizer, chat_template, num_prompts, hf_output_len, seed,
                no_oversample,
            )  # fmt: skip
    if family.paths == ASR_PATHS:
        with _hub_errors(path):
            return sample_asr_requests(
                rows, tokenizer, num_prompts, hf_output_len, seed, no_oversample,
                asr_min_audio_len_sec, asr_max_audio_len_sec,
            )  # fmt: skip
    if family.paths[0] in MULTIMODAL_PATHS:
        with _hub_errors(path):
            hub_id = hf_name or path
            root = mmvu_root(path, hub_id) if family.paths == MMVU_PATHS else None
            return sample_mm_requests(
                rows, hub_id, tokenizer, num_prompts, hf_output_len, seed, no_oversample, root
            )
    with _hub_errors(path):
        return sample_hf_requests(
            rows,
            family,
            tokenizer,
            num_prompts,
            hf_output_len,
            seed,
            chat_template,
            no_oversample,
            (blazedit_min_distance, blazedit_max_distance),
        )


@contextmanager
def _hub_errors(path: str) -> Iterator[None]:
    """The hub's and the rows' errors (a streamed dataset loads as it is read) as one line
    naming the path."""
    try:
        yield
    except (OSError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"--dataset-path {path}: {first}") from None


def _render(
    family: HFDataset, prompt: str | list[dict[str, str]], template: ChatTemplate | None
) -> str:
    """The prompt as sent: templated as upstream templates this dataset, or as written."""
    if isinstance(prompt, list):  # chat messages: always templated (MLPerf)
        if template is None:
            raise ValueError("this dataset's prompts need the tokenizer's chat template")
        return template.render(prompt)
    if family.templated == "never" or template is None:
        return prompt
    return template.render_user_prompt(prompt)
