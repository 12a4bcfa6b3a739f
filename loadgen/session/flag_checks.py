"""The flags checked before anything starts: validated, their warnings printed, a --fail-on key
the result will not hold and a --dataset-path that is not its dataset's file refused in one line
(before the tokenizer loads and the server is waited for)."""

from __future__ import annotations

import dataclasses
import logging
import os

from loadgen.config import ConfigError, InputError, RunConfig
from loadgen.datasets.registry import DATASETS
from loadgen.report.gate_keys import gate_problem
from loadgen.report.settings import settings_of

log = logging.getLogger(__name__)

TEMPERATURE_WARNING = (
    "WARNING: loadgen sends no temperature unless --temperature is given (as vllm bench serve "
    "since it stopped sending 0): the server's default applies, which can be model and API "
    "specific. For greedy decoding, pass --temperature 0."
)


def check_before_start(config: RunConfig) -> None:
    """Validate the flags and print their warnings; a missing dataset file is found now."""
    config.validate()
    if config.fail_on and (
        problem := gate_problem(settings_of(config), dataclasses.asdict(config))
    ):
        raise ConfigError(problem)  # a --fail-on key the result will not hold
    for warning in config.ignored_flag_warnings():
        log.warning(f"warning: {warning}")
    if (
        not config.pooling
        and not config.mock  # the mock ignores sampling parameters: the warning would be noise
        and config.temperature is None
        and "temperature" not in (config.extra_body or {})
    ):
        log.warning(TEMPERATURE_WARNING)
    if problem := dataset_path_problem(config):
        # Found now rather than after the tokenizer loads and the server is waited for.
        raise InputError(problem)


def dataset_path_problem(config: RunConfig) -> str | None:
    """Why --dataset-path cannot be the file its dataset reads, in one line naming it; None
    when it can (or the dataset takes a directory or a hub id: hf, speed_bench)."""
    path = config.dataset_path
    if path is None or not DATASETS[config.dataset_name].path_is_file:
        return None
    if os.path.isdir(path):
        return (
            f"--dataset-path {path} is a directory: --dataset-name {config.dataset_name} "
            "reads one file"
        )
    if not os.path.isfile(path):
        return f"--dataset-path {path}: No such file"
    return None
