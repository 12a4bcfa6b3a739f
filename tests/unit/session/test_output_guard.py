"""The output guard: the most token events a request may stream before it counts as endless."""

from __future__ import annotations

import dataclasses

import numpy as np

from loadgen.config import RunConfig
from loadgen.session.shards import output_guard


def test_twice_max_tokens_and_64_or_none_without_a_max_tokens():
    config = RunConfig(workers=1)
    assert output_guard(config, np.array([8, 128, 0, -1])).tolist() == [80, 320, 0, 0]


def test_pooling_answers_have_no_guard():
    config = dataclasses.replace(RunConfig(workers=1), backend="openai-embeddings")
    assert output_guard(config, np.array([8, 128])).tolist() == [0, 0]
