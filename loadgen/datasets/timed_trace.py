"""vLLM's ``timed_trace`` dataset: replay a JSONL trace of requests at its own instants.

Each line is one request: a timestamp, an input length, an output length and a list of hash
ids (field names set by the --timed-trace-label-* flags). Lines are taken in file order, up to
--num-prompts. The prompt is a list of token ids built chunk by chunk: hash id h expands to
``chunk`` ids (``--timed-trace-chunk-hash-size``; fewer for the last chunk, so the prompt has
the input length) drawn by ``random.Random(seed_of(h, size)).choices`` from the sorted
vocabulary without special ids, so equal hash ids give equal chunks, as a shared prefix does.
A trace with fewer hash ids than its input length needs gives a shorter prompt; ``prompt_len``
is the prompt's length, as upstream's.

Requests go at ``timestamp × --timed-trace-sec-multiplier`` seconds after the start (upstream's
self-timed schedule; --no-self-timed uses --request-rate instead). Upstream sends them from one
loop, so a timestamp earlier than the one before it goes right after that one: the offsets are
that running maximum, never below 0.

Upstream seeds each chunk with Python's ``hash()`` of ``"h:size"``, which is salted per process,
so its prompts differ from run to run; here the seed is a BLAKE2b digest of the same key, so a
trace always gives the same prompts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
from typing import Any

import numpy as np

from loadgen.backends import COMPLETIONS_BACKENDS
from loadgen.datasets.errors import FlagError
from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.tokenizer import TokenCodec

log = logging.getLogger(__name__)


def load_trace(path: str, num_requests: int) -> list[dict[str, Any]]:
    """The first ``num_requests`` JSON objects of a JSONL trace (blank lines skipped)."""
    rows: list[dict[str, Any]] = []
    for number, row in json_lines(path):
        if len(rows) >= num_requests:
            break
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: each line must be a JSON object")
        rows.append(row | {"_line": number})
    if not rows:
        raise ValueError(f"--dataset-path {path}: the trace has no requests")
    return rows


def chunk_seed(hash_id: Any, size: int) -> int:
    """A stable 32-bit seed for the chunk of ``size`` ids that ``hash_id`` expands to."""
    digest = hashlib.blake2b(f"{hash_id}:{size}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


def sample_timed_trace_requests(
    rows: list[dict[str, Any]],
    tokenizer: TokenCodec,
    chunk_size: int,
    sec_multiplier: float,
    labels: dict[str, str],
    path: str = "trace",
) -> tuple[SampledPrompts, np.ndarray]:
    """The trace's requests and their offsets in seconds (see the module docstring).

    ``labels`` maps ``timestamp``, ``input_length``, ``output_length`` and ``hash_ids`` to the
    trace's field names.
    """
    if chunk_size < 1:
        raise FlagError(f"--timed-trace-chunk-hash-size must be >= 1, got {chunk_size}")
    vocabulary = sorted(set(range(tokenizer.vocab_size)) - set(tokenizer.special_ids))
    chunks: dict[tuple[str, int], list[int]] = {}
    prompts, outputs, timestamps = [], [], []
    for row in rows:
        where = f"{path}:{row['_line']}"
        input_len = _field(row, labels, "input_length", where)
        output_len = _field(row, labels, "output_length", where)
        timestamp = _field(row, labels, "timestamp", where)
        hash_ids = row.get(labels["hash_ids"], [])
        if not isinstance(hash_ids, list):
            raise ValueError(f"{where}: '{labels['hash_ids']}' must be a list of hash ids")
        ids: list[int] = []
        remaining = int(input_len)
        for hash_id in hash_ids:
            size = min(chunk_size, remaining)
            key = (str(hash_id), size)
            if key not in chunks:
                chunks[key] = random.Random(chunk_seed(hash_id, size)).choices(vocabulary, k=size)
            ids += chunks[key]
            remaining -= size
            if remaining <= 0:
                break
        if not ids:
            raise ValueError(
                f"{where}: no prompt tokens (input length {input_len}, "
                f"{len(hash_ids)} hash ids in '{labels['hash_ids']}')"
            )
        prompts.append(ids)
        outputs.append(int(output_len))
        timestamps.append(float(timestamp) * sec_multiplier)
    sampled = SampledPrompts.of(prompts, [len(p) for p in prompts], outputs)
    offsets = np.maximum.accumulate(np.maximum(np.asarray(timestamps, dtype=np.float64), 0.0))
    return sampled, offsets


def load_timed_trace(
    path: str,
    num_prompts: int,
    timed_trace_chunk_hash_size: int,
    timed_trace_sec_multiplier: float,
    timed_trace_label_timestamp: str,
    timed_trace_label_input_length: str,
    timed_trace_label_output_length: str,
    timed_trace_label_hash_ids: str,
) -> list[dict[str, Any]]:
    """The trace's first --num-prompts requests, after upstream's line on its settings."""
    log.info(
        f"timed-trace: chunk_size: {timed_trace_chunk_hash_size}, "
        f"sec_multiplier: {timed_trace_sec_multiplier}, "
        f'label_ts: "{timed_trace_label_timestamp}", '
        f'label_input_length: "{timed_trace_label_input_length}", '
        f'label_output_length: "{timed_trace_label_output_length}", '
        f'label_hash_ids: "{timed_trace_label_hash_ids}"'
    )
    return load_trace(path, num_prompts)


def sample_timed_trace(
    rows: list[dict[str, Any]],
    path: str,
    tokenizer: TokenCodec,
    timed_trace_chunk_hash_size: int,
    timed_trace_sec_multiplier: float,
    timed_trace_label_timestamp: str,
    timed_trace_label_input_length: str,
    timed_trace_label_output_length: str,
    timed_trace_label_hash_ids: str,
) -> SampledPrompts:
    """The ``timed_trace`` dataset from the trace's rows and its flags, with its offsets."""
    labels = {
        "timestamp": timed_trace_label_timestamp,
        "input_length": timed_trace_label_input_length,
        "output_length": timed_trace_label_output_length,
        "hash_ids": timed_trace_label_hash_ids,
    }
    sampled, offsets = sample_timed_trace_requests(
        rows, tokenizer, timed_trace_chunk_hash_size, timed_trace_sec_multiplier, labels, path
    )
    return dataclasses.replace(sampled, trace_offsets_s=offsets)


def _field(row: dict[str, Any], labels: dict[str, str], name: str, where: str) -> float:
    label = labels[name]
    value = row.get(label)
    if isinstance(value, bool) or not isinstance(value, int | float):
        flag = f"--timed-trace-label-{name.replace('_', '-')}"
        fields = ", ".join(k for k in row if k != "_line")
        raise ValueError(
            f"{where}: no number in field '{label}' ({flag} names it); the line has: {fields}"
        )
    return value


def check_timed_trace(backend: str) -> None:
    """Refuse (ValueError) a backend that cannot send token-id prompts."""
    if backend not in COMPLETIONS_BACKENDS:
        raise ValueError(
            "timed_trace dataset passes pre-tokenized prompts (list[int]) and requires a "
            f"completions backend ('vllm' or 'openai'), not --backend {backend}"
        )
