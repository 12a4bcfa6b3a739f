"""Build the dataset the flags ask for: the registry's loader and sampler, given the flags they
name (blocking; the runner calls it in a thread while the server is waited for)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from loadgen.chat_template import ChatTemplate
from loadgen.config import ConfigError, RunConfig
from loadgen.datasets.errors import FlagError
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.tokenizer import TokenCodec


def sample_dataset(
    config: RunConfig, tokenizer: TokenCodec, chat_template: ChatTemplate | None = None
) -> SampledPrompts:
    """Read (for a file dataset) and sample the configured dataset, templating its prompts when
    ``chat_template`` is given; blocking, run in a thread.

    Raises ConfigError for a flag value the dataset cannot use, and ValueError naming the file
    for a file dataset whose contents cannot be used.
    """
    dataset = DATASETS[config.dataset_name]
    context: dict[str, Any] = {
        "path": config.dataset_path,
        "tokenizer": tokenizer,
        "chat_template": chat_template,
    }
    try:
        if dataset.load is not None:
            assert config.dataset_path is not None  # validate() checked
            context["rows"] = _call(dataset.load, config, context)
        return _call(dataset.sample, config, context)
    except FlagError as exc:
        raise ConfigError(str(exc)) from None


def _call(step: Callable[..., Any], config: RunConfig, context: dict[str, Any]) -> Any:
    """``step`` given the context values and the config fields its parameters name."""
    return step(
        **{
            name: context[name] if name in context else getattr(config, name)
            for name in inspect.signature(step).parameters
        }
    )
