"""The `loadgen` command line: `loadgen run`, a drop-in for `vllm bench serve`, and `mock-server`.

Like upstream's parser, every flag also works with underscores (``--max_concurrency 8``), and
``--header`` takes several space-separated values after one flag. A `vllm bench serve` flag
that loadgen does not implement yet exits 2 with ``not supported yet: --flag``; none is ignored.

Over 500 lines because each of the ~120 options is still declared here and again in
``RunConfig``; issue 13's flag table (one declaration per flag, click options derived from it)
shrinks it and splits the commands into a ``cli/`` package.
"""

from __future__ import annotations

import math
import sys
import uuid

import click
import orjson

from loadgen import __version__
from loadgen.calibrate import calibrate_command
from loadgen.config import (
    OUTPUT_LEN_TARGETS,
    SUPPORTED_DATASETS,
    ConfigError,
    InputError,
    RunConfig,
    available_cores,
    flag_name,
)
from loadgen.mock.command import mock_server_command
from loadgen.mock.process import MockServerError
from loadgen.payloads import UPSTREAM_BACKENDS
from loadgen.run.fanout import FanoutError
from loadgen.run.runner import RunFailed, run
from loadgen.schedule import RAMP_UP_STRATEGIES
from loadgen.server.errors import ServerError
from loadgen.text.chat_template import ChatTemplateError
from loadgen.text.tokenizer import TokenizerLoadError
from loadgen.vllm_flags import HELP_GROUPS, VLLM_BENCH_SERVE_FLAGS

MULTI_VALUE_FLAGS = (
    "--header",
    "--goodput",
    "--metadata",
    "--lora-modules",
)  # nargs "*" or "+" upstream
ONE_OR_MORE_FLAGS = ("--goodput", "--lora-modules")  # nargs "+": at least one value
GOODPUT_METRICS = ("ttft", "tpot", "e2el")
# Options whose raw values are parsed before they reach RunConfig.
PARSED_OPTIONS = (
    "header", "extra_body", "chat_template_kwargs", "workers", "goodput", "metadata",
    "lora_modules",
)  # fmt: skip
UPSTREAM_DATASETS = (
    "sharegpt", "burstgpt", "sonnet", "random", "random-mm", "random-rerank", "hf", "custom",
    "custom_audio", "custom_image", "prefix_repetition", "spec_bench", "speed_bench",
    "timed_trace",
)  # fmt: skip


def normalize_argv(args: list[str], known: set[str]) -> list[str]:
    """Rewrite argv the way upstream's FlexibleArgumentParser reads it.

    ``--a_b`` becomes ``--a-b``; ``--header k=v k2=v2`` becomes one ``--header`` per value;
    a `vllm bench serve` flag that is not in ``known`` is refused as not supported yet.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.extend(args[i - 1 :])
            break
        if not arg.startswith("--"):
            out.append(arg)
            continue
        name, eq, value = arg.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if name not in known and name in VLLM_BENCH_SERVE_FLAGS:
            raise click.UsageError(f"not supported yet: {name}")
        if name in MULTI_VALUE_FLAGS and not eq:
            first = i
            while i < len(args) and not args[i].startswith("-"):
                out += [name, args[i]]
                i += 1
            if i == first and name in ONE_OR_MORE_FLAGS:
                raise click.UsageError(f"{name} expects at least one value")
            continue
        out.append(name + eq + value)
    return out


class VllmCompatibleCommand(click.Command):
    """A click command that parses argv as `vllm bench serve` does (see normalize_argv)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, normalize_argv(args, self.flag_names()))

    def flag_names(self) -> set[str]:
        """Every spelling the options accept (``--self-timed`` and ``--no-self-timed``)."""
        names: set[str] = set()
        for param in self.params:
            names.update(getattr(param, "opts", []), getattr(param, "secondary_opts", []))
        return names

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Options in upstream's sections (HELP_GROUPS), then the flags not built yet."""
        records = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.opts[0] if param.opts else param.name] = record
        grouped = {flag for flags in HELP_GROUPS.values() for flag in flags}
        with formatter.section("Options"):
            formatter.write_dl([r for flag, r in records.items() if flag not in grouped])
        for title, flags in HELP_GROUPS.items():
            with formatter.section(title):
                formatter.write_dl([records[flag] for flag in flags])
        with formatter.section("vllm bench serve flags not supported yet (they exit 2)"):
            line = ""
            for flag in sorted(VLLM_BENCH_SERVE_FLAGS - self.flag_names()):  # never split one
                if line and len(line) + 1 + len(flag) > formatter.width - formatter.current_indent:
                    formatter.write_text(line)
                    line = flag
                else:
                    line = f"{line} {flag}".strip()
            formatter.write_text(line)


def _parse_json(value: str | None, flag: str) -> dict | None:
    if value is None:
        return None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON ({exc})", param_hint=flag) from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint=flag)
    return parsed


def _parse_headers(items: tuple[str, ...]) -> dict[str, str]:
    headers = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise click.BadParameter(
                f"'{item}': invalid header format, use KEY=VALUE", param_hint="--header"
            )
        headers[key.strip()] = value.strip()
    return headers


def _parse_metadata(items: tuple[str, ...]) -> dict[str, str] | None:
    if not items:
        return None
    metadata = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise click.BadParameter(f"'{item}': use KEY=VALUE", param_hint="--metadata")
        metadata[key.strip()] = value.strip()
    return metadata


def _parse_goodput(items: tuple[str, ...]) -> dict[str, float] | None:
    """Upstream's SLO pairs ``ttft:300 tpot:20`` (ms), with its messages."""
    if not items:
        return None
    slos: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        try:
            if not sep or ":" in value:
                raise ValueError
            slos[name] = float(value)
        except ValueError:
            raise click.BadParameter(
                "Invalid format found for service level objectives. Specify service level "
                'objectives for goodput as "KEY:VALUE" pairs, where the key is a metric name, '
                "and the value is a number in milliseconds.",
                param_hint="--goodput",
            ) from None
        if name not in GOODPUT_METRICS:
            raise click.BadParameter(
                f"Invalid metric name found, {name}: {slos[name]}. The service level objective "
                f"name should be one of {list(GOODPUT_METRICS)}.",
                param_hint="--goodput",
            )
        if slos[name] < 0:
            raise click.BadParameter(
                f"Invalid value found, {name}: {slos[name]}. The service level objective value "
                "should be non-negative.",
                param_hint="--goodput",
            )
    return slos


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="loadgen")
def cli() -> None:
    """loadgen: a multi-process benchmark client for OpenAI-compatible inference servers."""


@cli.command("run", cls=VllmCompatibleCommand)
@click.option(
    "--backend",
    type=click.Choice(UPSTREAM_BACKENDS),
    default="openai",
    show_default=True,
    help="Request format: openai and vllm (completions), openai-chat, and the pooling backends "
    "(embeddings, pooling, rerank); openai-audio is not supported yet.",
)
@click.option("--base-url", default=None, help="Server base URL; overrides --host/--port.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--endpoint", default="/v1/completions", show_default=True, help="API path.")
@click.option("--insecure", is_flag=True, help="Do not check the server's TLS certificate.")
@click.option(
    "--header",
    "header",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra HTTP header on every request; several values may follow one flag.",
)
@click.option(
    "--model", default=None, help="Model name; default: the first model of the server's /v1/models."
)
@click.option("--served-model-name", default=None, help="The model field sent (default --model).")
@click.option(
    "--tokenizer",
    default=None,
    help="tokenizer.json, a directory holding one, or a Hugging Face id (default --model).",
)
@click.option(
    "--tokenizer-mode",
    default="auto",
    show_default=True,
    help="auto or hf: a Hugging Face tokenizer.json (other upstream modes are not supported yet).",
)
@click.option(
    "--trust-remote-code",
    is_flag=True,
    help="Accepted for upstream's scripts: loadgen reads tokenizer.json only and runs no "
    "tokenizer code, so there is nothing to trust.",
)
@click.option(
    "--skip-tokenizer-init",
    is_flag=True,
    help="No client-side tokenizer: the dataset is built with the server's /tokenize, and "
    "tokenizer_id, token throughputs and the TTFT/TPOT/ITL sections go, as upstream.",
)
@click.option(
    "--dataset-name",
    type=click.Choice(UPSTREAM_DATASETS),
    default="random",
    show_default=True,
    help=f"Built so far: {', '.join(SUPPORTED_DATASETS)} (hf: its text datasets); the others "
    "exit 2.",
)
@click.option(
    "--dataset-path",
    default=None,
    help="custom: a .jsonl file of prompts; sharegpt: the ShareGPT JSON file; spec_bench: "
    "Spec-Bench's question.jsonl; timed_trace: a JSONL trace; sonnet: a text of poem lines.",
)
@click.option(
    "--disable-shuffle",
    is_flag=True,
    help="custom, sharegpt: keep the file's order (no seeded shuffle).",
)
@click.option(
    "--no-oversample",
    is_flag=True,
    help="custom, sharegpt: send only the file's prompts when it has fewer than --num-prompts.",
)
@click.option(
    "--skip-chat-template",
    is_flag=True,
    help="custom: send prompts as written, without the tokenizer's chat template.",
)
@click.option("--hf-name", default=None, help="hf: the hub id a local copy stands for.")
@click.option("--hf-split", default=None, help="hf: the split (default: the dataset's).")
@click.option("--hf-subset", default=None, help="hf: the subset (config) name.")
@click.option(
    "--hf-output-len",
    type=int,
    default=None,
    help="hf: max_tokens of every request (default: the dataset's).",
)
@click.option(
    "--no-stream", is_flag=True, help="hf: download the whole dataset instead of streaming it."
)
@click.option(
    "--blazedit-min-distance",
    type=float,
    default=0.0,
    show_default=True,
    help="hf Blazedit: skip rows whose normalized edit distance is below this.",
)
@click.option(
    "--blazedit-max-distance",
    type=float,
    default=1.0,
    show_default=True,
    help="hf Blazedit: skip rows whose normalized edit distance is above this.",
)
@click.option(
    "--spec-bench-output-len",
    type=int,
    default=256,
    show_default=True,
    help="spec_bench: max_tokens of every request.",
)
@click.option(
    "--spec-bench-category",
    default=None,
    help="spec_bench: only the questions of this category (default: all).",
)
@click.option(
    "--sonnet-input-len",
    type=int,
    default=550,
    show_default=True,
    help="sonnet: most tokens of a templated prompt.",
)
@click.option(
    "--sonnet-output-len",
    type=int,
    default=150,
    show_default=True,
    help="sonnet: max_tokens of every request.",
)
@click.option(
    "--sonnet-prefix-len",
    type=int,
    default=200,
    show_default=True,
    help="sonnet: tokens of the poem's first lines every prompt starts with.",
)
@click.option(
    "--timed-trace-chunk-hash-size",
    type=int,
    default=16,
    show_default=True,
    help="timed_trace: prompt tokens each hash id stands for.",
)
@click.option(
    "--timed-trace-sec-multiplier",
    type=float,
    default=1.0,
    show_default=True,
    help="timed_trace: multiplies the timestamps into seconds (0.001 for milliseconds).",
)
@click.option(
    "--timed-trace-label-timestamp",
    default="timestamp",
    show_default=True,
    help="timed_trace: the field holding a request's timestamp.",
)
@click.option(
    "--timed-trace-label-input-length",
    default="input_length",
    show_default=True,
    help="timed_trace: the field holding a request's input length.",
)
@click.option(
    "--timed-trace-label-output-length",
    default="output_length",
    show_default=True,
    help="timed_trace: the field holding a request's output length.",
)
@click.option(
    "--timed-trace-label-hash-ids",
    default="hash_ids",
    show_default=True,
    help="timed_trace: the field holding a request's prompt hash ids.",
)
@click.option(
    "--self-timed/--no-self-timed",
    default=None,
    help="timed_trace: send at the trace's timestamps (the default) or at --request-rate.",
)
@click.option(
    "--custom-ensure-client-side-data",
    is_flag=True,
    help="custom_image: read local and HTTP(S) images here and send them inline (PNG data URLs).",
)
@click.option(
    "--chat-template-kwargs",
    default=None,
    help="JSON object passed to the chat template (custom), e.g. '{\"thinking\": true}'.",
)
@click.option("--input-len", type=int, default=None, help="Sets --random-input-len.")
@click.option(
    "--output-len",
    type=int,
    default=None,
    help="Sets the output length of every dataset ("
    + ", ".join(map(flag_name, OUTPUT_LEN_TARGETS))
    + ").",
)
@click.option(
    "--sharegpt-output-len",
    type=int,
    default=None,
    help="sharegpt: max_tokens per request instead of each completion's token count.",
)
@click.option(
    "--custom-output-len",
    type=int,
    default=256,
    show_default=True,
    help="custom: max_tokens per request; -1 takes each line's output_tokens.",
)
@click.option("--random-input-len", type=int, default=1024, show_default=True)
@click.option("--random-output-len", type=int, default=128, show_default=True)
@click.option(
    "--random-range-ratio",
    default="0.0",
    show_default=True,
    help='A ratio r in [0, 1), or JSON {"input": r1, "output": r2}.',
)
@click.option("--random-prefix-len", type=int, default=0, show_default=True)
@click.option(
    "--random-batch-size",
    type=int,
    default=1,
    show_default=True,
    help="random, random-rerank: texts per request (pooling backends only).",
)
@click.option(
    "--prefix-repetition-prefix-len",
    type=int,
    default=256,
    show_default=True,
    help="prefix_repetition: tokens of each shared prefix.",
)
@click.option(
    "--prefix-repetition-suffix-len",
    type=int,
    default=256,
    show_default=True,
    help="prefix_repetition: tokens after the prefix, different in every prompt.",
)
@click.option(
    "--prefix-repetition-num-prefixes",
    type=int,
    default=10,
    show_default=True,
    help="prefix_repetition: prefixes, each shared by --num-prompts // this many prompts.",
)
@click.option(
    "--prefix-repetition-output-len",
    type=int,
    default=128,
    show_default=True,
    help="prefix_repetition: max_tokens of every request.",
)
@click.option(
    "--random-mm-base-items-per-request",
    type=int,
    default=1,
    show_default=True,
    help="random-mm: images per request, before the range ratio.",
)
@click.option(
    "--random-mm-num-mm-items-range-ratio",
    type=float,
    default=0.0,
    show_default=True,
    help="random-mm: r in [0, 1]; images per request from [floor(n(1-r)), ceil(n(1+r))].",
)
@click.option(
    "--random-mm-limit-mm-per-prompt",
    default='{"image": 255, "video": 1}',
    show_default=True,
    help="random-mm: JSON caps per modality.",
)
@click.option(
    "--random-mm-bucket-config",
    default="{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}",
    show_default=True,
    help="random-mm: {(height, width, frames): probability}; frames > 1 (video) is not built.",
)
@click.option(
    "--enable-multimodal-chat",
    is_flag=True,
    help="random-mm: build the chat message with the images in the dataset (the same message "
    "is sent either way).",
)
@click.option(
    "--no-reranker",
    is_flag=True,
    help="random-rerank: the model scores by embeddings, not as a native reranker.",
)
@click.option("--num-prompts", type=int, default=1000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--request-rate",
    type=float,
    default=math.inf,
    show_default=True,
    help="Requests per second; inf sends all at t0.",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="Gamma shape of the arrival gaps; 1 is Poisson.",
)
@click.option(
    "--max-concurrency",
    type=int,
    default=None,
    help="Most requests in flight at once, across all workers.",
)
@click.option(
    "--ramp-up-strategy",
    type=click.Choice(RAMP_UP_STRATEGIES),
    default=None,
    help="Ramp the request rate per request from --ramp-up-start-rps to --ramp-up-end-rps "
    "over the run; leave --request-rate at inf.",
)
@click.option(
    "--ramp-up-start-rps", type=int, default=None, help="Ramp-up: the first request's rate."
)
@click.option("--ramp-up-end-rps", type=int, default=None, help="Ramp-up: the last request's rate.")
@click.option("--ignore-eos", is_flag=True, help="Send ignore_eos (always on for random).")
@click.option("--logprobs", type=int, default=None, help="logprobs sent with completions.")
@click.option(
    "--use-beam-search",
    is_flag=True,
    help="Accepted as upstream accepts it; it has no effect there either (warns).",
)
@click.option("--extra-body", default=None, help="JSON object merged into every request body.")
@click.option(
    "--request-id-prefix", default=None, help="x-request-id prefix (default bench-<8 hex>-)."
)
@click.option("--temperature", type=float, default=None, help="temperature sent.")
@click.option("--top-p", type=float, default=None, help="top_p sent with every request.")
@click.option("--top-k", type=int, default=None, help="top_k sent with every request.")
@click.option("--min-p", type=float, default=None, help="min_p sent with every request.")
@click.option("--frequency-penalty", type=float, default=None, help="frequency_penalty sent.")
@click.option("--presence-penalty", type=float, default=None, help="presence_penalty sent.")
@click.option(
    "--repetition-penalty",
    type=float,
    default=None,
    help="repetition_penalty sent (completions carry 1.0 otherwise).",
)
@click.option(
    "--goodput",
    multiple=True,
    metavar="KEY:VALUE",
    help="SLOs in ms for goodput (ttft, tpot, e2el); several values may follow one flag.",
)
@click.option(
    "--lora-modules",
    multiple=True,
    metavar="NAME",
    help="LoRA adapters; each request names one as its model. Several may follow one flag.",
)
@click.option(
    "--lora-assignment",
    type=click.Choice(["random", "round-robin"]),
    default="random",
    show_default=True,
    help="How requests get their adapter: seeded random choice or round-robin.",
)
@click.option(
    "--profile",
    is_flag=True,
    help="POST /start_profile before the run and /stop_profile after it (the server must have "
    "profiling enabled).",
)
@click.option("--save-result", is_flag=True, help="Write the result JSON.")
@click.option(
    "--append-result", is_flag=True, help="Append the result JSON to the file as one line."
)
@click.option("--label", default=None, help="JSON label and file-name prefix (default backend).")
@click.option(
    "--metadata",
    multiple=True,
    metavar="KEY=VALUE",
    help="String fields added to the result JSON; several values may follow one flag.",
)
@click.option("--save-detailed", is_flag=True, help="Keep per-request arrays in the JSON.")
@click.option("--result-dir", default=None, help="Directory of the result file (created).")
@click.option("--result-filename", default=None, help="Name of the result file.")
@click.option(
    "--probe-request-rate",
    type=float,
    default=0.0,
    show_default=True,
    help="Single-token probes per second, one at a time beside the run and outside "
    "--max-concurrency; their E2EL is reported apart (0: none).",
)
@click.option(
    "--plot-timeline",
    is_flag=True,
    help="Write NAME.timeline.html beside the result file: each request's TTFT and ITLs "
    "(needs the [plot] extra).",
)
@click.option(
    "--timeline-itl-thresholds",
    default="25,50",
    show_default=True,
    help="Two ITLs in ms that colour the timeline's bars green, orange and red.",
)
@click.option(
    "--plot-dataset-stats",
    is_flag=True,
    help="Write NAME.dataset_stats.png beside the result file: the prompt and output token "
    "counts (needs the [plot] extra).",
)
@click.option("--disable-tqdm", is_flag=True, help="No progress bar.")
@click.option(
    "--percentile-metrics",
    default=None,
    help="Comma list of ttft,tpot,itl,e2el,client_queue_time,"
    "e2el_including_client_queue (default ttft,tpot,itl).",
)
@click.option(
    "--metric-percentiles",
    default="99",
    show_default=True,
    help='Comma list of percentiles, e.g. "50,90,99,99.9".',
)
@click.option(
    "--ready-check-timeout-sec",
    type=int,
    default=0,
    show_default=True,
    help="Seconds to wait for the server: model discovery, the server tokenizer and a first "
    "request like the run's are retried until they succeed. 0: one attempt each, and no test "
    "request.",
)
@click.option(
    "--ready-check-interval-sec",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between two tries while waiting for the server.",
)
@click.option(
    "--server-tokenizer-timeout-sec",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds the dataset may take to build through the server's /tokenize and "
    "/detokenize (when no local tokenizer loads) before the run stops with exit 1; also bounds "
    "the alignment of random prompts to the server's tokenizer.",
)
@click.option(
    "--num-warmups",
    type=int,
    default=0,
    show_default=True,
    help="Copies of the first request sent before the timed run (capped by --max-concurrency), "
    "not measured.",
)
@click.option(
    "--workers", type=int, default=None, help="Worker processes (default: one per available core)."
)
@click.option(
    "--mock",
    is_flag=True,
    help="Start the embedded mock server on a free loopback port and run against it.",
)
@click.option(
    "--mock-ttft-ms",
    type=float,
    default=0.0,
    show_default=True,
    help="With --mock: the mock's time to first token.",
)
@click.option(
    "--mock-itl-ms",
    type=float,
    default=0.0,
    show_default=True,
    help="With --mock: the mock's gap between tokens.",
)
@click.pass_context
def run_command(ctx: click.Context, **opts: object) -> None:
    """Benchmark a server; flags, defaults, metrics and result JSON as `vllm bench serve`."""
    if opts["mock"]:
        for flag in ("base_url", "host", "port"):
            if ctx.get_parameter_source(flag) is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(
                    f"--mock starts its own server; drop --{flag.replace('_', '-')}"
                )
    input_len, output_len = opts.pop("input_len"), opts["output_len"]
    config = RunConfig(
        **{k: v for k, v in opts.items() if k not in PARSED_OPTIONS},
        lora_modules=list(opts["lora_modules"]) or None,
        headers=_parse_headers(opts["header"]),
        goodput=_parse_goodput(opts["goodput"]),
        metadata=_parse_metadata(opts["metadata"]),
        extra_body=_parse_json(opts["extra_body"], "--extra-body"),
        chat_template_kwargs=_parse_json(opts["chat_template_kwargs"], "--chat-template-kwargs"),
        workers=opts["workers"] if opts["workers"] is not None else available_cores(),
    )
    if input_len is not None:
        config.random_input_len = input_len
    if output_len is not None:
        for field_name in OUTPUT_LEN_TARGETS:
            setattr(config, field_name, output_len)
    if config.request_id_prefix is None:
        config.request_id_prefix = f"bench-{uuid.uuid4().hex[:8]}-"
    try:
        code = run(config)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except (
        TokenizerLoadError,
        ChatTemplateError,
        InputError,
        ServerError,
        FanoutError,
        MockServerError,
    ) as exc:
        _fail(str(exc))
    except RunFailed as exc:
        _fail(str(exc), exc.exit_code)
    sys.exit(code)


def _fail(message: str, exit_code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(exit_code)


cli.add_command(mock_server_command)
cli.add_command(calibrate_command)


def main() -> None:
    """Console-script entry point."""
    cli()
