"""Preparation: the model, the tokenizer, the dataset, the request bodies and the schedule.

What needs the server (model discovery, the server tokenizer) waits for it as configured; the
rest goes on meanwhile. ``align`` re-aligns prompts to the server's tokenizer once it answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loadgen.audio_payloads import audio_bodies
from loadgen.backends import BACKENDS
from loadgen.config import (
    ALWAYS_TEMPLATED_DATASETS,
    TEMPLATED_DATASETS,
    ConfigError,
    InputError,
    RunConfig,
)
from loadgen.datasets.conversations import Turns, sharegpt_conversations, synthetic_conversations
from loadgen.datasets.errors import FlagError
from loadgen.datasets.max_model_len import keep_fitting, keep_fitting_turns, shortest_need
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sample import sample_dataset_cached
from loadgen.datasets.sampled_prompts import SampledPrompts, texts_of
from loadgen.datasets.sharegpt import load_sharegpt_entries
from loadgen.payloads import lora_assignment, serialize_bodies, turn_bodies
from loadgen.schedule import arrival_offsets_s, ramp_up_offsets_s, to_ns
from loadgen.server.alignment import align_to_server_tokenizer
from loadgen.server.client import ServerClient
from loadgen.server.discovery import resolve_model, served_models, unknown_model
from loadgen.server.errors import ConnectionLost, NotRetryable, ServerUnreachable
from loadgen.server.retry import with_hint
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.session.build_progress import BuildProgress
from loadgen.session.heap import release_freed_heap
from loadgen.session.threads import in_daemon_thread, niced
from loadgen.terminal import printable
from loadgen.text.chat_template import ChatTemplate, ChatTemplateError, load_chat_template
from loadgen.text.tokenizer import (
    LocalTokenizer,
    TokenCodec,
    TokenizerLoadError,
    is_local_path,
    load_tokenizer,
)
from workers.conversations import split_turn_body

log = logging.getLogger(__name__)


@dataclass
class PromptSource:
    """What a dataset is drawn with, made once: the tokenizer, its chat template, and the rows
    files gave (``sample_dataset``'s ``read``), so that a campaign draws each run's prompts
    without loading the tokenizer or reading a file again."""

    tokenizer: TokenCodec
    template: ChatTemplate | None
    read: dict[Any, Any] = field(default_factory=dict)


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
    turns: Turns | None = None  # --multi-turn: each request's conversation, turn, think time
    source: PromptSource | None = None  # what it was drawn with (``redraw`` draws again)
    # --duration's blocks: each request's input sequences, as the prompts are not kept
    input_sequences: np.ndarray | None = None
    realigned: bool = False  # ``align`` changed prompts: the server's tokenizer is another

    @property
    def first_body(self) -> bytes:
        """The first request's body as the server would get it (the ready check and warm-ups
        send it): a turn's without its history markers."""
        if self.turns is None:
            return self.bodies[0]
        head, user, tail = split_turn_body(self.bodies[0])
        return head + user + tail

    @property
    def num_requests(self) -> int:
        """Requests to send: --num-prompts, less with a short --no-oversample file, fewer when
        prompts are batched (--random-batch-size, random-rerank)."""
        return len(self.dataset.prompts)


async def prepare(config: RunConfig, client: ServerClient) -> Prepared:
    """Model, tokenizer, dataset, bodies and schedule.

    What needs the server (model discovery, the server tokenizer) waits for it as configured;
    the rest goes on meanwhile: a given --model or --tokenizer lets the tokenizer load and the
    dataset build while the server is still starting.
    """
    model_task = asyncio.ensure_future(resolve_model(config, client))

    async def tokenizer_and_dataset() -> tuple[
        str | None, PromptSource, SampledPrompts, Turns | None
    ]:
        tokenizer: TokenCodec
        if config.skip_tokenizer_init:  # upstream reports tokenizer_id null
            tokenizer_id = None
            log.info("--skip-tokenizer-init: the dataset is built with the server's /tokenize")
            untemplated = config.skip_chat_template and config.dataset_name in TEMPLATED_DATASETS
            if config.dataset_name in TEMPLATED_DATASETS + ALWAYS_TEMPLATED_DATASETS and not (
                untemplated
            ):
                log.info("--skip-tokenizer-init: prompts go without the chat template, as upstream")
            tokenizer = await _server_codec(config, client, model_task)
        else:
            tokenizer_id = config.tokenizer or config.model or (await model_task)[1]
            tokenizer = await _load_codec(config, client, tokenizer_id, model_task)
        template = None
        if config.uses_chat_template:  # from the tokenizer's files, also for a server codec
            assert tokenizer_id is not None  # no template with --skip-tokenizer-init
            template = await in_daemon_thread(load_chat_template, tokenizer_id)
        source = PromptSource(tokenizer, template)
        dataset, turns = await build_dataset(config, source)
        return tokenizer_id, source, dataset, turns

    (model_name, model_id), (tokenizer_id, source, dataset, turns) = await _all_or_cancel(
        model_task, tokenizer_and_dataset()
    )
    return requests_of(config, (model_name, model_id, tokenizer_id), source, dataset, turns)


async def redraw(config: RunConfig, client: ServerClient, prepared: Prepared) -> Prepared:
    """The requests ``config`` asks for (a campaign run's: its point's values and its --seed),
    drawn with what ``prepared`` was made with: no tokenizer loaded, no file read again, the
    server not waited for; aligned to the server's tokenizer as ``prepared`` was. What a single
    run with these flags would send. Its notes are the first draw's: logged at debug level."""
    assert prepared.source is not None  # made by prepare()
    dataset, turns = await build_dataset(config, prepared.source, quiet=True)
    names = (prepared.model_name, prepared.model_id, prepared.tokenizer_id)
    drawn = requests_of(config, names, prepared.source, dataset, turns, quiet=True)
    return await align(config, client, drawn, quiet=True)


async def build_dataset(
    config: RunConfig, source: PromptSource, *, quiet: bool = False, nice: int = 0
) -> tuple[SampledPrompts, Turns | None]:
    """The dataset (and --multi-turn's conversations) the flags ask for, built in a thread
    from ``source``; ``quiet``: no progress line, its notes at debug level; ``nice``: the
    thread's niceness (--duration's blocks, drawn while the run goes)."""
    progress = BuildProgress(
        f"Building the {config.dataset_name} dataset", disabled=config.disable_tqdm or quiet
    )
    notes: list[str] = []

    def build(build_config: RunConfig) -> SampledPrompts:
        built = sample_dataset_cached(
            build_config, source.tokenizer, source.template, None, progress.report, source.read
        )
        notes.extend(built.notes)  # read from or stored in the dataset cache, or why not
        return built.dataset

    def build_all() -> tuple[SampledPrompts, Turns | None]:
        try:
            if config.multi_turn:
                return conversations(config, build, source)
            return build(config), None
        finally:
            # A build frees most of what it allocated (a tokenizer's encodings, in the threads'
            # arenas too): the pages go back here, off the loop, so that a --duration run's
            # blocks leave the RSS level over hours (loadgen/session/heap.py).
            release_freed_heap()

    try:
        work = niced(build_all, nice) if nice else build_all
        dataset, turns = await progress.show_while(in_daemon_thread(work))
    except FlagError as exc:  # a flag's value the dataset cannot use: a usage error
        raise ConfigError(str(exc)) from None
    except ChatTemplateError:
        raise
    except ValueError as exc:  # the dataset modules name the file whose contents are bad
        raise InputError(str(exc)) from None
    for note in notes:
        log.log(logging.DEBUG if quiet else logging.INFO, note)
    return dataset, turns


def requests_of(
    config: RunConfig,
    names: tuple[str, str, str | None],
    source: PromptSource,
    dataset: SampledPrompts,
    turns: Turns | None,
    *,
    quiet: bool = False,
) -> Prepared:
    """The prepared requests of a built dataset: fitted to --max-model-len, each one's model
    (a LoRA adapter), bodies and schedule. ``names``: the model sent, its id and the
    tokenizer's; ``quiet``: the notes at debug level."""
    say = log.debug if quiet else log.info
    model_name, model_id, tokenizer_id = names
    num_requests = len(dataset.prompts)  # --num-prompts stays what was asked, as upstream
    if dataset.length_mismatches:
        say(
            f"note: {dataset.length_mismatches} of {num_requests} prompts are not their target "
            "length once their text is encoded again (tokens merge where pieces join); each "
            "one's prompt_len is the length it has"
        )
    if config.dataset_name == "prefix_repetition" and num_requests < config.num_prompts:
        say(
            f"prefix_repetition: sending {num_requests} requests, "
            f"{num_requests // config.prefix_repetition_num_prefixes} per prefix "
            f"(--num-prompts {config.num_prompts} // {config.prefix_repetition_num_prefixes})"
        )
    if config.no_oversample and num_requests < config.num_prompts:
        say(
            f"--no-oversample: {config.dataset_path} gives {num_requests} prompts; "
            f"sending {num_requests} of the {config.num_prompts} asked for."
        )
    if config.max_model_len is not None:
        dataset, turns = fit_max_model_len(dataset, turns, config.max_model_len, say)
        num_requests = len(dataset.prompts)
    models = (
        lora_assignment(config.lora_modules, num_requests, config.lora_assignment, config.seed)
        if config.lora_modules
        else [model_name] * num_requests
    )
    bodies = serialize(config, dataset, models, turns)
    starts = turns.num_conversations if turns is not None else num_requests
    if config.self_timed_trace:
        assert dataset.trace_offsets_s is not None
        offsets = dataset.trace_offsets_s
    elif (ramp_up := config.ramp_up) is not None:
        offsets = ramp_up_offsets_s(
            starts,
            ramp_up.strategy,
            ramp_up.start_rps,
            ramp_up.end_rps,
            config.burstiness,
            config.seed,
            dataset.arrival_rng,
        )
    else:
        offsets = arrival_offsets_s(
            starts, config.rate, config.burstiness, config.seed, dataset.arrival_rng
        )
    scheduled_ns = to_ns(offsets)
    if turns is not None:  # a conversation starts on the schedule; its turns follow its start
        scheduled_ns = scheduled_ns[turns.conversation]
    return Prepared(
        model_id,
        model_name,
        tokenizer_id,
        source.tokenizer,
        dataset,
        models,
        bodies,
        scheduled_ns,
        turns,
        source,
    )


def fit_max_model_len(
    dataset: SampledPrompts,
    turns: Turns | None,
    max_model_len: int,
    say: Callable[[str], None] = log.info,
) -> tuple[SampledPrompts, Turns | None]:
    """The Rust client's --max-model-len: the prompts (or conversations' turns) that fit, and
    one line on those dropped; InputError when none is left."""
    rule = "prompt_len + output_len"
    total = len(dataset.prompts)
    if turns is None:
        kept, dropped = keep_fitting(dataset, max_model_len)
        what = f"{dropped} of {total} prompts whose {rule} is"
    else:
        kept, turns, dropped, whole = keep_fitting_turns(dataset, turns, max_model_len)
        rule = "the conversation so far + output_len"
        what = f"{dropped} of {total} turns ({whole} conversations whole) whose {rule} is"
    if dropped == total:
        raise InputError(
            f"--max-model-len {max_model_len}: nothing fits ({rule} <= {max_model_len}); the "
            f"shortest prompt needs {shortest_need(dataset)}"
        )
    if dropped:
        say(f"--max-model-len {max_model_len}: dropped {what} above it; sending {total - dropped}")
    return kept, turns


def conversations(
    config: RunConfig, build: Callable[[RunConfig], SampledPrompts], source: PromptSource
) -> tuple[SampledPrompts, Turns]:
    """--multi-turn's conversations (loadgen/datasets/conversations.py), and one line on them."""
    tokenizer = source.tokenizer
    if config.dataset_name == "sharegpt":
        path = config.dataset_path
        assert path is not None  # validate() checked
        key = ("sharegpt conversations", path)
        if key not in source.read:
            source.read[key] = load_sharegpt_entries(path)
        sampled, turns = sharegpt_conversations(
            source.read[key],
            tokenizer,
            config.num_prompts,
            config.multi_turn_max_turns,
            config.sharegpt_output_len,
            config.seed,
            config.multi_turn_delay_ms,
            config.multi_turn_delay_distribution,
        )
    else:
        sampled, turns = synthetic_conversations(config, build, tokenizer)
    counts = np.bincount(turns.conversation)
    log.info(
        f"Conversations: {len(counts)}, {len(turns.turn)} turns "
        f"({counts.min()} to {counts.max()} per conversation)"
    )
    return sampled, turns


def serialize(
    config: RunConfig, dataset: SampledPrompts, models: list[str], turns: Turns | None = None
) -> list[bytes]:
    """Every request body of the dataset, as the workers will send them."""
    if turns is not None:
        # As the Rust client: only --ignore-eos sends ignore_eos (random's forcing would let a
        # conversation's context grow without bound); random turns ask for min_tokens instead.
        return turn_bodies(
            models,
            texts_of(dataset.prompts),  # a conversation's turns are texts
            dataset.output_lens.tolist(),
            ignore_eos=config.ignore_eos,
            extra_body=config.body_extras(),
            min_tokens=config.dataset_name == "random",
        )
    try:
        return _bodies(config, dataset, models)
    except ValueError as exc:  # a request the backend cannot send (two images for Infinity)
        raise InputError(f"--dataset-path {config.dataset_path}: {exc}") from None


def _bodies(config: RunConfig, dataset: SampledPrompts, models: list[str]) -> list[bytes]:
    if BACKENDS[config.backend].multipart:
        assert dataset.audios is not None  # validate() allows only the audio datasets
        return audio_bodies(
            models,
            dataset.output_lens.tolist(),
            dataset.audios,
            ignore_eos=config.sends_ignore_eos,
            extra_body=config.body_extras(),
        )
    return serialize_bodies(
        config.backend,
        models,
        dataset.prompts,
        dataset.output_lens.tolist(),
        logprobs=config.logprobs,
        ignore_eos=config.sends_ignore_eos,
        extra_body=config.body_extras(),
        mm_contents=dataset.mm_contents,
        chat_messages=dataset.chat_messages,
        request_overrides=dataset.request_overrides,
    )


async def align(
    config: RunConfig, client: ServerClient, prepared: Prepared, *, quiet: bool = False
) -> Prepared:
    """Upstream's /tokenize re-alignment of random and prefix_repetition prompts, once the
    server is known to answer (loadgen/server/alignment.py); the bodies are rebuilt if prompts
    change. Prompts built with the server's own tokenizer need none. ``quiet``: no progress
    bar."""
    if isinstance(prepared.tokenizer, ServerTokenizer) or prepared.turns is not None:
        return prepared  # a conversation's turns are sent as built
    if not DATASETS[config.dataset_name].aligned or not isinstance(
        prepared.dataset.prompts[0], str
    ):
        return prepared
    prompts = texts_of(prepared.dataset.prompts)
    aligned = await align_to_server_tokenizer(
        client,
        prepared.model_name,
        prompts,
        prepared.dataset.prompt_lens.tolist(),
        timeout_s=config.server_tokenizer_timeout_sec,
        progress=not (config.disable_tqdm or quiet),
    )
    if aligned == prompts:
        return prepared
    dataset = dataclasses.replace(prepared.dataset, prompts=aligned)
    bodies = serialize(config, dataset, prepared.models)
    return dataclasses.replace(prepared, dataset=dataset, bodies=bodies, realigned=True)


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
        return LocalTokenizer(await in_daemon_thread(load_tokenizer, tokenizer_id))
    except TokenizerLoadError as exc:
        if is_local_path(tokenizer_id):
            raise
        log.info(f"Using the server's /tokenize and /detokenize: {printable(exc)}")
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
    except NotRetryable as exc:
        served = await served_models(client) if exc.status == 404 else None
        if served and model_name not in served:  # the likeliest 404: a model it does not serve
            raise NotRetryable(unknown_model(model_name, served), exc.status) from None
        raise
    log.info(
        f"Server tokenizer: {tokenizer.form} form, vocabulary size {tokenizer.vocab_size}, "
        f"{tokenizer.num_special_tokens} special token(s) per prompt"
    )
    tokenizer.begin_build(
        config.server_tokenizer_timeout_sec, config.num_prompts, progress=not config.disable_tqdm
    )
    return tokenizer
