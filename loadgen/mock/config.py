"""What the mock server does: its options, declared once as a flag table, and `MockConfig`
made from it.

``MOCK_FLAGS`` gives `loadgen mock-server` its click options (loadgen/cli/mock_server.py) and
`MockConfig` its fields, types and defaults.
"""

from __future__ import annotations

from pathlib import Path

from loadgen.flag import Flag, config_class
from loadgen.mock.personalities import PERSONALITIES
from loadgen.text.tokenizer import MOCK_MODEL_NAME

MOCK_FLAGS: tuple[Flag, ...] = (
    Flag("--host", default="127.0.0.1", help="Address to listen on."),
    Flag(
        "--port",
        int,
        8000,
        minimum=0,
        maximum=65535,
        help="Port to listen on; 0 picks a free one.",
    ),
    Flag("--model", default=MOCK_MODEL_NAME, help="Served model name."),
    Flag(
        "--tokenizer",
        default=MOCK_MODEL_NAME,
        help="Tokenizer that counts tokens: a tokenizer.json, a directory, or a hub id.",
    ),
    Flag("--ttft-ms", float, 0.0, minimum=0, help="Time to first token."),
    Flag(
        "--itl-ms",
        float,
        0.0,
        minimum=0,
        help="Time between token events; 0 sends a whole stream in one write.",
    ),
    Flag(
        "--prefill-us-per-token",
        float,
        0.0,
        minimum=0,
        help="Microseconds of prefill per prompt token that is not in the prefix cache, added "
        "to the time to first token; set, the mock keeps a vLLM-style prefix cache (16-token "
        "blocks), so a conversation's later turns pay for their new tokens only.",
    ),
    Flag(
        "--output-len",
        int,
        128,
        minimum=1,
        help="Tokens a response has when the model stops by itself (no ignore_eos).",
    ),
    Flag(
        "--startup-delay",
        float,
        0.0,
        field="startup_delay_s",
        minimum=0,
        help="Seconds the model 'loads' after start: the port stays closed (vllm, sglang, tgi, "
        "openai) or answers every request 503 (llamacpp).",
    ),
    Flag(
        "--error-rate",
        float,
        0.0,
        minimum=0,
        maximum=1,
        help="Fraction of generation requests answered with HTTP 500.",
    ),
    Flag("--seed", int, 0, help="Seed of the error-injection generator."),
    Flag(
        "--max-model-len",
        int,
        131072,
        minimum=1,
        help="Context length reported in /v1/models and enforced on requests.",
    ),
    Flag(
        "--record-timings",
        Path,
        help="Record when each generation request arrived and each token event was written "
        "(time.perf_counter_ns) and save them to this .npz file at shutdown; also serves "
        "GET /timings.",
    ),
    Flag(
        "--unavailable-for",
        float,
        0.0,
        field="unavailable_for_s",
        minimum=0,
        help="Seconds after the port opens during which every request gets HTTP 503, like a "
        "gateway whose backend is still loading.",
    ),
    Flag(
        "--personality",
        default="vllm",
        choices=tuple(sorted(PERSONALITIES)),
        help="The server whose answers and connection habits to reproduce; see docs/servers.md.",
    ),
    Flag(
        "--keepalive-timeout",
        float,
        field="keepalive_timeout_s",  # None: the personality's (NO_IDLE_TIMEOUT_S for none)
        minimum=0,
        min_open=True,
        help="Seconds an idle keep-alive connection stays open. Default: the personality's "
        "(5 for vllm, sglang and llamacpp; none for tgi; 75 for openai).",
    ),
    Flag(
        "--http-threads",
        int,
        minimum=0,
        help="Connection handlers, each held by an open connection, idle or not; connections "
        "beyond them wait until one closes (cpp-httplib's thread pool). 0: unbounded. Default: "
        "8 for llamacpp, unbounded for the others.",
    ),
    Flag(
        "--reuse-port",
        bool,
        False,
        help="Listen with SO_REUSEPORT, so that several mock-server processes can share one "
        "port (give the port the first one picked): the kernel spreads connections over them, "
        "for more connections than one process's open-file limit allows or more cores.",
    ),
    Flag(
        "--lora",
        default=(),
        field="lora_names",
        multiple=True,
        metavar="NAME",
        help="A LoRA adapter name to serve besides the model (repeatable); requests may name it.",
    ),
    Flag(
        "--spec-decode-draft-tokens",
        int,
        0,
        minimum=0,
        help="Report vLLM's spec-decode counters on /metrics: a draft of this many tokens per "
        "generated token, half of them accepted.",
    ),
    Flag(
        "--embedding-dim",
        int,
        384,
        minimum=1,
        help="Floats per vector answered by /v1/embeddings and /pooling.",
    ),
    Flag(
        "--empty-model-list",
        bool,
        False,
        help="Serve /v1/models with no model in it, like a gateway without backends.",
    ),
)

MockConfig = config_class(
    "MockConfig",
    MOCK_FLAGS,
    module=__name__,
    doc="""Behaviour of the mock server: a field per flag of MOCK_FLAGS (--startup-delay:
    startup_delay_s, --lora: lora_names, ...), with its defaults.""",
)
