"""`loadgen run`: prepare the requests, fan them out to the workers, and report what came back."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import signal
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import numpy as np
from tqdm import tqdm

from loadgen import __version__
from loadgen.alignment import align_to_server_tokenizer
from loadgen.chat_template import load_chat_template
from loadgen.config import (
    ALWAYS_TEMPLATED_DATASETS,
    TEMPLATED_DATASETS,
    RunConfig,
)
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sample import sample_dataset
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.fanout import Collected, ShardPlan, WorkerPool
from loadgen.metrics import (
    BenchmarkMetrics,
    PoolingMetrics,
    RequestResults,
    Timings,
    calculate_metrics,
    calculate_pooling_metrics,
    derive_timings,
    latency_from_intended,
    summarize,
)
from loadgen.mock.process import EmbeddedMockServer
from loadgen.payloads import (
    CHAT_BACKENDS,
    check_endpoint,
    input_sequences,
    lora_assignment,
    serialize_bodies,
)
from loadgen.plots import (
    parse_itl_thresholds,
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)
from loadgen.report import (
    build_result,
    failure_preamble,
    intended_lines,
    plot_lines,
    reported_metrics,
    result_path,
    stats_json,
    summary_lines,
    write_result,
)
from loadgen.schedule import (
    arrival_offsets_s,
    assign_workers,
    ramp_up_offsets_s,
    rps_change_events,
    schedule_hash,
    to_ns,
)
from loadgen.server.client import ServerClient, auth_headers, proxy_for
from loadgen.server.discovery import resolve_model
from loadgen.server.errors import ConnectionLost, ServerUnreachable
from loadgen.server.metrics import (
    diffusion_stats,
    metrics_page,
    parse_diffusion,
    parse_spec_decode,
    spec_decode_stats,
)
from loadgen.server.probes import probe_loop, probe_stats
from loadgen.server.profile import profile
from loadgen.server.ready import check_ready, warm_up
from loadgen.server.retry import with_hint
from loadgen.server_tokenizer import ServerTokenizer
from loadgen.tokenizer import (
    MOCK_MODEL_NAME,
    LocalTokenizer,
    TokenCodec,
    TokenizerLoadError,
    is_local_path,
    load_tokenizer,
)
from loadgen.verdict import measure as client_health
from loadgen.verdict import verdict
from workers.pooling import JSON_BODY, POOLING_FORMS
from workers.protocol import ConnectionStats, WorkerConfig

PREOPEN_LIMIT = 4096  # connections a worker opens before t0, at most
TEMPERATURE_WARNING = (  # upstream's words: users moving from it rely on them
    "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. "
    "The default will be determined on the server side and can be model/API specific. "
    "For the old behavior, include --temperature=0."
)


class RunFailed(Exception):
    """The run ended without a usable measurement, or only partly; exit code attached."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Prepared:
    """The run's requests, ready to shard."""

    model_id: str  # tokenizer / model identity, as upstream's model_id
    model_name: str  # the "model" field sent
    tokenizer_id: str | None  # None with --skip-tokenizer-init
    tokenizer: TokenCodec
    dataset: SampledPrompts
    models: list[str]  # the model each request names (a LoRA adapter with --lora-modules)
    bodies: list[bytes]
    scheduled_ns: np.ndarray

    @property
    def num_requests(self) -> int:
        """Requests to send: --num-prompts, less with a short --no-oversample file, fewer when
        prompts are batched (--random-batch-size, random-rerank)."""
        return len(self.dataset.prompts)


def run(config: RunConfig) -> int:
    """Run a benchmark as configured; return the process exit code."""
    config.validate()
    for warning in config.ignored_flag_warnings():
        print(f"warning: {warning}")
    if (
        not config.pooling
        and config.temperature is None
        and "temperature" not in (config.extra_body or {})
    ):
        print(TEMPERATURE_WARNING)
    is_file = DATASETS[config.dataset_name].path_is_file  # hf: a hub id, or a directory
    if is_file and config.dataset_path is not None and not os.path.isfile(config.dataset_path):
        # Found now rather than after the tokenizer loads and the server is waited for.
        raise ValueError(f"--dataset-path {config.dataset_path}: No such file")
    mock = EmbeddedMockServer(config.mock_ttft_ms, config.mock_itl_ms) if config.mock else None
    try:
        if mock is not None:
            config.base_url = mock.start()
            config.model = config.model or MOCK_MODEL_NAME
        check_endpoint(config.backend, config.api_url)
        return asyncio.run(_run(config))
    finally:
        if mock is not None:
            mock.stop()


async def _run(config: RunConfig) -> int:
    client = ServerClient(config.server_url, auth_headers(config.headers), config.insecure)
    try:
        return await _run_with(config, client)
    finally:
        # Last of all: reporting may still re-tokenize output through the server's tokenizer.
        await client.close()


async def _run_with(config: RunConfig, client: ServerClient) -> int:
    # --num-prompts 0 (every line of a custom file) is not known until the file is read.
    planned = config.num_prompts if config.num_prompts > 0 else config.workers
    num_workers = min(config.workers, planned, config.max_concurrency or config.workers)
    pool = WorkerPool(num_workers)
    pool.start()  # workers import and connect while the dataset is built and the server awaited
    loop = asyncio.get_running_loop()
    preparing = asyncio.current_task()
    timed_run_started = False

    def on_sigint() -> None:
        pool.request_stop()
        if not timed_run_started and preparing is not None:
            preparing.cancel()  # waiting for a server or building a dataset: stop at once

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    finished = False
    try:
        try:
            prepared = await _prepare(config, client)
            if isinstance(prepared.tokenizer, ServerTokenizer):
                prepared.tokenizer.end_build()  # its deadline and progress bar end here
            await check_ready(config, client, prepared.bodies[0])
            prepared = await _align(config, client, prepared)
            await warm_up(config, client, prepared.bodies[0])
            print("Starting main benchmark run...")
            if config.profile:
                await profile(client, "start")
        except asyncio.CancelledError:
            if pool.stop_requested:
                raise RunFailed("interrupted before the run started", 130) from None
            raise
        timed_run_started = True
        print_traffic(config)
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", 130)
        # A short dataset (--no-oversample) or batched prompts may leave a worker idle.
        num_workers = min(num_workers, prepared.num_requests)
        plans = _plan_shards(config, prepared, num_workers)
        progress = Progress(prepared.num_requests, config.disable_tqdm)
        probes = probe_loop(config, client, prepared.model_name, response_form(config))
        counters_before = await metrics_page(client)

        def on_start() -> None:
            progress.start()
            if probes is not None:
                probes.start()  # at t0, as upstream starts its probes with the run

        try:
            collected = await pool.run(
                plans,
                prepared.num_requests,
                config.max_concurrency,
                on_start=on_start,
                on_progress=progress.update,
            )
        finally:
            progress.close()
            probe_results = await probes.stop() if probes is not None else None
        finished = True
        counters_after = await metrics_page(client)
        if config.profile:
            await profile(client, "stop")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        pool.close(graceful=finished)
    if config.pooling:
        output_lens = np.zeros(len(collected.records), dtype=np.int64)
    else:
        output_lens = await asyncio.to_thread(
            resolve_output_lens,
            collected.records,
            collected.texts,
            None if config.skip_tokenizer_init else prepared.tokenizer,
        )
    probe = probe_stats(probe_results) if probe_results is not None else None
    return _report(
        config,
        prepared,
        collected,
        output_lens,
        num_workers,
        probe,
        (counters_before, counters_after),
    )


def print_traffic(config: RunConfig) -> None:
    """Upstream's lines on how requests will be paced, printed as the timed run starts."""
    if config.self_timed_trace:
        print("Self timing is set, using the timestamps from the trace file.")
        return
    distribution = "Poisson process" if config.burstiness == 1.0 else "Gamma distribution"
    if config.ramp_up_strategy is not None:
        print(f"Traffic ramp-up strategy: {config.ramp_up_strategy}.")
        print(
            f"Will increase RPS from {config.ramp_up_start_rps} to "
            f"{config.ramp_up_end_rps} RPS over the duration of the benchmark."
        )
    else:
        print(f"Traffic request rate: {config.request_rate}")
    print(f"Burstiness factor: {config.burstiness} ({distribution})")
    print(f"Maximum request concurrency: {config.max_concurrency}")


async def _prepare(config: RunConfig, client: ServerClient) -> Prepared:
    """Model, tokenizer, dataset, bodies and schedule.

    What needs the server (model discovery, the server tokenizer) waits for it as configured;
    the rest goes on meanwhile: a given --model or --tokenizer lets the tokenizer load and the
    dataset build while the server is still starting.
    """
    model_task = asyncio.ensure_future(resolve_model(config, client))

    async def tokenizer_and_dataset() -> tuple[str | None, TokenCodec, SampledPrompts]:
        if config.skip_tokenizer_init:  # upstream reports tokenizer_id null
            tokenizer_id = None
            print("--skip-tokenizer-init: the dataset is built with the server's /tokenize")
            untemplated = config.skip_chat_template and config.dataset_name in TEMPLATED_DATASETS
            if config.dataset_name in TEMPLATED_DATASETS + ALWAYS_TEMPLATED_DATASETS and not (
                untemplated
            ):
                print("--skip-tokenizer-init: prompts go without the chat template, as upstream")
            tokenizer = await _server_codec(config, client, model_task)
        else:
            tokenizer_id = config.tokenizer or config.model or (await model_task)[1]
            tokenizer = await _load_codec(config, client, tokenizer_id, model_task)
        template = None
        if config.uses_chat_template:  # from the tokenizer's files, also for a server codec
            assert tokenizer_id is not None  # no template with --skip-tokenizer-init
            template = await asyncio.to_thread(load_chat_template, tokenizer_id)
        dataset = await asyncio.to_thread(sample_dataset, config, tokenizer, template)
        return tokenizer_id, tokenizer, dataset

    (model_name, model_id), (tokenizer_id, tokenizer, dataset) = await _all_or_cancel(
        model_task, tokenizer_and_dataset()
    )
    num_requests = len(dataset.prompts)  # --num-prompts stays what was asked, as upstream
    if config.dataset_name == "prefix_repetition" and num_requests < config.num_prompts:
        print(
            f"prefix_repetition: sending {num_requests} requests, "
            f"{num_requests // config.prefix_repetition_num_prefixes} per prefix "
            f"(--num-prompts {config.num_prompts} // {config.prefix_repetition_num_prefixes})"
        )
    if config.no_oversample and num_requests < config.num_prompts:
        print(
            f"--no-oversample: {config.dataset_path} gives {num_requests} prompts; "
            f"sending {num_requests} of the {config.num_prompts} asked for."
        )
    models = (
        lora_assignment(config.lora_modules, num_requests, config.lora_assignment, config.seed)
        if config.lora_modules
        else [model_name] * num_requests
    )
    bodies = _serialize(config, dataset, models)
    if config.self_timed_trace:
        assert dataset.trace_offsets_s is not None
        offsets = dataset.trace_offsets_s
    elif config.ramp_up_strategy is not None:
        offsets = ramp_up_offsets_s(
            num_requests,
            config.ramp_up_strategy,
            config.ramp_up_start_rps,
            config.ramp_up_end_rps,
            config.burstiness,
            config.seed,
            dataset.arrival_rng,
        )
    else:
        offsets = arrival_offsets_s(
            num_requests, config.request_rate, config.burstiness, config.seed, dataset.arrival_rng
        )
    return Prepared(
        model_id, model_name, tokenizer_id, tokenizer, dataset, models, bodies, to_ns(offsets)
    )


def _serialize(config: RunConfig, dataset: SampledPrompts, models: list[str]) -> list[bytes]:
    """Every request body of the dataset, as the workers will send them."""
    return serialize_bodies(
        config.backend,
        models,
        dataset.prompts,
        dataset.output_lens.tolist(),
        logprobs=config.logprobs,
        ignore_eos=config.sends_ignore_eos,
        extra_body=config.body_extras(),
        mm_contents=dataset.mm_contents,
    )


async def _align(config: RunConfig, client: ServerClient, prepared: Prepared) -> Prepared:
    """Upstream's /tokenize re-alignment of random and prefix_repetition prompts, once the
    server is known to answer (loadgen/alignment.py); the bodies are rebuilt if prompts change.
    Prompts built with the server's own tokenizer need none."""
    if isinstance(prepared.tokenizer, ServerTokenizer):
        return prepared
    prompts = prepared.dataset.prompts
    if not DATASETS[config.dataset_name].aligned or not isinstance(prompts[0], str):
        return prepared
    aligned = await align_to_server_tokenizer(
        client,
        prepared.model_name,
        prompts,
        prepared.dataset.prompt_lens.tolist(),
        timeout_s=config.server_tokenizer_timeout_sec,
        progress=not config.disable_tqdm,
    )
    if aligned == prompts:
        return prepared
    dataset = dataclasses.replace(prepared.dataset, prompts=aligned)
    bodies = _serialize(config, dataset, prepared.models)
    return dataclasses.replace(prepared, dataset=dataset, bodies=bodies)


async def _all_or_cancel(*awaitables: Awaitable[Any]) -> list[Any]:
    """Await all concurrently; on the first failure cancel the rest and raise it."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def _load_codec(
    config: RunConfig,
    client: ServerClient,
    tokenizer_id: str,
    model_task: Awaitable[tuple[str, str]],
) -> TokenCodec:
    """The local or hub tokenizer; failing that, for a hub id, the server's tokenizer."""
    try:
        return LocalTokenizer(await asyncio.to_thread(load_tokenizer, tokenizer_id))
    except TokenizerLoadError as exc:
        if is_local_path(tokenizer_id):
            raise
        print(f"Using the server's /tokenize and /detokenize: {exc}", flush=True)
    return await _server_codec(config, client, model_task)


async def _server_codec(
    config: RunConfig, client: ServerClient, model_task: Awaitable[tuple[str, str]]
) -> ServerTokenizer:
    """The server's /tokenize and /detokenize as the tokenizer, waited for as configured."""
    model_name, _ = await model_task
    try:
        tokenizer = await ServerTokenizer.connect(
            client, model_name, config.ready_check_timeout_sec, config.ready_check_interval_sec
        )
    except ConnectionLost:
        raise  # the server answers connections; waiting for it to come up is not the fix
    except ServerUnreachable as exc:
        raise with_hint(exc, config.ready_check_timeout_sec) from None
    print(
        f"Server tokenizer: {tokenizer.form} form, vocabulary size {tokenizer.vocab_size}, "
        f"{tokenizer.num_special_tokens} special token(s) per prompt"
    )
    tokenizer.begin_build(
        config.server_tokenizer_timeout_sec, config.num_prompts, progress=not config.disable_tqdm
    )
    return tokenizer


def _plan_shards(config: RunConfig, prepared: Prepared, num_workers: int) -> list[ShardPlan]:
    owner = assign_workers(prepared.num_requests, num_workers, config.max_concurrency)
    cap = config.max_concurrency or 0
    headers = auth_headers(config.headers)
    plans = []
    for w in range(num_workers):
        indices = np.flatnonzero(owner == w)
        worker_config = WorkerConfig(
            url=config.api_url,
            headers=headers,
            # Upstream's prefix_repetition requests carry no id, so no x-request-id.
            request_id_prefix=None
            if config.dataset_name == "prefix_repetition"
            else config.request_id_prefix,
            # Credits can gather at one worker (up to the whole cap), so each pre-opens that many.
            max_concurrency=cap,
            preopen_url=f"{config.server_url}/v1/models",
            preopen_connections=min(cap or len(indices), len(indices), PREOPEN_LIMIT),
            keep_text="always" if config.save_detailed else "when_no_usage",
            chat=config.backend in CHAT_BACKENDS,
            response_form=response_form(config),
            proxy=proxy_for(config.api_url),
            insecure=config.insecure,
        )
        plans.append(
            ShardPlan(
                config=worker_config,
                bodies=[prepared.bodies[i] for i in indices],
                indices=indices,
                scheduled_ns=prepared.scheduled_ns[indices],
            )
        )
    return plans


def response_form(config: RunConfig) -> str:
    """How the workers read an answer: an SSE stream, or a pooling answer in the form its
    ``encoding_format`` (given with --extra-body) makes it."""
    if not config.pooling:
        return "sse"
    encoding_format = (config.extra_body or {}).get("encoding_format")
    return encoding_format if encoding_format in POOLING_FORMS else JSON_BODY


class Progress:
    """The progress bar, shown from t0 on and advanced as records arrive."""

    def __init__(self, total: int, disabled: bool) -> None:
        self.total = total
        self.disabled = disabled
        self.bar: tqdm | None = None

    def start(self) -> None:
        """Show the bar at t0."""
        if not self.disabled:
            self.bar = tqdm(total=self.total)

    def update(self, finished: int) -> None:
        """Count requests that finished."""
        if self.bar is not None:
            self.bar.update(finished)

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()


def resolve_output_lens(
    records: np.ndarray, texts: dict[int, str], tokenizer: TokenCodec | None
) -> np.ndarray:
    """usage.completion_tokens, or upstream's fallback: re-tokenize the text (or 1 without a
    tokenizer) when the server reported none; 0 for failed requests."""
    success = records["success"].astype(bool)
    out = np.where(success, np.maximum(records["completion_tokens"], 0), 0).astype(np.int64)
    need = np.flatnonzero(success & (out == 0))
    if len(need):
        if tokenizer is None:
            out[need] = 1
        else:
            encoded = tokenizer.encode_batch([texts.get(int(i), "") for i in need])
            out[need] = [len(ids) for ids in encoded]
    return out


def _report(
    config: RunConfig,
    prepared: Prepared,
    collected: Collected,
    output_lens: np.ndarray,
    num_workers: int,
    probe: dict[str, Any] | None = None,
    counters: tuple[str | None, str | None] = (None, None),
) -> int:
    records = collected.records
    success = records["success"].astype(bool)
    prompt_lens = np.where(
        records["prompt_tokens"] >= 0, records["prompt_tokens"], prepared.dataset.prompt_lens
    ).astype(np.int64)
    results = RequestResults(
        success=success,
        arrival_s=records["arrival_ns"] / 1e9,
        send_s=records["send_ns"] / 1e9,
        event_s=collected.event_ns / 1e9,
        event_offsets=collected.event_offsets,
        prompt_lens=prompt_lens,
        output_lens=output_lens,
    )
    ends = records["end_ns"]
    duration_s = max(float(ends.max()) / 1e9 if len(ends) else 0.0, 1e-9)
    timings = derive_timings(results)
    errors = [collected.errors.get(i, "") for i in range(prepared.num_requests)]
    metrics: BenchmarkMetrics | PoolingMetrics
    if config.pooling:  # upstream prints neither failures nor a plot for pooling
        sequences = np.array(
            [input_sequences(config.backend, p) for p in prepared.dataset.prompts], np.int64
        )
        metrics = calculate_pooling_metrics(
            results, timings, sequences, duration_s, config.percentiles()
        )
    else:
        metrics = calculate_metrics(
            results, timings, duration_s, config.percentiles(), goodput_slos_ms=config.goodput
        )
        for line in failure_preamble([e for e in errors if e]):
            print(line)
        for line in plot_lines(results, timings):
            print(line)
    metric_names = reported_metrics(config)
    before, after = counters
    decoding = (
        spec_decode_stats(*(parse_spec_decode(page) if page else None for page in counters)),
        diffusion_stats(
            parse_diffusion(before) if before else None,
            parse_diffusion(after) if after else None,
            duration_s,
        ),
    )
    for line in summary_lines(config, metrics, duration_s, metric_names, probe, decoding):
        print(line)
    from_intended = None
    if paced_rate(config, prepared) is not None:
        ttft_s, e2el_s = latency_from_intended(results, prepared.scheduled_ns / 1e9)
        # A pooling answer has one instant: its TTFT is its E2EL, so only E2EL is shown.
        samples = {"e2el": e2el_s} if config.pooling else {"ttft": ttft_s, "e2el": e2el_s}
        intended = {k: summarize(x, config.percentiles()) for k, x in samples.items()}
        for line in intended_lines(intended):
            print(line)
        from_intended = {k: stats_json(stats) for k, stats in intended.items()}
    connect_ms = records["connect_ns"][records["connect_ns"] > 0] / 1e6
    if len(connect_ms):
        print(
            f"note: {len(connect_ms)} requests opened a new connection during the run "
            f"(p50 {np.median(connect_ms):.2f} ms, max {connect_ms.max():.2f} ms), "
            "inside their TTFT"
        )
    stats = collected.connection_stats
    for line in connection_notes(stats):
        print(line)

    sent = records["arrival_ns"] >= 0
    send_lag_ms = (records["arrival_ns"][sent] - prepared.scheduled_ns[sent]) / 1e6
    health = client_health(
        send_lag_ms,
        collected.loop_lag_ns,
        collected.worker_cpu_ns,
        collected.worker_wall_ns,
        paced_rate(config, prepared) or math.inf,
    )
    client_verdict = verdict(health)
    print(client_verdict)
    loadgen_extra = {
        "version": __version__,
        "workers": num_workers,
        "connections_preopened": stats.preopened_at_t0,
        "connections_closed_before_use": stats.closed_before_use,
        "resent_on_stale_connection": stats.resent,
        "connection_reuse_stopped": stats.reuse_stopped,
        "schedule_sha256": schedule_hash(prepared.scheduled_ns),
        "send_lag_ms": _p50_p99_max(send_lag_ms),
        "from_intended": from_intended,  # None unless the run was paced
        "new_connections_during_run": {
            "count": len(connect_ms),
            "connect_ms": _p50_p99_max(connect_ms),
        },
        "worker_problems": collected.worker_problems,
        "interrupted": collected.interrupted,
        "client": health.to_json(),
        "verdict": client_verdict,  # last, so the result JSON ends with it
    }
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    if config.plot_timeline or config.plot_dataset_stats:  # upstream draws before it saves
        _plot(config, Path(result_path(config, prepared.model_id, date)), results, timings)
    if config.save_result or config.append_result:
        result = build_result(
            config=config,
            date=date,
            model_id=prepared.model_id,
            tokenizer_id=prepared.tokenizer_id,
            duration_s=duration_s,
            metrics=metrics,
            results=results,
            timings=timings,
            start_origin_s=collected.t0_ns / 1e9,
            errors=errors,
            generated_texts=[collected.texts.get(i, "") for i in range(prepared.num_requests)],
            metric_names=metric_names,
            loadgen_extra=loadgen_extra,
            rps_change_events=_rps_change_events(config, prepared, collected.t0_ns),
            probe=probe,
            decoding=decoding,
            server_metrics=(records["server_queue_s"], records["server_ttft_s"]),
        )
        path = result_path(config, prepared.model_id, date)
        write_result(path, result, append=config.append_result)
        print(f"Results written to {path}")
    if collected.interrupted:
        raise RunFailed("interrupted: the results above cover the requests that finished", 130)
    if collected.worker_problems:
        raise RunFailed("the run lost workers: " + "; ".join(collected.worker_problems))
    if metrics.completed == 0:
        first = next((e for e in errors if e), "")
        raise RunFailed(f"every request failed; the first error: {first.splitlines()[0]}")
    return 0


def connection_notes(stats: ConnectionStats) -> list[str]:
    """Console notes on what the server did to the connections, when it did anything."""
    notes = []
    if stats.resent:
        notes.append(
            f"note: {stats.resent} requests were re-sent once on a fresh connection: the server "
            "had closed their pooled connection before reading them (timed from the re-send)"
        )
    if stats.reuse_stopped:
        notes.append(
            "note: the server closes the connection after every response (as llama.cpp's "
            "server does); connections were no longer reused"
        )
    if stats.closed_before_use:
        notes.append(
            f"note: the server closed {stats.closed_before_use} of the "
            f"{stats.preopened_at_t0} connections open at t0 before any request used them"
        )
    return notes


def _plot(config: RunConfig, path: Path, results: RequestResults, timings: Timings) -> None:
    """--plot-timeline and --plot-dataset-stats beside the result file; a figure that cannot be
    drawn is a warning, as upstream, and the results are still written."""
    path.parent.mkdir(parents=True, exist_ok=True)  # --result-dir, as for the result file
    if config.plot_timeline:
        timeline = path.with_suffix(".timeline.html")
        if config.pooling:
            print("warning: --plot-timeline draws token timings; a pooling run has none")
        else:
            try:
                segments = timeline_segments(
                    results.send_s,
                    timings.ttft_s,
                    [timings.itls_of(i).tolist() for i in range(results.num_requests)],
                    results.prompt_lens,
                    results.output_lens,
                    parse_itl_thresholds(config.timeline_itl_thresholds),
                )
                write_timeline_html(
                    segments, timeline, parse_itl_thresholds(config.timeline_itl_thresholds)
                )
                print(f"Timeline plot saved to: {timeline}")
            except Exception as exc:  # a figure is not worth the results
                print(f"warning: Failed to generate timeline plot: {exc}")
    if config.plot_dataset_stats:
        stats = path.with_suffix(".dataset_stats.png")
        try:
            write_dataset_stats_png(results.prompt_lens, results.output_lens, stats)
            print(f"Dataset statistics plot saved to: {stats}")
        except Exception as exc:
            print(f"warning: Failed to generate dataset statistics plot: {exc}")


def paced_rate(config: RunConfig, prepared: Prepared) -> float | None:
    """The highest rate the schedule paces requests at (its send lag is then judged), or None
    for an unpaced run (everything due at once): a finite --request-rate, a ramp-up's end rate,
    or a self-timed trace's mean rate."""
    if config.self_timed_trace:
        span_s = float(prepared.scheduled_ns[-1]) / 1e9
        return prepared.num_requests / span_s if span_s > 0 else None
    if config.ramp_up_strategy is not None:
        return float(config.ramp_up_end_rps or 0) or None
    return None if math.isinf(config.request_rate) else config.request_rate


def _rps_change_events(
    config: RunConfig, prepared: Prepared, t0_ns: int
) -> list[dict[str, Any]] | None:
    """Upstream's ``rps_change_events`` of a ramp-up run, stamped from the schedule; else None."""
    if config.ramp_up_strategy is None:
        return None
    # t0 is a perf_counter instant; its wall-clock time is now less the time elapsed since.
    t0_wall = datetime.now() - timedelta(microseconds=(perf_counter_ns() - t0_ns) / 1e3)
    return rps_change_events(
        config.ramp_up_strategy,
        config.ramp_up_start_rps,
        config.ramp_up_end_rps,
        prepared.scheduled_ns / 1e9,
        t0_wall,
    )


def _p50_p99_max(lag_ms: np.ndarray) -> dict[str, float]:
    """p50, p99 and max of a sample in ms (zeros when it is empty)."""
    if len(lag_ms) == 0:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    p50, p99 = np.percentile(lag_ms, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(lag_ms.max())}
