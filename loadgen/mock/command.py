"""``loadgen mock-server``: the click command that configures and runs the mock server."""

from __future__ import annotations

import os
from pathlib import Path

import click
import uvloop
from click.core import ParameterSource

from loadgen.mock.app import serve
from loadgen.mock.config import MockConfig
from loadgen.mock.personalities import PERSONALITIES
from loadgen.mock.recorder import TimingsSaveError
from loadgen.text.tokenizer import MOCK_MODEL_NAME, TokenizerLoadError


@click.command(
    "mock-server",
    help="Run an OpenAI-compatible mock inference server (/v1/completions, "
    "/v1/chat/completions, /v1/embeddings, /pooling, /rerank, /v1/models, /tokenize, /detokenize, "
    "/health) with configurable "
    "latency, output length, error rate and start-up behaviour. GET /mock/stats counts the "
    "requests received, by method and path.\n\n"
    "Capacity on a 2-core machine: about 2800-3000 streamed requests/s (360k-380k events/s) with "
    "128-token streams; see docs/mock-server.md.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on; 0 picks a free one.",
)
@click.option("--model", default=MOCK_MODEL_NAME, show_default=True, help="Served model name.")
@click.option(
    "--tokenizer",
    default=MOCK_MODEL_NAME,
    show_default=True,
    help="Tokenizer that counts tokens: a tokenizer.json, a directory, or a hub id.",
)
@click.option(
    "--ttft-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Time to first token.",
)
@click.option(
    "--itl-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Time between token events; 0 sends a whole stream in one write.",
)
@click.option(
    "--output-len",
    default=128,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens a response has when the model stops by itself (no ignore_eos).",
)
@click.option(
    "--startup-delay",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds the model 'loads' after start: the port stays closed (vllm, sglang, tgi, "
    "openai) or answers every request 503 (llamacpp).",
)
@click.option(
    "--error-rate",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Fraction of generation requests answered with HTTP 500.",
)
@click.option(
    "--seed", default=0, show_default=True, type=int, help="Seed of the error-injection generator."
)
@click.option(
    "--max-model-len",
    default=131072,
    show_default=True,
    type=click.IntRange(min=1),
    help="Context length reported in /v1/models and enforced on requests.",
)
@click.option(
    "--record-timings",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Record when each generation request arrived and each token event was written "
    "(time.perf_counter_ns) and save them to this .npz file at shutdown; also serves "
    "GET /timings.",
)
@click.option(
    "--unavailable-for",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds after the port opens during which every request gets HTTP 503, like a "
    "gateway whose backend is still loading.",
)
@click.option(
    "--personality",
    default="vllm",
    show_default=True,
    type=click.Choice(sorted(PERSONALITIES)),
    help="The server whose answers and connection habits to reproduce; see docs/servers.md.",
)
@click.option(
    "--keepalive-timeout",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds an idle keep-alive connection stays open. Default: the personality's "
    "(5 for vllm, sglang and llamacpp; none for tgi; 75 for openai).",
)
@click.option(
    "--http-threads",
    default=None,
    type=click.IntRange(min=0),
    help="Connection handlers, each held by an open connection, idle or not; connections "
    "beyond them wait until one closes (cpp-httplib's thread pool). 0: unbounded. Default: "
    "8 for llamacpp, unbounded for the others.",
)
@click.option(
    "--lora",
    "lora_names",
    multiple=True,
    metavar="NAME",
    help="A LoRA adapter name to serve besides the model (repeatable); requests may name it.",
)
@click.option(
    "--spec-decode-draft-tokens",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Report vLLM's spec-decode counters on /metrics: a draft of this many tokens per "
    "generated token, half of them accepted.",
)
@click.option(
    "--embedding-dim",
    default=384,
    show_default=True,
    type=click.IntRange(min=1),
    help="Floats per vector answered by /v1/embeddings and /pooling.",
)
@click.option(
    "--empty-model-list",
    is_flag=True,
    help="Serve /v1/models with no model in it, like a gateway without backends.",
)
def mock_server_command(
    host: str,
    port: int,
    model: str,
    tokenizer: str,
    ttft_ms: float,
    itl_ms: float,
    output_len: int,
    startup_delay: float,
    error_rate: float,
    seed: int,
    max_model_len: int,
    record_timings: Path | None,
    unavailable_for: float,
    personality: str,
    keepalive_timeout: float | None,
    http_threads: int | None,
    lora_names: tuple[str, ...],
    embedding_dim: int,
    spec_decode_draft_tokens: int,
    empty_model_list: bool,
) -> None:
    """Run the mock server until SIGINT or SIGTERM."""
    if record_timings is not None:
        folder = record_timings.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise click.BadParameter(
                f"{folder} is not a writable directory", param_hint="--record-timings"
            )
    # Options left at their default take the personality's; asked by source, not by value.
    context = click.get_current_context()
    if context.get_parameter_source("keepalive_timeout") is ParameterSource.DEFAULT:
        keepalive_timeout = None
    if context.get_parameter_source("http_threads") is ParameterSource.DEFAULT:
        http_threads = None
    config = MockConfig(
        model=model,
        tokenizer=tokenizer,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        output_len=output_len,
        startup_delay_s=startup_delay,
        error_rate=error_rate,
        seed=seed,
        max_model_len=max_model_len,
        record_timings=record_timings,
        unavailable_for_s=unavailable_for,
        empty_model_list=empty_model_list,
        personality=personality,
        keepalive_timeout_s=keepalive_timeout,
        http_threads=http_threads,
        lora_names=lora_names,
        embedding_dim=embedding_dim,
        spec_decode_draft_tokens=spec_decode_draft_tokens,
    )
    try:
        uvloop.run(serve(config, host, port))
    except (TokenizerLoadError, TimingsSaveError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
