"""The connections all workers pre-open together never exceed --max-concurrency: each worker
opens its share of the cap (loadgen/session/shards.py plan_shards and preopen_count), so the shares
add up to the cap, where each worker opening the whole cap opened W times the cap (32 against
llama.cpp at --max-concurrency 16 over 2 workers)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import config_given

from loadgen.config import RunConfig
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.fleet.credit_pool import initial_credits
from loadgen.schedule import assign_workers
from loadgen.session.prepare import Prepared
from loadgen.session.shards import PREOPEN_LIMIT, plan_shards


def planned(cap: int | None, workers: int, requests: int) -> list[int]:
    """Each worker's pre-open plan for a run of ``requests`` random prompts, as the coordinator
    makes it."""
    config = config_given(
        num_prompts=requests,
        max_concurrency=cap,
        workers=workers,
        random_input_len=4,
        random_output_len=2,
        tokenizer="loadgen-mock",
        model="m",
    )
    prepared = _prepared(config, requests)
    return [plan.config.preopen_connections for plan in plan_shards(config, prepared, workers)]


def _prepared(config: RunConfig, requests: int) -> Prepared:
    dataset = SampledPrompts(
        prompts=["p"] * requests,
        prompt_lens=np.ones(requests, dtype=np.int64),
        output_lens=np.full(requests, 2, dtype=np.int64),
    )
    return Prepared(
        model_id="m",
        model_name="m",
        tokenizer_id=None,
        tokenizer=None,  # type: ignore[arg-type]  # shards never tokenize
        dataset=dataset,
        models=["m"] * requests,
        bodies=[b"{}"] * requests,
        scheduled_ns=np.zeros(requests, dtype=np.int64),
        turns=None,
    )


@pytest.mark.parametrize(
    ("cap", "workers", "requests"),
    [
        (16, 2, 100),  # the llama.cpp run of the issue: 16, not 32
        (16, 3, 100),  # a cap that does not divide: 6 + 5 + 5
        (7, 4, 1000),
        (64, 8, 64),
        (1000, 2, 50_000),
        (20_000, 2, 20_000),  # a share above PREOPEN_LIMIT is opened whole
    ],
)
def test_the_workers_preopen_the_cap_and_no_more(cap: int, workers: int, requests: int) -> None:
    plans = planned(cap, workers, requests)
    assert sum(plans) == cap
    # Each opens what it starts with: the credits the coordinator lends it at START.
    sizes = [int((assign_workers(requests, workers, cap) == w).sum()) for w in range(workers)]
    assert plans == initial_credits(cap, sizes)


def test_fewer_requests_than_the_cap_preopen_one_per_request() -> None:
    plans = planned(64, 4, 10)
    assert sum(plans) == 10


def test_without_a_cap_each_worker_opens_one_per_request_up_to_the_limit() -> None:
    assert planned(None, 2, 500) == [250, 250]
    assert planned(None, 2, 3 * PREOPEN_LIMIT) == [PREOPEN_LIMIT, PREOPEN_LIMIT]
