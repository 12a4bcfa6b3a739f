"""How many connections each worker opens before t0 (loadgen/session/shards.py preopen_count), and
the one line the coordinator prints when the workers opened fewer (fanout.preopen_shortfall)."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.fleet.fanout import ShardPlan, preopen_shortfall
from loadgen.session.shards import PREOPEN_LIMIT, preopen_count
from workers.protocol import WorkerConfig


@pytest.mark.parametrize(
    ("cap", "share", "requests", "expected"),
    [
        (64, 32, 500, 32),  # its share of the cap: the workers' shares add up to the cap
        (64, 32, 10, 10),  # never more than its requests
        (0, 0, 500, 500),  # no cap: one per request
        (0, 0, 50_000, PREOPEN_LIMIT),  # ... up to the limit
        (8_000, 4_000, 8_000, 4_000),  # a cap above the limit: the share
        (20_000, 10_000, 10_000, 10_000),  # a share above the limit: the share, so t0 opens none
        (20_000, 10_000, 6_000, 6_000),
    ],
)
def test_preopen_count(cap: int, share: int, requests: int, expected: int) -> None:
    assert preopen_count(cap, share, requests) == expected


def plan(planned: int) -> ShardPlan:
    config = WorkerConfig("http://h/v1/completions", {}, None, 0, "http://h/v1/models", planned)
    empty = np.zeros(0, dtype=np.int64)
    return ShardPlan(config, [], empty, empty, empty)


def ready(connections: int, short: str = "") -> dict:
    return {"connections": connections, "connect_error": None, "preopen_short": short}


def test_no_line_when_every_worker_opened_its_plan() -> None:
    assert preopen_shortfall([plan(10), plan(10)], {0: ready(10), 1: ready(10)}) == ""


def test_a_shortfall_is_one_line_with_the_counts_and_each_reason_once() -> None:
    why = "the server served no more connections at once"
    line = preopen_shortfall(
        [plan(100), plan(100), plan(100)], {0: ready(4, why), 1: ready(4, why), 2: ready(100)}
    )
    assert "\n" not in line
    assert line.startswith("108 of the 300 connections planned were opened before t0 (")
    assert line.count(why) == 1
    assert "during the run" in line
