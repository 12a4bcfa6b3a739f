"""What the mock server does: `MockConfig`, a field per option, each declared once by its flag.

``MOCK_FLAGS``, read from the fields, gives `loadgen mock-server` its click options
(loadgen/cli/mock_server.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from loadgen.flag import flag, flags_of
from loadgen.mock.personalities import PERSONALITIES
from loadgen.text.tokenizer import MOCK_MODEL_NAME


@dataclasses.dataclass(frozen=True, kw_only=True)
class MockConfig:
    """Behaviour of the mock server: a field per option of `loadgen mock-server`, declared by
    its flag (--startup-delay: startup_delay_s, --lora: lora_names, ...), with its defaults."""

    host: str = flag("--host", default="127.0.0.1", help="Address to listen on.")
    port: int = flag(
        "--port",
        int,
        8000,
        minimum=0,
        maximum=65535,
        help="Port to listen on; 0 picks a free one.",
    )
    model: str = flag("--model", default=MOCK_MODEL_NAME, help="Served model name.")
    tokenizer: str = flag(
        "--tokenizer",
        default=MOCK_MODEL_NAME,
        help="Tokenizer that counts tokens: a tokenizer.json, a directory, or a hub id.",
    )
    ttft_ms: float = flag("--ttft-ms", float, 0.0, minimum=0, help="Time to first token.")
    itl_ms: float = flag(
        "--itl-ms",
        float,
        0.0,
        minimum=0,
        help="Time between token events; 0 sends a whole stream in one write.",
    )
    prefill_us_per_token: float = flag(
        "--prefill-us-per-token",
        float,
        0.0,
        minimum=0,
        help="Microseconds of prefill per prompt token that is not in the prefix cache, added "
        "to the time to first token; set, the mock keeps a vLLM-style prefix cache (16-token "
        "blocks), so a conversation's later turns pay for their new tokens only.",
    )
    max_running: int = flag(
        "--max-running",
        int,
        0,
        minimum=0,
        help="Generation requests that run at once (vLLM's --max-num-seqs); later ones wait in "
        "a first-come queue, so the time to first token climbs once the load passes N / (ttft + "
        "(output tokens - 1) * itl) requests per second. 0: no limit.",
    )
    kv_cache_tokens: int = flag(
        "--kv-cache-tokens",
        int,
        262144,
        minimum=1,
        help="KV-cache capacity in tokens that /metrics reports usage of: the prompt and "
        "generated tokens of the running requests over it (the mock neither queues nor "
        "preempts on a full cache: the usage stops at 1).",
    )
    output_len: int = flag(
        "--output-len",
        int,
        128,
        minimum=1,
        help="Tokens a response has when the model stops by itself (no ignore_eos).",
    )
    startup_delay_s: float = flag(
        "--startup-delay",
        float,
        0.0,
        field="startup_delay_s",
        minimum=0,
        help="Seconds the model 'loads' after start: the port stays closed (vllm, sglang, tgi, "
        "openai) or answers every request 503 (llamacpp).",
    )
    error_rate: float = flag(
        "--error-rate",
        float,
        0.0,
        minimum=0,
        maximum=1,
        help="Fraction of generation requests answered with HTTP 500.",
    )
    seed: int = flag("--seed", int, 0, help="Seed of the error-injection generator.")
    max_model_len: int = flag(
        "--max-model-len",
        int,
        131072,
        minimum=1,
        help="Context length reported in /v1/models and enforced on requests.",
    )
    record_timings: Path | None = flag(
        "--record-timings",
        Path,
        help="Record when each generation request arrived and each token event was written "
        "(time.perf_counter_ns) and save them to this .npz file at shutdown; also serves "
        "GET /timings.",
    )
    unavailable_for_s: float = flag(
        "--unavailable-for",
        float,
        0.0,
        field="unavailable_for_s",
        minimum=0,
        help="Seconds after the port opens during which every request gets HTTP 503, like a "
        "gateway whose backend is still loading.",
    )
    personality: str = flag(
        "--personality",
        default="vllm",
        choices=tuple(sorted(PERSONALITIES)),
        help="The server whose answers and connection habits to reproduce; see docs/servers.md.",
    )
    keepalive_timeout_s: float | None = flag(
        "--keepalive-timeout",
        float,
        field="keepalive_timeout_s",  # None: the personality's (NO_IDLE_TIMEOUT_S for none)
        minimum=0,
        min_open=True,
        help="Seconds an idle keep-alive connection stays open. Default: the personality's "
        "(5 for vllm, sglang and llamacpp; none for tgi; 75 for openai).",
    )
    http_threads: int | None = flag(
        "--http-threads",
        int,
        minimum=0,
        help="Connection handlers, each held by an open connection, idle or not; connections "
        "beyond them wait until one closes (cpp-httplib's thread pool). 0: unbounded. Default: "
        "8 for llamacpp, unbounded for the others.",
    )
    reuse_port: bool = flag(
        "--reuse-port",
        bool,
        False,
        help="Listen with SO_REUSEPORT, so that several mock-server processes can share one "
        "port (give the port the first one picked): the kernel spreads connections over them, "
        "for more connections than one process's open-file limit allows or more cores.",
    )
    lora_names: tuple[str, ...] = flag(
        "--lora",
        default=(),
        field="lora_names",
        multiple=True,
        metavar="NAME",
        help="A LoRA adapter name to serve besides the model (repeatable); requests may name it.",
    )
    spec_decode_draft_tokens: int = flag(
        "--spec-decode-draft-tokens",
        int,
        0,
        minimum=0,
        help="Report vLLM's spec-decode counters on /metrics: a draft of this many tokens per "
        "generated token, half of them accepted.",
    )
    embedding_dim: int = flag(
        "--embedding-dim",
        int,
        384,
        minimum=1,
        help="Floats per vector answered by /v1/embeddings and /pooling.",
    )
    empty_model_list: bool = flag(
        "--empty-model-list",
        bool,
        False,
        help="Serve /v1/models with no model in it, like a gateway without backends.",
    )


MOCK_FLAGS = flags_of(MockConfig)  # the options, in the fields' order
