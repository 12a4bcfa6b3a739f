"""The BurstGPT trace (``burstgpt``, a CSV), sampled as upstream's ``BurstGPTDataset``.

Upstream keeps the rows whose ``Model`` is ``GPT-4`` and whose ``Response tokens`` are above 0,
then ``df.sample(n=--num-prompts, random_state=seed, replace=n > rows)``: pandas draws that as
``np.random.RandomState(seed).choice(rows, size=n, replace=replace)``, which is what is drawn
here, without pandas. Request i's prompt is the decoded token ids ``(i + j) % vocab_size`` for
j below the row's third column (request tokens), its ``prompt_len`` that count (not re-checked),
and its output length the fourth column (response tokens).
"""

from __future__ import annotations

import csv

import numpy as np

from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.tokenizer import TokenCodec

MODEL = "GPT-4"


def load_burstgpt(path: str) -> list[tuple[int, int]]:
    """(request tokens, response tokens) of the GPT-4 rows with a response, in file order.
    ValueError naming the file (and row) at fault."""
    try:
        with open(path, newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            header = next(reader, None)
            if header is None or "Model" not in header or "Response tokens" not in header:
                raise ValueError(
                    f"--dataset-path {path}: a BurstGPT CSV needs a header with 'Model' and "
                    "'Response tokens'"
                )
            model_col, response_col = header.index("Model"), header.index("Response tokens")
            rows = []
            for number, row in enumerate(reader, start=2):
                try:
                    if row[model_col] == MODEL and float(row[response_col]) > 0:
                        rows.append((int(float(row[2])), int(float(row[3]))))
                except (IndexError, ValueError):
                    raise ValueError(
                        f"{path}:{number}: the request and response token counts (columns 3 "
                        "and 4) must be numbers"
                    ) from None
    except OSError as exc:
        raise ValueError(f"--dataset-path {path}: {exc.strerror or exc}") from None
    if not rows:
        raise ValueError(f"--dataset-path {path}: no {MODEL} rows with response tokens > 0")
    return rows


def sampled_rows(
    rows: list[tuple[int, int]], num_requests: int, seed: int
) -> list[tuple[int, int]]:
    """pandas' ``df.sample(n, random_state=seed, replace=n > len(df))`` of the rows."""
    picks = np.random.RandomState(seed).choice(
        len(rows), size=num_requests, replace=num_requests > len(rows)
    )
    return [rows[i] for i in picks]


def sample_burstgpt(
    rows: list[tuple[int, int]], tokenizer: TokenCodec, num_prompts: int, seed: int
) -> SampledPrompts:
    """The ``burstgpt`` dataset (see the module docstring)."""
    chosen = sampled_rows(rows, num_prompts, seed)
    vocab = tokenizer.vocab_size
    prompts = tokenizer.decode_batch(
        [[(i + j) % vocab for j in range(input_len)] for i, (input_len, _) in enumerate(chosen)]
    )
    return SampledPrompts.of(prompts, [n for n, _ in chosen], [out for _, out in chosen])
