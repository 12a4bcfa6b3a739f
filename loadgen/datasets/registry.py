"""Every dataset loadgen builds, by its --dataset-name: how it is read and sampled, and its traits.

The rest of loadgen asks the registry rather than keeping lists of names: which datasets take
``--dataset-path``, which are templated, which read every row for ``--num-prompts 0``, which are
re-aligned to the server's tokenizer, and what each refuses (``path_help``: what its
--dataset-path names; ``check``: its own refusals; `check_dataset` runs both for
`RunConfig.validate()`). loadgen/config imports this module and no other dataset module
(setup.cfg's contract): what it needs of them beyond the entries is re-exported here. (Which
datasets read a flag is that flag's ``readers`` in the flag table, loadgen/config/flags.py.)

A loader and a sampler name what they read as keyword parameters: ``path``, ``rows`` (the
loader's result), ``tokenizer``, ``chat_template`` and ``progress`` (loadgen/datasets/progress.py;
None when nobody watches), and otherwise `RunConfig` fields (``num_prompts``, ``seed``, ...),
which ``loadgen.datasets.sample`` passes by name; a ``check`` names the fields it reads too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from loadgen.datasets.burstgpt import load_burstgpt, sample_burstgpt
from loadgen.datasets.custom import (
    check_custom,
    check_spec_bench,
    load_custom_rows,
    load_spec_bench,
    sample_custom,
    sample_spec_bench,
)
from loadgen.datasets.custom_audio import load_custom_audio_rows, sample_custom_audio
from loadgen.datasets.custom_image import (
    check_custom_image,
    load_custom_image_rows,
    sample_custom_image,
)
from loadgen.datasets.hf import HFDataset, check_hf, find_hf_dataset, load_hf, sample_hf
from loadgen.datasets.hf_asr import ASR_PATHS
from loadgen.datasets.prefix_repetition import sample_prefix_repetition
from loadgen.datasets.random import parse_range_ratio, sample_random, sample_random_rerank
from loadgen.datasets.random_mm import check_random_mm, sample_random_mm
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.datasets.sharegpt import load_sharegpt_entries, sample_sharegpt
from loadgen.datasets.sonnet import check_sonnet, load_sonnet_lines, sample_sonnet
from loadgen.datasets.speed_bench import PREPARE_SCRIPT as SPEED_BENCH_PREPARE
from loadgen.datasets.speed_bench import SUBSETS as SPEED_BENCH_SUBSETS
from loadgen.datasets.speed_bench import check_speed_bench, load_speed_bench, sample_speed_bench
from loadgen.datasets.timed_trace import check_timed_trace, load_timed_trace, sample_timed_trace

# What loadgen/config reads of the datasets besides their entries (it imports no other module).
__all__ = [
    "ASR_PATHS",
    "DATASETS",
    "SPEED_BENCH_SUBSETS",
    "Dataset",
    "HFDataset",
    "check_dataset",
    "find_hf_dataset",
    "names",
    "parse_range_ratio",
]

# What the dispatch gives a loader or sampler besides flags.
CONTEXT = ("path", "rows", "tokenizer", "chat_template", "progress")


@dataclass(frozen=True)
class Dataset:
    """One --dataset-name: its loader and sampler, and what the rest of loadgen asks of it."""

    # Reads --dataset-path (a file, or for hf a hub id) into rows; None: synthetic, built from
    # the tokenizer alone, and --dataset-path is refused.
    load: Callable[..., Any] | None
    sample: Callable[..., SampledPrompts]
    # Client-side chat template: "never"; "unless skipped" (--skip-chat-template); "always"
    # (upstream templates whatever --skip-chat-template says). hf's families refine it.
    templated: Literal["never", "unless skipped", "always"] = "never"
    # Upstream sends ignore_eos with it whatever --ignore-eos says: "never", "unless pooling"
    # (with a generation backend), "always".
    forces_ignore_eos: Literal["never", "unless pooling", "always"] = "never"
    every_row: bool = False  # --num-prompts 0 or less: every row of the file, as upstream
    aligned: bool = False  # prompts re-aligned to the server's tokenizer (/tokenize), as upstream
    path_is_file: bool = True  # --dataset-path names a file (hf: a hub id or a directory)
    # Kept in the dataset cache (loadgen/datasets/cache.py): built from the tokenizer, its flags
    # and --seed alone, at the cost of a decode -> encode pass over every prompt.
    cached: bool = False
    # What its --dataset-path names, in the refusal when none is given ("a .jsonl file"); a
    # dataset with a loader needs one.
    path_help: str = ""
    # Its own refusals (ValueError naming the flag), given the `RunConfig` fields it names as
    # parameters, as a loader's or a sampler's; run once --dataset-path is known to be there.
    check: Callable[..., None] | None = None

    @property
    def synthetic(self) -> bool:
        """Whether it is built from the tokenizer alone (no --dataset-path)."""
        return self.load is None

    @property
    def reads(self) -> tuple[str, ...]:
        """The `RunConfig` fields its loader and sampler read."""
        steps = (self.load, self.sample) if self.load is not None else (self.sample,)
        names = [name for step in steps for name in inspect.signature(step).parameters]
        return tuple(dict.fromkeys(name for name in names if name not in CONTEXT))


DATASETS: dict[str, Dataset] = {
    "random": Dataset(
        load=None,
        sample=sample_random,
        forces_ignore_eos="unless pooling",
        aligned=True,
        cached=True,
    ),
    "random-mm": Dataset(
        load=None,
        sample=sample_random_mm,
        forces_ignore_eos="unless pooling",
        check=check_random_mm,
    ),
    "random-rerank": Dataset(
        load=None,
        sample=sample_random_rerank,
        cached=True,
    ),
    "prefix_repetition": Dataset(
        load=None,
        sample=sample_prefix_repetition,
        aligned=True,
        cached=True,
    ),
    "custom": Dataset(
        load=load_custom_rows,
        sample=sample_custom,
        templated="unless skipped",
        every_row=True,
        path_help="a .jsonl file",
        check=check_custom,
    ),
    "custom_image": Dataset(
        load=load_custom_image_rows,
        sample=sample_custom_image,
        every_row=True,
        path_help="a .jsonl file",
        check=check_custom_image,
    ),
    "custom_audio": Dataset(
        load=load_custom_audio_rows,
        sample=sample_custom_audio,
        every_row=True,
        path_help="a JSONL file",
    ),
    "sharegpt": Dataset(
        load=load_sharegpt_entries,
        sample=sample_sharegpt,
        path_help="a ShareGPT JSON file",
    ),
    "spec_bench": Dataset(
        load=load_spec_bench,
        sample=sample_spec_bench,
        templated="always",
        every_row=True,
        path_help="Spec-Bench's question.jsonl",
        check=check_spec_bench,
    ),
    "speed_bench": Dataset(
        load=load_speed_bench,
        sample=sample_speed_bench,
        templated="unless skipped",
        every_row=True,
        path_is_file=False,  # upstream's directory of subsets, or one subset's .jsonl
        check=check_speed_bench,
        path_help="the directory of SPEED-Bench's subsets; fetch it with "
        f"`curl -LsSf {SPEED_BENCH_PREPARE} | python3 -`",
    ),
    "burstgpt": Dataset(
        load=load_burstgpt,
        sample=sample_burstgpt,
        path_help="the BurstGPT CSV",
    ),
    "timed_trace": Dataset(
        load=load_timed_trace,
        sample=sample_timed_trace,
        forces_ignore_eos="always",
        path_help="a JSONL trace",
        check=check_timed_trace,
    ),
    "sonnet": Dataset(
        load=load_sonnet_lines,
        sample=sample_sonnet,
        templated="always",
        path_help="a text of poem lines",
        check=check_sonnet,
    ),
    "hf": Dataset(
        load=load_hf,
        sample=sample_hf,
        templated="unless skipped",
        path_is_file=False,
        path_help="a hub dataset id",
        check=check_hf,
    ),
}


def names(test: Callable[[Dataset], bool] = lambda dataset: True) -> tuple[str, ...]:
    """The names of the datasets that pass ``test`` (all of them by default), in registry order."""
    return tuple(name for name, dataset in DATASETS.items() if test(dataset))


def check_dataset(config: Any) -> None:
    """Refuse (ValueError) what the configured dataset cannot be built from: --dataset-path
    given to a synthetic one, or missing for one read from a file; then the dataset's own
    ``check``. ``config`` is the run's RunConfig (any object with the fields the check names)."""
    name = config.dataset_name
    dataset = DATASETS[name]
    if dataset.synthetic and config.dataset_path is not None:
        raise ValueError(f"--dataset-path is not read by --dataset-name {name}")
    if not dataset.synthetic and config.dataset_path is None:
        raise ValueError(f"--dataset-name {name} needs --dataset-path ({dataset.path_help})")
    if dataset.check is not None:
        fields = inspect.signature(dataset.check).parameters
        dataset.check(**{field: getattr(config, field) for field in fields})
