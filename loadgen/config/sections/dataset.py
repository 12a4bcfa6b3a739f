"""`loadgen run`'s dataset section: which prompts are built and how (--dataset-name, its path,
and each dataset's own flags in upstream's help groups).

Over 400 lines because it is the table of every dataset flag, each with its help text.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadgen.config.flag_terms import (
    ASR,
    AT_LEAST,
    BFCL,
    BLAZEDIT,
    CUSTOM,
    FILE_DATASETS,
    HF,
    LOADGEN,
    OUTPUT_LEN_TARGETS,
    PREFIX_REPETITION,
    RANDOM,
    RANDOM_MM,
    SHAREGPT,
    SONNET,
    SPEC_BENCH,
    SPEED_BENCH,
    TIMED_TRACE,
)
from loadgen.config.parsers import parse_comma_list, parse_json_object
from loadgen.config.upstream import UPSTREAM_DATASETS
from loadgen.datasets.registry import SPEED_BENCH_SUBSETS, names, parse_range_ratio
from loadgen.flag import flag, flag_name


@dataclasses.dataclass(frozen=True, kw_only=True)
class Dataset:
    """The dataset: its name and source, its lengths, and each dataset's own options."""

    # --- the dataset ---
    dataset_name: str = flag(
        "--dataset-name",
        default="random",
        choices=UPSTREAM_DATASETS,
        help="Where the prompts come from: random (synthetic token ids, the default), "
        "sharegpt, custom (a JSONL file), hf (a Hugging Face dataset) and every other of "
        "upstream's (docs/compat.md, a section each).",
    )
    dataset_path: str | None = flag(
        "--dataset-path",
        help="custom: a .jsonl file of prompts; sharegpt: the ShareGPT JSON file; spec_bench: "
        "Spec-Bench's question.jsonl; speed_bench: the directory of SPEED-Bench's subsets (or "
        "one subset's .jsonl); burstgpt: the BurstGPT CSV; hf: a hub id or a local copy; "
        "timed_trace: a JSONL trace; sonnet: a text of poem lines.",
    )
    disable_shuffle: bool = flag(
        "--disable-shuffle",
        bool,
        False,
        readers=("prefix_repetition", *FILE_DATASETS),
        help="custom, sharegpt: keep the file's order (no seeded shuffle).",
    )
    no_oversample: bool = flag(
        "--no-oversample",
        bool,
        False,
        readers=FILE_DATASETS,
        help="custom, sharegpt: send only the file's prompts when it has fewer than --num-prompts.",
    )
    skip_chat_template: bool = flag(
        "--skip-chat-template",
        bool,
        False,
        readers=("custom", "speed_bench", "hf"),  # templated "unless skipped" (a test checks)
        help="custom: send prompts as written, without the tokenizer's chat template.",
    )
    no_stream: bool = flag(
        "--no-stream",
        bool,
        False,
        readers=("hf",),
        help="hf: download the whole dataset instead of streaming it.",
    )
    self_timed: bool | None = flag(
        "--self-timed",
        bool,
        secondary="--no-self-timed",  # default None: on for timed_trace, as upstream
        help="timed_trace: send at the trace's timestamps (the default) or at --request-rate.",
    )
    chat_template_kwargs: dict[str, Any] | None = flag(
        "--chat-template-kwargs",
        parse=parse_json_object,
        readers=("custom", "speed_bench"),  # and only templated: validation.py says when not
        help="JSON object passed to the chat template (custom), e.g. '{\"thinking\": true}'.",
    )
    input_len: int | None = flag(
        "--input-len", int, sets=("random_input_len",), help="Sets --random-input-len."
    )
    output_len: int | None = flag(
        "--output-len",
        int,
        sets=OUTPUT_LEN_TARGETS,
        help="Sets the output length of every dataset ("
        + ", ".join(map(flag_name, OUTPUT_LEN_TARGETS))
        + ").",
    )
    enable_multimodal_chat: bool = flag(
        "--enable-multimodal-chat",
        bool,
        False,
        readers=("random-mm", "custom_image", "custom_audio"),
        help="random-mm: build the chat message with the images in the dataset (the same "
        "message is sent either way); custom_audio: send the audio in a chat message "
        "(input_audio), for --backend openai-chat.",
    )
    # --- a context filter and token ids (the Rust client's extras), the dataset cache ---
    max_model_len: int | None = flag(
        "--max-model-len",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        help="Drop prompts whose prompt_len + output_len is above this before the schedule "
        "is made (one line gives the count; none left exits 1).",
    )
    prompt_token_ids: bool = flag(
        "--prompt-token-ids",
        bool,
        False,
        group=LOADGEN,
        readers=("random",),
        help="random, with a completions backend (openai, vllm): send each prompt as its token "
        "ids, as built (no decode, exact lengths, no server-side alignment).",
    )
    dataset_cache: bool = flag(
        "--dataset-cache",
        bool,
        True,
        secondary="--no-dataset-cache",
        group=LOADGEN,
        readers=names(lambda dataset: dataset.cached),
        help="Keep random, random-rerank and prefix_repetition datasets built with a local "
        "tokenizer in $XDG_CACHE_HOME/loadgen/datasets (~/.cache/...), keyed by the tokenizer, "
        "the dataset's flags and --seed, and read them back when a run asks for the same one.",
    )
    # --- dataset groups, in upstream's order ---
    custom_output_len: int = flag(
        "--custom-output-len",
        int,
        256,
        group=CUSTOM,
        readers=("custom", "custom_image", "custom_audio"),
        help="custom: max_tokens per request; -1 takes each line's output_tokens.",
    )
    custom_ensure_client_side_data: bool = flag(
        "--custom-ensure-client-side-data",
        bool,
        False,
        group=CUSTOM,
        readers=("custom_image",),
        help="custom_image: read local and HTTP(S) images here and send them inline (PNG data "
        "URLs).",
    )
    spec_bench_output_len: int = flag(
        "--spec-bench-output-len",
        int,
        256,
        group=SPEC_BENCH,
        readers=("spec_bench",),
        help="spec_bench: max_tokens of every request.",
    )
    spec_bench_category: str | None = flag(
        "--spec-bench-category",
        group=SPEC_BENCH,
        readers=("spec_bench",),
        help="spec_bench: only the questions of this category (default: all).",
    )
    sonnet_input_len: int = flag(
        "--sonnet-input-len",
        int,
        550,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: most tokens of a templated prompt.",
    )
    sonnet_output_len: int = flag(
        "--sonnet-output-len",
        int,
        150,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: max_tokens of every request.",
    )
    sonnet_prefix_len: int = flag(
        "--sonnet-prefix-len",
        int,
        200,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: tokens of the poem's first lines every prompt starts with.",
    )
    sharegpt_output_len: int | None = flag(
        "--sharegpt-output-len",
        int,
        minimum=1,
        range_words=AT_LEAST,
        group=SHAREGPT,
        readers=("sharegpt",),
        help="sharegpt: max_tokens per request instead of each completion's token count.",
    )
    timed_trace_chunk_hash_size: int = flag(
        "--timed-trace-chunk-hash-size",
        int,
        16,
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: prompt tokens each hash id stands for.",
    )
    timed_trace_sec_multiplier: float = flag(
        "--timed-trace-sec-multiplier",
        float,
        1.0,
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: multiplies the timestamps into seconds (0.001 for milliseconds).",
    )
    timed_trace_label_timestamp: str = flag(
        "--timed-trace-label-timestamp",
        default="timestamp",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's timestamp.",
    )
    timed_trace_label_input_length: str = flag(
        "--timed-trace-label-input-length",
        default="input_length",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's input length.",
    )
    timed_trace_label_output_length: str = flag(
        "--timed-trace-label-output-length",
        default="output_length",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's output length.",
    )
    timed_trace_label_hash_ids: str = flag(
        "--timed-trace-label-hash-ids",
        default="hash_ids",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's prompt hash ids.",
    )
    random_input_len: int = flag("--random-input-len", int, 1024, group=RANDOM)
    random_output_len: int = flag("--random-output-len", int, 128, group=RANDOM)
    random_range_ratio: str = flag(
        "--random-range-ratio",
        default="0.0",
        check=parse_range_ratio,
        group=RANDOM,
        help='A ratio r in [0, 1), or JSON {"input": r1, "output": r2}.',
    )
    random_prefix_len: int = flag("--random-prefix-len", int, 0, group=RANDOM)
    random_batch_size: int = flag(
        "--random-batch-size",
        int,
        1,
        minimum=1,
        range_words=AT_LEAST,
        group=RANDOM,
        readers=("random", "random-rerank"),
        help="random, random-rerank: texts per request (pooling backends only).",
    )
    no_reranker: bool = flag(
        "--no-reranker",
        bool,
        False,
        group=RANDOM,
        readers=("random-rerank",),
        help="random-rerank: the model scores by embeddings, not as a native reranker.",
    )
    random_mm_base_items_per_request: int = flag(
        "--random-mm-base-items-per-request",
        int,
        1,
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: images per request, before the range ratio.",
    )
    random_mm_num_mm_items_range_ratio: float = flag(
        "--random-mm-num-mm-items-range-ratio",
        float,
        0.0,
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: r in [0, 1]; images per request from [floor(n(1-r)), ceil(n(1+r))].",
    )
    random_mm_limit_mm_per_prompt: str = flag(
        "--random-mm-limit-mm-per-prompt",
        default='{"image": 255, "video": 1}',
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: JSON caps per modality.",
    )
    random_mm_bucket_config: str = flag(
        "--random-mm-bucket-config",
        default="{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}",
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: {(height, width, frames): probability}; frames > 1 is an MP4 video.",
    )
    blazedit_min_distance: float = flag(
        "--blazedit-min-distance",
        float,
        0.0,
        group=BLAZEDIT,
        readers=("hf",),
        help="hf Blazedit: skip rows whose normalized edit distance is below this.",
    )
    blazedit_max_distance: float = flag(
        "--blazedit-max-distance",
        float,
        1.0,
        group=BLAZEDIT,
        readers=("hf",),
        help="hf Blazedit: skip rows whose normalized edit distance is above this.",
    )
    asr_max_audio_len_sec: float = flag(
        "--asr-max-audio-len-sec",
        float,
        float("inf"),
        group=ASR,
        readers=("hf",),
        help="hf ASR: skip clips longer than this many seconds.",
    )
    asr_min_audio_len_sec: float = flag(
        "--asr-min-audio-len-sec",
        float,
        0.0,
        group=ASR,
        readers=("hf",),
        help="hf ASR: skip clips shorter than this many seconds.",
    )
    hf_subset: str | None = flag(
        "--hf-subset", group=HF, readers=("hf",), help="hf: the subset (config) name."
    )
    hf_split: str | None = flag(
        "--hf-split", group=HF, readers=("hf",), help="hf: the split (default: the dataset's)."
    )
    hf_name: str | None = flag(
        "--hf-name", group=HF, readers=("hf",), help="hf: the hub id a local copy stands for."
    )
    hf_output_len: int | None = flag(
        "--hf-output-len",
        int,
        group=HF,
        readers=("hf",),
        help="hf: max_tokens of every request (default: the dataset's).",
    )
    bfcl_categories: list[str] | None = flag(
        "--bfcl-categories",
        group=BFCL,
        readers=("hf",),
        parse=parse_comma_list,
        help="hf BFCL: comma-separated BFCL v3 categories (default: simple,live_simple,multiple).",
    )
    prefix_repetition_prefix_len: int = flag(
        "--prefix-repetition-prefix-len",
        int,
        256,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: tokens of each shared prefix.",
    )
    prefix_repetition_suffix_len: int = flag(
        "--prefix-repetition-suffix-len",
        int,
        256,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: tokens after the prefix, different in every prompt.",
    )
    prefix_repetition_num_prefixes: int = flag(
        "--prefix-repetition-num-prefixes",
        int,
        10,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: prefixes, each shared by --num-prompts // this many prompts.",
    )
    prefix_repetition_output_len: int = flag(
        "--prefix-repetition-output-len",
        int,
        128,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: max_tokens of every request.",
    )
    speed_bench_dataset_subset: str = flag(
        "--speed-bench-dataset-subset",
        default="qualitative",
        choices=SPEED_BENCH_SUBSETS,
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: the subset, {subset}.jsonl in the --dataset-path directory.",
    )
    speed_bench_output_len: int = flag(
        "--speed-bench-output-len",
        int,
        4096,
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: max_tokens of every request.",
    )
    speed_bench_category: str | None = flag(
        "--speed-bench-category",
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: only the prompts of this category (default: all).",
    )
