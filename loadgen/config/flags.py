"""`loadgen run`'s flags: one `Flag` each, the only place one is declared.

The click options and their ``--help`` sections (loadgen/cli/), `RunConfig`'s fields
(run_config.py), the "has no effect with ..." warnings (validation.py, from ``readers`` and the
flags given) and the flag table of docs/compat.md (checked by tests/unit/test_flag_table.py)
all come from ``RUN_FLAGS``. Options appear in ``--help`` in the table's order: first those of no
group, then each group of ``HELP_GROUPS``.

Over 500 lines because it is the table of every flag (over 100), each with its help text;
split, the flags would no longer be in one table to read.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from loadgen.backends import GENERATION_BACKENDS
from loadgen.config.gates import parse_fail_on
from loadgen.config.parsers import (
    check_tokenizer_mode,
    parse_comma_list,
    parse_goodput,
    parse_headers,
    parse_json_object,
    parse_listen,
    parse_metadata,
    parse_names,
)
from loadgen.config.sweep_lists import parse_concurrency, parse_rate
from loadgen.config.upstream import UPSTREAM_BACKENDS, UPSTREAM_DATASETS
from loadgen.datasets.registry import SPEED_BENCH_SUBSETS, names, parse_range_ratio
from loadgen.flag import Flag, by_name, flag_name
from loadgen.schedule import RAMP_UP_STRATEGIES

SUPPORTED_DATASETS = names()

# The dataset fields --output-len sets (upstream's --output-len feeds each dataset's own flag).
OUTPUT_LEN_TARGETS = (
    "random_output_len",
    "custom_output_len",
    "sharegpt_output_len",
    "prefix_repetition_output_len",
    "spec_bench_output_len",
    "hf_output_len",
)


def available_cores() -> int:
    """CPU cores this process may run on (the default worker count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --help sections in upstream's order: its ungrouped options first ("Options"), then its
# argument groups (add_dataset_parser's dataset groups, then "sampling parameters"); loadgen's
# own flags last. Flags not built yet are listed by name in a final section.
CUSTOM = "custom dataset options"
SPEC_BENCH = "spec bench dataset options"
SONNET = "sonnet dataset options"
SHAREGPT = "sharegpt dataset options"
TIMED_TRACE = "timed-trace dataset options"
RANDOM = "random dataset options"
RANDOM_MM = "random multimodal dataset options extended from random dataset"
BLAZEDIT = "blazedit dataset options"
ASR = "asr dataset options"
HF = "hf dataset options"
PREFIX_REPETITION = "prefix repetition dataset options"
BFCL = "BFCL dataset options"
SPEED_BENCH = "speed bench dataset options"
SAMPLING = "sampling parameters"
LOADGEN = "loadgen options (not in vllm bench serve)"
GROUP_TITLES = (
    CUSTOM, SPEC_BENCH, SONNET, SHAREGPT, TIMED_TRACE, RANDOM, RANDOM_MM, BLAZEDIT, ASR, HF, BFCL,
    PREFIX_REPETITION, SPEED_BENCH, SAMPLING, LOADGEN,
)  # fmt: skip

# Readers shared by several flags.
# --no-oversample (hf too: upstream's HuggingFaceDataset honours it and --disable-shuffle).
FILE_DATASETS = (
    "custom", "custom_image", "custom_audio", "sharegpt", "spec_bench", "speed_bench", "hf",
)  # fmt: skip
# Upstream's refusals of a value out of a flag's range (validate() checks them, not click).
AT_LEAST = "{name} must be >= {minimum:g}, got {value}"
ABOVE = "{name} must be > {minimum:g}, got {value}"
NOT_RERANK = tuple(backend for backend in UPSTREAM_BACKENDS if backend != "vllm-rerank")


def sampling(name: str, kind: type, help: str) -> Flag:
    """A sampling parameter: sent when given, by the generation backends only."""
    return Flag(name, kind, help=help, group=SAMPLING, readers=GENERATION_BACKENDS)


RUN_FLAGS: tuple[Flag, ...] = (
    # --- the server ---
    Flag(
        "--backend",
        default="openai",
        choices=UPSTREAM_BACKENDS,
        help="Request format: openai and vllm (completions), openai-chat, openai-audio "
        "(transcriptions, translations), and the pooling backends (embeddings, pooling, "
        "rerank).",
    ),
    Flag("--base-url", help="Server base URL; overrides --host/--port."),
    Flag("--host", default="127.0.0.1"),
    Flag("--port", int, 8000),
    Flag("--endpoint", default="/v1/completions", help="API path."),
    Flag("--insecure", bool, False, help="Do not check the server's TLS certificate."),
    Flag(
        "--header",
        default=(),
        field="headers",
        value_type=dict[str, str],
        parse=parse_headers,
        multiple=True,
        nargs="*",
        metavar="KEY=VALUE",
        help="Extra HTTP header on every request; several values may follow one flag.",
    ),
    Flag("--model", help="Model name; default: the first model of the server's /v1/models."),
    Flag("--served-model-name", help="The model field sent (default --model)."),
    # --- the tokenizer ---
    Flag(
        "--tokenizer",
        help="tokenizer.json, a directory holding one, or a Hugging Face id (default --model).",
    ),
    Flag(
        "--tokenizer-mode",
        default="auto",
        check=check_tokenizer_mode,
        help="auto or hf: a Hugging Face tokenizer.json (other upstream modes are not supported "
        "yet).",
    ),
    Flag(
        "--trust-remote-code",
        bool,
        False,
        help="Accepted for upstream's scripts: loadgen reads tokenizer.json only and runs no "
        "tokenizer code, so there is nothing to trust.",
    ),
    Flag(
        "--skip-tokenizer-init",
        bool,
        False,
        help="No client-side tokenizer: the dataset is built with the server's /tokenize, and "
        "tokenizer_id, token throughputs and the TTFT/TPOT/ITL sections go, as upstream.",
    ),
    # --- the dataset ---
    Flag(
        "--dataset-name",
        default="random",
        choices=UPSTREAM_DATASETS,
        help=f"Built so far: {', '.join(SUPPORTED_DATASETS)} (hf: its text datasets); the "
        "others exit 2.",
    ),
    Flag(
        "--dataset-path",
        help="custom: a .jsonl file of prompts; sharegpt: the ShareGPT JSON file; spec_bench: "
        "Spec-Bench's question.jsonl; speed_bench: the directory of SPEED-Bench's subsets (or "
        "one subset's .jsonl); burstgpt: the BurstGPT CSV; hf: a hub id or a local copy; "
        "timed_trace: a JSONL trace; sonnet: a text of poem lines.",
    ),
    Flag(
        "--disable-shuffle",
        bool,
        False,
        readers=("prefix_repetition", *FILE_DATASETS),
        help="custom, sharegpt: keep the file's order (no seeded shuffle).",
    ),
    Flag(
        "--no-oversample",
        bool,
        False,
        readers=FILE_DATASETS,
        help="custom, sharegpt: send only the file's prompts when it has fewer than --num-prompts.",
    ),
    Flag(
        "--skip-chat-template",
        bool,
        False,
        readers=("custom", "speed_bench", "hf"),  # templated "unless skipped" (a test checks)
        help="custom: send prompts as written, without the tokenizer's chat template.",
    ),
    Flag(
        "--no-stream",
        bool,
        False,
        readers=("hf",),
        help="hf: download the whole dataset instead of streaming it.",
    ),
    Flag(
        "--self-timed",
        bool,
        secondary="--no-self-timed",  # default None: on for timed_trace, as upstream
        help="timed_trace: send at the trace's timestamps (the default) or at --request-rate.",
    ),
    Flag(
        "--chat-template-kwargs",
        value_type=dict[str, Any] | None,
        parse=parse_json_object,
        readers=("custom", "speed_bench"),  # and only templated: validation.py says when not
        help="JSON object passed to the chat template (custom), e.g. '{\"thinking\": true}'.",
    ),
    Flag("--input-len", int, sets=("random_input_len",), help="Sets --random-input-len."),
    Flag(
        "--output-len",
        int,
        sets=OUTPUT_LEN_TARGETS,
        help="Sets the output length of every dataset ("
        + ", ".join(map(flag_name, OUTPUT_LEN_TARGETS))
        + ").",
    ),
    Flag(
        "--enable-multimodal-chat",
        bool,
        False,
        readers=("random-mm", "custom_image", "custom_audio"),
        help="random-mm: build the chat message with the images in the dataset (the same "
        "message is sent either way); custom_audio: send the audio in a chat message "
        "(input_audio), for --backend openai-chat.",
    ),
    # --- the schedule ---
    Flag("--num-prompts", int, 1000),
    Flag("--seed", int, 0),
    Flag(
        "--request-rate",
        default="inf",
        minimum=0,
        min_open=True,
        range_words=ABOVE,
        value_type=float | tuple[float, ...],
        parse=parse_rate,
        help="Requests per second; inf sends all at t0. A comma list (1,2,inf) runs each in turn "
        "(a campaign).",
    ),
    Flag(
        "--burstiness",
        float,
        1.0,
        minimum=0,
        min_open=True,
        range_words=ABOVE,
        help="Gamma shape of the arrival gaps; 1 is Poisson.",
    ),
    Flag(
        "--max-concurrency",
        minimum=0,
        min_open=True,
        range_words="{name} must be greater than 0",
        value_type=int | tuple[int, ...] | None,
        parse=parse_concurrency,
        help="Most requests in flight at once, across all workers. A comma list (1,4,16) runs "
        "each in turn (a campaign; with a --request-rate list, every pair).",
    ),
    Flag(
        "--ramp-up-strategy",
        choices=RAMP_UP_STRATEGIES,
        help="Ramp the request rate per request from --ramp-up-start-rps to --ramp-up-end-rps "
        "over the run; leave --request-rate at inf.",
    ),
    Flag("--ramp-up-start-rps", int, help="Ramp-up: the first request's rate."),
    Flag("--ramp-up-end-rps", int, help="Ramp-up: the last request's rate."),
    # --- the requests ---
    Flag("--ignore-eos", bool, False, help="Send ignore_eos (always on for random)."),
    Flag("--logprobs", int, readers=GENERATION_BACKENDS, help="logprobs sent with completions."),
    Flag(
        "--use-beam-search",
        bool,
        False,
        help="Accepted as upstream accepts it; it has no effect there either (warns).",
    ),
    Flag(
        "--extra-body",
        value_type=dict[str, Any] | None,
        parse=parse_json_object,
        readers=NOT_RERANK,
        help="JSON object merged into every request body.",
    ),
    Flag("--request-id-prefix", help="x-request-id prefix (default bench-<8 hex>-)."),
    Flag(
        "--goodput",
        default=(),
        value_type=dict[str, float] | None,
        parse=parse_goodput,
        multiple=True,
        nargs="+",
        metavar="KEY:VALUE",
        readers=GENERATION_BACKENDS,
        reporting=True,
        help="SLOs in ms for goodput (ttft, tpot, e2el); several values may follow one flag.",
    ),
    Flag(
        "--lora-modules",
        default=(),
        value_type=list[str] | None,
        parse=parse_names,
        multiple=True,
        nargs="+",
        metavar="NAME",
        help="LoRA adapters; each request names one as its model. Several may follow one flag.",
    ),
    Flag(
        "--lora-assignment",
        default="random",
        choices=("random", "round-robin"),
        help="How requests get their adapter: seeded random choice or round-robin.",
    ),
    Flag(
        "--profile",
        bool,
        False,
        help="POST /start_profile before the run and /stop_profile after it (the server must "
        "have profiling enabled).",
    ),
    # --- the result ---
    Flag("--save-result", bool, False, reporting=True, help="Write the result JSON."),
    Flag(
        "--append-result",
        bool,
        False,
        reporting=True,
        help="Append the result JSON to the file as one line.",
    ),
    Flag(
        "--save-records",
        bool,
        secondary="--no-save-records",
        help="Write every request's record beside the result JSON (NAME.records.arrow); on by "
        "default with --save-result or --append-result.",
    ),
    Flag(
        "--label",
        reporting=True,
        help="JSON label and file-name prefix (default backend).",
    ),
    Flag(
        "--metadata",
        default=(),
        value_type=dict[str, str] | None,
        parse=parse_metadata,
        multiple=True,
        nargs="*",
        metavar="KEY=VALUE",
        reporting=True,
        help="String fields added to the result JSON; several values may follow one flag.",
    ),
    Flag(
        "--save-detailed",
        bool,
        False,
        reporting=True,
        help="Keep per-request arrays in the JSON.",
    ),
    Flag("--result-dir", reporting=True, help="Directory of the result file (created)."),
    Flag("--result-filename", reporting=True, help="Name of the result file."),
    Flag(
        "--probe-request-rate",
        float,
        0.0,
        minimum=0,
        maximum=sys.float_info.max,  # finite
        range_words="{name} must be a finite rate >= 0, got {value}",
        help="Single-token probes per second, one at a time beside the run and outside "
        "--max-concurrency; their E2EL is reported apart (0: none).",
    ),
    Flag(
        "--plot-timeline",
        bool,
        False,
        reporting=True,
        help="Write NAME.timeline.html beside the result file: each request's TTFT and ITLs "
        "(needs the [plot] extra).",
    ),
    Flag(
        "--timeline-itl-thresholds",
        default="25,50",
        reporting=True,
        help="Two ITLs in ms that colour the timeline's bars green, orange and red.",
    ),
    Flag(
        "--plot-dataset-stats",
        bool,
        False,
        reporting=True,
        help="Write NAME.dataset_stats.png beside the result file: the prompt and output token "
        "counts (needs the [plot] extra).",
    ),
    Flag("--disable-tqdm", bool, False, help="No progress bar."),
    Flag(
        "--percentile-metrics",
        reporting=True,
        help="Comma list of ttft,tpot,itl,e2el,client_queue_time,"
        "e2el_including_client_queue (default ttft,tpot,itl).",
    ),
    Flag(
        "--metric-percentiles",
        default="99",
        reporting=True,
        help='Comma list of percentiles, e.g. "50,90,99,99.9".',
    ),
    # --- waiting for the server ---
    Flag(
        "--ready-check-timeout-sec",
        int,
        0,
        minimum=0,
        range_words="{name} must be >= 0, got {value:g}",
        help="Seconds to wait for the server: model discovery, the server tokenizer and a "
        "first request like the run's are retried until they succeed. 0: one attempt each, "
        "and no test request.",
    ),
    Flag(
        "--ready-check-interval-sec",
        float,
        5.0,
        minimum=0,
        min_open=True,
        range_words="{name} must be > 0, got {value:g}",
        group=LOADGEN,
        help="Seconds between two tries while waiting for the server.",
    ),
    Flag(
        "--server-tokenizer-timeout-sec",
        float,
        300.0,
        minimum=0,
        min_open=True,
        range_words="{name} must be > 0, got {value:g}",
        help="Seconds the dataset may take to build through the server's /tokenize and "
        "/detokenize (when no local tokenizer loads) before the run stops with exit 1; also "
        "bounds the alignment of random prompts to the server's tokenizer.",
    ),
    Flag(
        "--num-warmups",
        int,
        0,
        minimum=0,
        range_words=AT_LEAST,
        help="Copies of the first request sent before the timed run (capped by "
        "--max-concurrency), not measured.",
    ),
    # --- loadgen's own ---
    Flag(
        "--workers",
        int,
        default_factory=available_cores,
        group=LOADGEN,
        help="Worker processes (default: one per available core; at most 4 per core). With "
        "--ray: Ray actors, one per worker, over the cluster's nodes. 0 with --remote-workers: "
        "every worker joins by hand.",
    ),
    Flag(
        "--listen",
        str,
        None,
        group=LOADGEN,
        parse=parse_listen,
        value_type=tuple[str, int] | None,
        help="HOST:PORT where workers on other hosts join this run (`loadgen worker --connect "
        "tcp://HOST:PORT --key worker.key`), over CurveZMQ with --key's keys; port 0: any free "
        "one (printed). Needs --remote-workers and --key.",
    ),
    Flag(
        "--remote-workers",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="Workers that join by hand at --listen; the run waits for them all before t0. "
        "They mix with --workers local ones.",
    ),
    Flag(
        "--key",
        str,
        None,
        group=LOADGEN,
        help="The coordinator's key file (coordinator.key from `loadgen keygen DIR`): only "
        "workers holding the worker.key written with it may join at --listen.",
    ),
    Flag(
        "--ray",
        str,
        None,
        group=LOADGEN,
        help="Place the --workers as Ray actors on the cluster at this address ('auto': the "
        "local one, as `ray start` left it); needs the [ray] extra. Keys are made for the run.",
    ),
    Flag(
        "--workers-per-node",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        help="With --ray: workers on each node, filling nodes in order (default: spread the "
        "workers round the nodes).",
    ),
    # --- conversations: the Rust client's --multi-turn family, and loadgen's think time ---
    Flag(
        "--multi-turn",
        bool,
        False,
        group=LOADGEN,
        help="Run conversations (openai-chat; --dataset-name random or sharegpt): "
        "--num-prompts of them, each turn sent when the one before it ended, with the "
        "conversation so far (the server's answers included) and an X-Session-ID; conversations "
        "start on the --request-rate schedule; a failed turn ends its conversation.",
    ),
    Flag(
        "--multi-turn-num-turns",
        int,
        3,
        group=LOADGEN,
        minimum=1,
        help="With --multi-turn and random: turns per conversation.",
    ),
    Flag(
        "--multi-turn-min-turns",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn and random: the fewest turns a conversation has, each drawn "
        "from [min, max] with --seed (0: --multi-turn-num-turns).",
    ),
    Flag(
        "--multi-turn-max-turns",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn: the most turns a conversation has (random: 0 is "
        "--multi-turn-num-turns; sharegpt: 0 keeps every turn of a conversation).",
    ),
    Flag(
        "--multi-turn-concurrency",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        sets=("max_concurrency",),
        help="With --multi-turn: the most turns in flight at once, over all conversations "
        "(the same cap as --max-concurrency, which it sets); a conversation thinking between "
        "turns holds no slot.",
    ),
    Flag(
        "--multi-turn-delay-ms",
        float,
        0.0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn: think time between a turn's end and the next turn, in ms.",
    ),
    Flag(
        "--multi-turn-delay-distribution",
        str,
        "fixed",
        group=LOADGEN,
        choices=("fixed", "exponential"),
        help="With --multi-turn: each think time is --multi-turn-delay-ms (fixed) or drawn with "
        "that mean (exponential, with --seed).",
    ),
    Flag(
        "--per-turn-input-len",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn and random: input tokens of each turn after the first "
        "(0: --random-input-len).",
    ),
    # --- the Rust client's extras (vllm-bench): a plan without a run, a context filter, ids ---
    Flag(
        "--dry-run",
        bool,
        False,
        group=LOADGEN,
        help="Print the plan (the dataset's token lengths, the schedule and its hash, each "
        "worker's requests and credits) and exit 0: no worker started, no request sent.",
    ),
    Flag(
        "--max-model-len",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        help="Drop prompts whose prompt_len + output_len is above this before the schedule "
        "is made (one line gives the count; none left exits 1).",
    ),
    Flag(
        "--prompt-token-ids",
        bool,
        False,
        group=LOADGEN,
        readers=("random",),
        help="random, with a completions backend (openai, vllm): send each prompt as its token "
        "ids, as built (no decode, exact lengths, no server-side alignment).",
    ),
    Flag(
        "--request-timeout",
        float,
        None,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds a request may take from sent to its last byte before it fails with "
        "'request timeout' (default: no limit). Warm-ups and probes obey it too.",
    ),
    Flag(
        "--idle-timeout",
        float,
        300.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds an open request may go without a byte from the server before it fails "
        "with 'idle timeout' (a server that stalls after its headers or mid-stream).",
    ),
    Flag(
        "--connect-timeout",
        float,
        30.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds opening a connection (TCP and TLS) may take before its request fails.",
    ),
    Flag(
        "--fail-fast",
        bool,
        True,
        secondary="--no-fail-fast",
        group=LOADGEN,
        help="Stop the run when its first 20 requests (or all of a smaller run) fail with the "
        "same 4xx and message (not 408 or 429), naming the likely fix.",
    ),
    Flag(
        "--dataset-cache",
        bool,
        True,
        secondary="--no-dataset-cache",
        group=LOADGEN,
        readers=names(lambda dataset: dataset.cached),
        help="Keep random, random-rerank and prefix_repetition datasets built with a local "
        "tokenizer in $XDG_CACHE_HOME/loadgen/datasets (~/.cache/...), keyed by the tokenizer, "
        "the dataset's flags and --seed, and read them back when a run asks for the same one.",
    ),
    Flag(
        "--fail-on",
        default=(),
        parse=parse_fail_on,
        multiple=True,
        metavar="CONDITION",
        group=LOADGEN,
        reporting=True,
        help="An SLO gate, e.g. 'p99_ttft_ms>500' or 'failed>0': KEY OP NUMBER on a numeric "
        "key of the result JSON (nested: loadgen.send_lag_ms.p99). Repeatable; a run that "
        "breaches any exits 3 and prints the breached ones last.",
    ),
    Flag(
        "--mock",
        bool,
        False,
        group=LOADGEN,
        help="Start the embedded mock server on a free loopback port and run against it.",
    ),
    Flag(
        "--mock-ttft-ms",
        float,
        0.0,
        group=LOADGEN,
        help="With --mock: the mock's time to first token.",
    ),
    Flag(
        "--mock-itl-ms",
        float,
        0.0,
        group=LOADGEN,
        help="With --mock: the mock's gap between tokens.",
    ),
    Flag(
        "--mock-prefill-us-per-token",
        float,
        0.0,
        group=LOADGEN,
        minimum=0,
        help="With --mock: microseconds of prefill per prompt token not in the mock's prefix "
        "cache, added to its time to first token (multi-turn runs then show the cache's "
        "effect by turn).",
    ),
    Flag(
        "--num-runs",
        int,
        1,
        group=LOADGEN,
        minimum=1,
        help="Runs of each point (each --max-concurrency and --request-rate pair); more than 1 "
        "makes a campaign, whose summary.csv gives each metric's mean and 95 % interval.",
    ),
    Flag(
        "--steady-state",
        bool,
        False,
        group=LOADGEN,
        help="Run as a campaign whose summary.csv counts only each run's requests sent after "
        "its first request ended and ended before its last one was sent, and says how many "
        "it trimmed.",
    ),
    Flag(
        "--quiet",
        bool,
        False,
        short="-q",
        group=LOADGEN,
        help="Print only the summary table and the client's verdict (no progress, notes or "
        "warnings); errors still go to stderr.",
    ),
    # --- dataset groups, in upstream's order ---
    Flag(
        "--custom-output-len",
        int,
        256,
        group=CUSTOM,
        readers=("custom", "custom_image", "custom_audio"),
        help="custom: max_tokens per request; -1 takes each line's output_tokens.",
    ),
    Flag(
        "--custom-ensure-client-side-data",
        bool,
        False,
        group=CUSTOM,
        readers=("custom_image",),
        help="custom_image: read local and HTTP(S) images here and send them inline (PNG data "
        "URLs).",
    ),
    Flag(
        "--spec-bench-output-len",
        int,
        256,
        group=SPEC_BENCH,
        readers=("spec_bench",),
        help="spec_bench: max_tokens of every request.",
    ),
    Flag(
        "--spec-bench-category",
        group=SPEC_BENCH,
        readers=("spec_bench",),
        help="spec_bench: only the questions of this category (default: all).",
    ),
    Flag(
        "--sonnet-input-len",
        int,
        550,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: most tokens of a templated prompt.",
    ),
    Flag(
        "--sonnet-output-len",
        int,
        150,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: max_tokens of every request.",
    ),
    Flag(
        "--sonnet-prefix-len",
        int,
        200,
        group=SONNET,
        readers=("sonnet",),
        help="sonnet: tokens of the poem's first lines every prompt starts with.",
    ),
    Flag(
        "--sharegpt-output-len",
        int,
        minimum=1,
        range_words=AT_LEAST,
        group=SHAREGPT,
        readers=("sharegpt",),
        help="sharegpt: max_tokens per request instead of each completion's token count.",
    ),
    Flag(
        "--timed-trace-chunk-hash-size",
        int,
        16,
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: prompt tokens each hash id stands for.",
    ),
    Flag(
        "--timed-trace-sec-multiplier",
        float,
        1.0,
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: multiplies the timestamps into seconds (0.001 for milliseconds).",
    ),
    Flag(
        "--timed-trace-label-timestamp",
        default="timestamp",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's timestamp.",
    ),
    Flag(
        "--timed-trace-label-input-length",
        default="input_length",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's input length.",
    ),
    Flag(
        "--timed-trace-label-output-length",
        default="output_length",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's output length.",
    ),
    Flag(
        "--timed-trace-label-hash-ids",
        default="hash_ids",
        group=TIMED_TRACE,
        readers=("timed_trace",),
        help="timed_trace: the field holding a request's prompt hash ids.",
    ),
    Flag("--random-input-len", int, 1024, group=RANDOM),
    Flag("--random-output-len", int, 128, group=RANDOM),
    Flag(
        "--random-range-ratio",
        default="0.0",
        check=parse_range_ratio,
        group=RANDOM,
        help='A ratio r in [0, 1), or JSON {"input": r1, "output": r2}.',
    ),
    Flag("--random-prefix-len", int, 0, group=RANDOM),
    Flag(
        "--random-batch-size",
        int,
        1,
        minimum=1,
        range_words=AT_LEAST,
        group=RANDOM,
        readers=("random", "random-rerank"),
        help="random, random-rerank: texts per request (pooling backends only).",
    ),
    Flag(
        "--no-reranker",
        bool,
        False,
        group=RANDOM,
        readers=("random-rerank",),
        help="random-rerank: the model scores by embeddings, not as a native reranker.",
    ),
    Flag(
        "--random-mm-base-items-per-request",
        int,
        1,
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: images per request, before the range ratio.",
    ),
    Flag(
        "--random-mm-num-mm-items-range-ratio",
        float,
        0.0,
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: r in [0, 1]; images per request from [floor(n(1-r)), ceil(n(1+r))].",
    ),
    Flag(
        "--random-mm-limit-mm-per-prompt",
        default='{"image": 255, "video": 1}',
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: JSON caps per modality.",
    ),
    Flag(
        "--random-mm-bucket-config",
        default="{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}",
        group=RANDOM_MM,
        readers=("random-mm",),
        help="random-mm: {(height, width, frames): probability}; frames > 1 is an MP4 video.",
    ),
    Flag(
        "--blazedit-min-distance",
        float,
        0.0,
        group=BLAZEDIT,
        readers=("hf",),
        help="hf Blazedit: skip rows whose normalized edit distance is below this.",
    ),
    Flag(
        "--blazedit-max-distance",
        float,
        1.0,
        group=BLAZEDIT,
        readers=("hf",),
        help="hf Blazedit: skip rows whose normalized edit distance is above this.",
    ),
    Flag(
        "--asr-max-audio-len-sec",
        float,
        float("inf"),
        group=ASR,
        readers=("hf",),
        help="hf ASR: skip clips longer than this many seconds.",
    ),
    Flag(
        "--asr-min-audio-len-sec",
        float,
        0.0,
        group=ASR,
        readers=("hf",),
        help="hf ASR: skip clips shorter than this many seconds.",
    ),
    Flag("--hf-subset", group=HF, readers=("hf",), help="hf: the subset (config) name."),
    Flag("--hf-split", group=HF, readers=("hf",), help="hf: the split (default: the dataset's)."),
    Flag("--hf-name", group=HF, readers=("hf",), help="hf: the hub id a local copy stands for."),
    Flag(
        "--hf-output-len",
        int,
        group=HF,
        readers=("hf",),
        help="hf: max_tokens of every request (default: the dataset's).",
    ),
    Flag(
        "--bfcl-categories",
        group=BFCL,
        readers=("hf",),
        value_type=list[str] | None,
        parse=parse_comma_list,
        help="hf BFCL: comma-separated BFCL v3 categories (default: simple,live_simple,multiple).",
    ),
    Flag(
        "--prefix-repetition-prefix-len",
        int,
        256,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: tokens of each shared prefix.",
    ),
    Flag(
        "--prefix-repetition-suffix-len",
        int,
        256,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: tokens after the prefix, different in every prompt.",
    ),
    Flag(
        "--prefix-repetition-num-prefixes",
        int,
        10,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: prefixes, each shared by --num-prompts // this many prompts.",
    ),
    Flag(
        "--prefix-repetition-output-len",
        int,
        128,
        group=PREFIX_REPETITION,
        readers=("prefix_repetition",),
        help="prefix_repetition: max_tokens of every request.",
    ),
    Flag(
        "--speed-bench-dataset-subset",
        default="qualitative",
        choices=SPEED_BENCH_SUBSETS,
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: the subset, {subset}.jsonl in the --dataset-path directory.",
    ),
    Flag(
        "--speed-bench-output-len",
        int,
        4096,
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: max_tokens of every request.",
    ),
    Flag(
        "--speed-bench-category",
        group=SPEED_BENCH,
        readers=("speed_bench",),
        help="speed_bench: only the prompts of this category (default: all).",
    ),
    sampling("--top-p", float, "top_p sent with every request."),
    sampling("--top-k", int, "top_k sent with every request."),
    sampling("--min-p", float, "min_p sent with every request."),
    sampling("--temperature", float, "temperature sent."),
    sampling("--frequency-penalty", float, "frequency_penalty sent."),
    sampling("--presence-penalty", float, "presence_penalty sent."),
    sampling(
        "--repetition-penalty", float, "repetition_penalty sent (completions carry 1.0 otherwise)."
    ),
)

FLAGS = by_name(RUN_FLAGS)  # each flag under each of its spellings
SHORTHANDS = tuple(flag for flag in RUN_FLAGS if flag.sets)  # --input-len, --output-len
SAMPLING_FIELDS = tuple(flag.field for flag in RUN_FLAGS if flag.group == SAMPLING)
# Each --help section's flags, in the table's order.
HELP_GROUPS: dict[str, tuple[str, ...]] = {
    title: tuple(flag.name for flag in RUN_FLAGS if flag.group == title) for title in GROUP_TITLES
}
