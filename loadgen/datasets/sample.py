"""Build the dataset the flags ask for: the registry's loader and sampler, given the flags they
name (blocking; the runner calls it in a thread while the server is waited for), or read it from
the dataset cache."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadgen.datasets.cache import (
    CacheOutcome,
    cache_dir,
    cache_key,
    cached_build,
    tokenizer_digest,
)
from loadgen.datasets.progress import Progress
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec


def sample_dataset(
    config: Any,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None = None,
    progress: Progress | None = None,
    read: dict[Any, Any] | None = None,
) -> SampledPrompts:
    """Read (for a file dataset) and sample the configured dataset, templating its prompts when
    ``chat_template`` is given; blocking, run in a thread. A dataset that can count its
    progress tells ``progress``. ``read``: the rows files gave earlier, by what read them (its
    loader's arguments), so that another draw from the same file (a campaign's next point, with
    another --seed) does not read it again; rows read now are added to it.

    ``config`` is the run's RunConfig (any object with the fields the steps name: datasets do
    not import config). Raises FlagError for a flag value the dataset cannot use, and
    ValueError naming the file for a file dataset whose contents cannot be used.
    """
    dataset = DATASETS[config.dataset_name]
    context: dict[str, Any] = {
        "path": config.dataset_path,
        "tokenizer": tokenizer,
        "chat_template": chat_template,
        "progress": progress,
    }
    if dataset.load is not None:
        assert config.dataset_path is not None  # validate() checked
        context["rows"] = _rows(dataset.load, config, context, read)
    return _call(dataset.sample, config, context)


def sample_dataset_cached(
    config: Any,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None = None,
    directory: Path | None = None,
    progress: Progress | None = None,
    read: dict[Any, Any] | None = None,
) -> CacheOutcome:
    """``sample_dataset``, through the dataset cache (``directory``, by default the user's)
    for a dataset the registry marks ``cached`` built with a local tokenizer, unless
    ``config.dataset_cache`` is off; the outcome's notes say what happened. ``read``: as
    ``sample_dataset``'s."""
    dataset = DATASETS[config.dataset_name]
    # Token-id prompts (--prompt-token-ids) skip the decode -> encode pass the cache saves.
    cacheable = dataset.cached and not getattr(config, "prompt_token_ids", False)
    digest = tokenizer_digest(tokenizer) if config.dataset_cache and cacheable else None
    if digest is None:
        started = time.perf_counter()
        built = sample_dataset(config, tokenizer, chat_template, progress, read)
        return CacheOutcome(built, [], seconds=time.perf_counter() - started)
    key = cache_key(
        config.dataset_name, {name: getattr(config, name) for name in dataset.reads}, digest
    )
    return cached_build(
        directory or cache_dir(),
        key,
        lambda: sample_dataset(config, tokenizer, chat_template, progress, read),
    )


def _rows(
    load: Callable[..., Any], config: Any, context: dict[str, Any], read: dict[Any, Any] | None
) -> Any:
    """The rows ``load`` gives for the config, from ``read`` when the same arguments read them
    before (a list: a stream, as a hub dataset's, is read anew)."""
    arguments = _arguments(load, config, context)
    key = (load.__qualname__, repr(sorted((k, v) for k, v in arguments.items() if k != "progress")))
    if read is not None and key in read:
        return read[key]
    rows = load(**arguments)
    if read is not None and isinstance(rows, list):
        read[key] = rows
    return rows


def _call(step: Callable[..., Any], config: Any, context: dict[str, Any]) -> Any:
    """``step`` given the context values and the config fields its parameters name."""
    return step(**_arguments(step, config, context))


def _arguments(step: Callable[..., Any], config: Any, context: dict[str, Any]) -> dict[str, Any]:
    return {
        name: context[name] if name in context else getattr(config, name)
        for name in inspect.signature(step).parameters
    }
