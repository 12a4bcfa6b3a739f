"""Build the dataset the flags ask for: which sampler, with which of the flags (blocking; the
runner calls it in a thread while the server is waited for)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from loadgen.chat_template import ChatTemplate
from loadgen.config import SYNTHETIC_DATASETS, ConfigError, RunConfig
from loadgen.dataset_custom import load_custom_rows, load_spec_bench_rows, sample_custom_requests
from loadgen.dataset_custom_image import load_custom_image_rows, sample_custom_image_requests
from loadgen.dataset_hf import load_hf_rows, sample_hf_requests
from loadgen.dataset_prefix_repetition import sample_prefix_repetition_requests
from loadgen.dataset_random import (
    batch_prompts,
    parse_range_ratio,
    sample_random_requests,
    sample_random_rerank_requests,
)
from loadgen.dataset_random_mm import (
    parse_bucket_config,
    parse_limits,
    sample_random_mm_requests,
)
from loadgen.dataset_sharegpt import load_sharegpt_entries, sample_sharegpt_requests
from loadgen.dataset_sonnet import load_sonnet_lines, sample_sonnet_requests
from loadgen.dataset_timed_trace import load_trace, sample_timed_trace_requests
from loadgen.payloads import CHAT_BACKENDS
from loadgen.sampled_prompts import SampledPrompts
from loadgen.tokenizer import TokenCodec


def sample_dataset(
    config: RunConfig, tokenizer: TokenCodec, chat_template: ChatTemplate | None = None
) -> SampledPrompts:
    """Read (for a file dataset) and sample the configured dataset, templating its prompts when
    ``chat_template`` is given; blocking, run in a thread.

    Raises ConfigError for a random dataset the flags cannot build, and ValueError naming the
    file for a file dataset whose contents cannot be used.
    """
    if config.dataset_name in SYNTHETIC_DATASETS:
        random_text = {
            "tokenizer": tokenizer,
            "num_requests": config.num_prompts,
            "input_len": config.random_input_len,
            "output_len": config.random_output_len,
            "prefix_len": config.random_prefix_len,
            "range_ratio": parse_range_ratio(config.random_range_ratio),
            "seed": config.seed,
        }
        try:
            if config.dataset_name == "random-mm":
                return sample_random_mm_requests(
                    **random_text,
                    base_items=config.random_mm_base_items_per_request,
                    items_ratio=config.random_mm_num_mm_items_range_ratio,
                    limits=parse_limits(config.random_mm_limit_mm_per_prompt),
                    buckets=parse_bucket_config(config.random_mm_bucket_config),
                )
            if config.dataset_name == "prefix_repetition":
                return sample_prefix_repetition_requests(
                    tokenizer,
                    config.num_prompts,
                    config.prefix_repetition_prefix_len,
                    config.prefix_repetition_suffix_len,
                    config.prefix_repetition_num_prefixes,
                    config.prefix_repetition_output_len,
                    config.seed,
                    config.disable_shuffle,
                )
            if config.dataset_name == "random-rerank":
                return sample_random_rerank_requests(
                    tokenizer,
                    config.num_prompts,
                    config.random_input_len,
                    random_text["range_ratio"][0],
                    config.random_batch_size,
                    not config.no_reranker,
                    config.seed,
                )
            sampled = sample_random_requests(**random_text)
            return batch_prompts(sampled, config.random_batch_size)
        except ValueError as exc:  # the random datasets' checks name the flag at fault
            raise ConfigError(str(exc)) from None
    path = config.dataset_path
    assert path is not None  # validate() checked
    if config.dataset_name == "timed_trace":
        return _sample_timed_trace(config, path, tokenizer)
    if config.dataset_name == "hf":
        return _sample_hf(config, path, tokenizer, chat_template)
    if config.dataset_name == "custom_image":
        rows = load_custom_image_rows(path)
        try:
            return sample_custom_image_requests(
                rows,
                tokenizer,
                config.num_prompts,
                config.custom_output_len,
                config.seed,
                config.disable_shuffle,
                config.no_oversample,
                config.custom_ensure_client_side_data,
            )
        except ValueError as exc:  # the file's contents, not a flag, are at fault
            raise ValueError(f"--dataset-path {path}: {exc}") from None
    if config.dataset_name == "sonnet":
        assert chat_template is not None  # validate() keeps sonnet from --skip-tokenizer-init
        try:
            return sample_sonnet_requests(
                load_sonnet_lines(path),
                tokenizer,
                chat_template.render_user_prompt,
                config.num_prompts,
                config.sonnet_input_len,
                config.sonnet_prefix_len,
                config.sonnet_output_len,
                config.seed,
                send_templated=config.backend not in CHAT_BACKENDS,  # the server templates chat
            )
        except ValueError as exc:
            if str(exc).startswith("--sonnet"):  # a flag's value, not the file, is at fault
                raise ConfigError(str(exc)) from None
            raise
    # The loaders' errors name the path already; the samplers' get it added.
    sharegpt = config.dataset_name == "sharegpt"
    if config.dataset_name == "spec_bench":
        entries = load_spec_bench_rows(path, config.spec_bench_category)
    else:
        entries = load_sharegpt_entries(path) if sharegpt else load_custom_rows(path)
    try:
        if sharegpt:
            return sample_sharegpt_requests(
                entries,
                tokenizer,
                config.num_prompts,
                config.sharegpt_output_len,
                config.seed,
                config.disable_shuffle,
                config.no_oversample,
            )
        spec_bench = config.dataset_name == "spec_bench"
        return sample_custom_requests(
            entries,
            tokenizer,
            config.num_prompts,
            config.spec_bench_output_len if spec_bench else config.custom_output_len,
            0 if spec_bench else config.seed,  # upstream's SpecBench gets no seed: 0
            config.disable_shuffle,
            config.no_oversample,
            # Upstream passes spec_bench no --chat-template-kwargs.
            template=_template_function(
                chat_template, None if spec_bench else config.chat_template_kwargs
            ),
        )
    except ValueError as exc:  # the file's contents, not a flag, are at fault
        raise ValueError(f"--dataset-path {path}: {exc}") from None


def _sample_timed_trace(config: RunConfig, path: str, tokenizer: TokenCodec) -> SampledPrompts:
    labels = {
        name: getattr(config, f"timed_trace_label_{name}")
        for name in ("timestamp", "input_length", "output_length", "hash_ids")
    }
    print(  # upstream's line
        f"timed-trace: chunk_size: {config.timed_trace_chunk_hash_size}, "
        f"sec_multiplier: {config.timed_trace_sec_multiplier}, "
        f'label_ts: "{labels["timestamp"]}", '
        f'label_input_length: "{labels["input_length"]}", '
        f'label_output_length: "{labels["output_length"]}", '
        f'label_hash_ids: "{labels["hash_ids"]}"'
    )
    try:
        rows = load_trace(path, config.num_prompts)
        sampled, offsets = sample_timed_trace_requests(
            rows,
            tokenizer,
            config.timed_trace_chunk_hash_size,
            config.timed_trace_sec_multiplier,
            labels,
            path,
        )
    except ValueError as exc:
        if str(exc).startswith("--timed-trace"):  # a flag's value, not the file, is at fault
            raise ConfigError(str(exc)) from None
        raise
    return dataclasses.replace(sampled, trace_offsets_s=offsets)


def _sample_hf(
    config: RunConfig, path: str, tokenizer: TokenCodec, chat_template: ChatTemplate | None
) -> SampledPrompts:
    family = config.hf_dataset()
    try:
        rows = load_hf_rows(
            path,
            family,
            config.hf_subset,
            config.hf_split,
            not config.no_stream,
            config.seed,
            config.disable_shuffle,
        )
        return sample_hf_requests(
            rows,
            family,
            tokenizer,
            config.num_prompts,
            config.hf_output_len,
            config.seed,
            chat_template,  # without --chat-template-kwargs, as upstream
            config.no_oversample,
            (config.blazedit_min_distance, config.blazedit_max_distance),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:  # the hub, or the rows' shape
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"--dataset-path {path}: {first}") from None


def _template_function(
    template: ChatTemplate | None, kwargs: dict[str, Any] | None
) -> Callable[[str], str] | None:
    if template is None:
        return None
    return lambda prompt: template.render_user_prompt(prompt, kwargs)
