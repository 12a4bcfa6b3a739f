"""What a run was, for its result JSON: the command line, the dataset's settings and where it
ran (``loadgen.command_line``, ``loadgen.dataset``, ``loadgen.environment``)."""

from __future__ import annotations

from typing import Any

from loadgen.datasets.registry import DATASETS
from loadgen.records.model import RunStart

DATASET_IDENTITY = ("dataset_name", "dataset_path")


def dataset_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings the run's dataset was built from: its name and path, then every field its
    loader and sampler read (the registry's ``reads``), from the stored configuration."""
    name = config.get("dataset_name")
    dataset = DATASETS.get(name) if isinstance(name, str) else None
    reads = dataset.reads if dataset is not None else ()
    fields = dict.fromkeys((*DATASET_IDENTITY, *reads))
    return {field: config[field] for field in fields if field in config}


def run_context(start: RunStart) -> dict[str, Any]:
    """The command line (secrets already redacted in the records), the dataset's settings and
    the environment (null for records written before it was kept)."""
    return {
        "command_line": start.command_line,
        "dataset": dataset_settings(start.config),
        "environment": start.environment,
    }
