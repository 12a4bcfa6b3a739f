"""NVIDIA's SPEED-Bench (``speed_bench``), sampled as upstream's ``SpeedBench``.

Upstream reads ``{--speed-bench-dataset-subset}.jsonl`` from the directory ``--dataset-path``
(written by NeMo-Skills' prepare script), takes each line's first message's content as the
prompt, keeps only ``--speed-bench-category``'s lines when given, and samples them as
``custom`` with seed 0 (upstream does not pass ``--seed`` on): templated unless
``--skip-chat-template`` (with ``--chat-template-kwargs``), every request asking for
``--speed-bench-output-len`` tokens. loadgen reads the same rows, offline, from that directory
or from the ``.jsonl`` file itself. ``--dataset-path nvidia/SPEED-Bench`` reads the subset from
the ``datasets`` cache instead (what ``load_dataset("nvidia/SPEED-Bench", subset, split="test")``
left, as the prepare script runs it), offline: the first of each row's ``turns``. The hub's rows
that hold a placeholder in place of another dataset's text (only the prepare script fetches it)
are skipped, with one line counting them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loadgen.datasets.custom import sample_custom_requests
from loadgen.datasets.errors import file_errors
from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.chat_template import ChatTemplate
from loadgen.text.tokenizer import TokenCodec

log = logging.getLogger(__name__)

SUBSETS = (
    "qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k",
    "throughput_32k",
)  # fmt: skip
PREPARE_SCRIPT = (  # what upstream tells users to run to fetch the dataset
    "https://raw.githubusercontent.com/NVIDIA-NeMo/Skills/refs/heads/main/"
    "nemo_skills/dataset/speed-bench/prepare.py"
)
SHUFFLE_SEED = 0  # upstream's SpeedBench is built without --seed
HUB_ID = "nvidia/SPEED-Bench"
# What the hub's rows hold in place of text that must come from another dataset.
TURNS_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"


def subset_file(path: str, subset: str) -> Path:
    """The subset's JSONL: ``{subset}.jsonl`` in the directory ``path``, or the file ``path``.
    ValueError naming what to fetch when it is not there."""
    given = Path(path).expanduser()
    if given.is_file():
        return given
    if (given / f"{subset}.jsonl").is_file():
        return given / f"{subset}.jsonl"
    where = f"{subset}.jsonl is not in the directory" if given.is_dir() else "no such directory"
    raise ValueError(
        f"--dataset-path {path}: {where}; fetch SPEED-Bench with "
        f"`curl -LsSf {PREPARE_SCRIPT} | python3 -` and name the directory it writes"
    )


def speed_bench_rows(path: Path, category: str | None) -> list[dict[str, str]]:
    """Custom rows from SPEED-Bench lines: the first message's content, of ``category`` only
    when given. ValueError naming the file (and line) at fault."""
    rows = []
    for number, row in json_lines(str(path)):
        messages = row.get("messages") if isinstance(row, dict) else None
        first = messages[0] if isinstance(messages, list) and messages else None
        if not isinstance(first, dict) or not isinstance(first.get("content"), str):
            raise ValueError(
                f'{path}:{number}: each line needs "messages", a list whose first has a string '
                '"content"'
            )
        if not category or row.get("category") == category:
            rows.append({"prompt": first["content"]})
    if not rows:
        which = f" of category {category!r}" if category else ""
        raise ValueError(f"--dataset-path {path}: the file has no prompts{which}")
    return rows


def load_speed_bench(
    path: str, speed_bench_dataset_subset: str, speed_bench_category: str | None
) -> list[dict[str, str]]:
    """The subset's prompts, of --speed-bench-category when given."""
    if path == HUB_ID and not Path(path).exists():
        return cached_hub_rows(speed_bench_dataset_subset, speed_bench_category)
    return speed_bench_rows(subset_file(path, speed_bench_dataset_subset), speed_bench_category)


def cached_hub_rows(subset: str, category: str | None) -> list[dict[str, str]]:
    """Custom rows from the ``datasets`` cache of the hub's subset, read offline (see the module
    docstring). ValueError saying what to fetch when the cache lacks it."""
    try:
        from datasets import load_dataset  # the [hf] extra
    except ImportError:
        raise ValueError(
            f"--dataset-path {HUB_ID} reads the datasets cache, which needs the [hf] extra "
            "(pip install 'loadgen[hf]')"
        ) from None
    try:
        with _offline():
            data = load_dataset(HUB_ID, subset, split="test")
    except (OSError, ValueError) as exc:  # ConnectionError is an OSError
        raise ValueError(
            f"--dataset-path {HUB_ID}: the subset {subset} is not in the datasets cache; fetch "
            f"it (`curl -LsSf {PREPARE_SCRIPT} | python3 -` caches it and writes the files "
            "--dataset-path DIR reads)"
        ) from exc
    rows, placeholders = [], 0
    for row in data:
        turns = row.get("turns")
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str):
            raise ValueError(f"--dataset-path {HUB_ID}: a {subset} row has no turns")
        if turns[0].startswith(TURNS_PLACEHOLDER):
            placeholders += 1
        elif not category or row.get("category") == category:
            rows.append({"prompt": turns[0]})
    if placeholders:
        log.warning(
            f"warning: {placeholders} of {data.num_rows} {HUB_ID} {subset} rows need text from "
            "other datasets that only NeMo-Skills' prepare script fetches; skipped"
        )
    if not rows:
        which = f" of category {category!r}" if category else ""
        raise ValueError(f"--dataset-path {HUB_ID}: the cached {subset} has no prompts{which}")
    return rows


@contextmanager
def _offline() -> Iterator[None]:
    """The hub's clients in offline mode, as HF_HUB_OFFLINE=1 sets them, and quiet."""
    import datasets.config
    import huggingface_hub.constants
    from datasets.utils import logging as datasets_logging

    was = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    verbosity = datasets_logging.get_verbosity()
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets_logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = was
        datasets_logging.set_verbosity(verbosity)


def sample_speed_bench(
    rows: list[dict[str, str]],
    path: str,
    tokenizer: TokenCodec,
    chat_template: ChatTemplate | None,
    num_prompts: int,
    speed_bench_output_len: int,
    disable_shuffle: bool,
    no_oversample: bool,
    chat_template_kwargs: dict[str, Any] | None,
) -> SampledPrompts:
    """The ``speed_bench`` dataset: sampled as ``custom`` with seed 0, as upstream builds it."""
    template = chat_template
    with file_errors(path):
        return sample_custom_requests(
            rows,
            tokenizer,
            num_prompts,
            speed_bench_output_len,
            SHUFFLE_SEED,
            disable_shuffle,
            no_oversample,
            template=None
            if template is None
            else lambda prompt: template.render_user_prompt(prompt, chat_template_kwargs),
        )


def check_speed_bench(speed_bench_output_len: int) -> None:
    """Refuse (ValueError) an output length below 1."""
    if speed_bench_output_len < 1:
        raise ValueError(f"--speed-bench-output-len must be >= 1, got {speed_bench_output_len}")
