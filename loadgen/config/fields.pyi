# Generated from the flag table by `python -m loadgen.config.type_stub`: do not edit.
"""RunConfig's fields as plain attributes (fields.py): RunConfigBase's base."""

import typing

class RunConfigFields:
    backend: str
    base_url: str | None
    host: str
    port: int
    endpoint: str
    insecure: bool
    headers: dict[str, str]
    model: str | None
    served_model_name: str | None
    tokenizer: str | None
    tokenizer_mode: str
    trust_remote_code: bool
    skip_tokenizer_init: bool
    dataset_name: str
    dataset_path: str | None
    disable_shuffle: bool
    no_oversample: bool
    skip_chat_template: bool
    no_stream: bool
    self_timed: bool | None
    chat_template_kwargs: dict[str, typing.Any] | None
    input_len: int | None
    output_len: int | None
    enable_multimodal_chat: bool
    num_prompts: int
    seed: int
    request_rate: float | tuple[float, ...]
    burstiness: float
    max_concurrency: int | tuple[int, ...] | None
    ramp_up_strategy: str | None
    ramp_up_start_rps: int | None
    ramp_up_end_rps: int | None
    ignore_eos: bool
    logprobs: int | None
    use_beam_search: bool
    extra_body: dict[str, typing.Any] | None
    request_id_prefix: str | None
    goodput: dict[str, float] | None
    lora_modules: list[str] | None
    lora_assignment: str
    profile: bool
    save_result: bool
    append_result: bool
    save_records: bool | None
    label: str | None
    metadata: dict[str, str] | None
    save_detailed: bool
    result_dir: str | None
    result_filename: str | None
    probe_request_rate: float
    plot_timeline: bool
    timeline_itl_thresholds: str
    plot_dataset_stats: bool
    disable_tqdm: bool
    percentile_metrics: str | None
    metric_percentiles: str
    ready_check_timeout_sec: int
    ready_check_interval_sec: float
    server_tokenizer_timeout_sec: float
    num_warmups: int
    workers: int
    listen: tuple[str, int] | None
    remote_workers: int
    key: str | None
    ray: str | None
    workers_per_node: int | None
    multi_turn: bool
    multi_turn_num_turns: int
    multi_turn_min_turns: int
    multi_turn_max_turns: int
    multi_turn_concurrency: int | None
    multi_turn_delay_ms: float
    multi_turn_delay_distribution: str
    per_turn_input_len: int
    dry_run: bool
    max_model_len: int | None
    prompt_token_ids: bool
    request_timeout: float | None
    idle_timeout: float
    connect_timeout: float
    fail_fast: bool
    dataset_cache: bool
    fail_on: tuple[str, ...]
    mock: bool
    mock_ttft_ms: float
    mock_itl_ms: float
    mock_prefill_us_per_token: float
    num_runs: int
    steady_state: bool
    quiet: bool
    custom_output_len: int
    custom_ensure_client_side_data: bool
    spec_bench_output_len: int
    spec_bench_category: str | None
    sonnet_input_len: int
    sonnet_output_len: int
    sonnet_prefix_len: int
    sharegpt_output_len: int | None
    timed_trace_chunk_hash_size: int
    timed_trace_sec_multiplier: float
    timed_trace_label_timestamp: str
    timed_trace_label_input_length: str
    timed_trace_label_output_length: str
    timed_trace_label_hash_ids: str
    random_input_len: int
    random_output_len: int
    random_range_ratio: str
    random_prefix_len: int
    random_batch_size: int
    no_reranker: bool
    random_mm_base_items_per_request: int
    random_mm_num_mm_items_range_ratio: float
    random_mm_limit_mm_per_prompt: str
    random_mm_bucket_config: str
    blazedit_min_distance: float
    blazedit_max_distance: float
    asr_max_audio_len_sec: float
    asr_min_audio_len_sec: float
    hf_subset: str | None
    hf_split: str | None
    hf_name: str | None
    hf_output_len: int | None
    bfcl_categories: list[str] | None
    prefix_repetition_prefix_len: int
    prefix_repetition_suffix_len: int
    prefix_repetition_num_prefixes: int
    prefix_repetition_output_len: int
    speed_bench_dataset_subset: str
    speed_bench_output_len: int
    speed_bench_category: str | None
    top_p: float | None
    top_k: int | None
    min_p: float | None
    temperature: float | None
    frequency_penalty: float | None
    presence_penalty: float | None
    repetition_penalty: float | None
    given: frozenset[str]
