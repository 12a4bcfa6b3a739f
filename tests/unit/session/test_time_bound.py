"""How many requests a run bounded by --duration prepares, and a campaign point's cut."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import config_given

from loadgen.config import ConfigError
from loadgen.schedule import arrival_offsets_s, to_ns
from loadgen.session.time_bound import (
    bounded_by_duration,
    duration_line,
    duration_requests,
    planned_requests,
    tops_up,
)


@pytest.mark.parametrize(
    ("rate", "duration_s", "count"),
    [(10.0, 3.0, 30), (0.1, 30.0, 3), (7.0, 1.0, 7), (3.0, 1.0, 3), (2.5, 1.0, 2), (0.5, 1.0, 1),
     (1 / 3, 9.0, 3), (1000.0, 0.0015, 1)],
)  # fmt: skip
def test_a_paced_schedule_fills_the_duration(rate: float, duration_s: float, count: int) -> None:
    assert duration_requests(rate, duration_s) == count


@pytest.mark.parametrize("rate", [0.7, 3.0, 9.9, 10.0, 123.4])
@pytest.mark.parametrize("burstiness", [1.0, 0.5, math.inf])
def test_the_schedule_of_that_count_ends_within_the_duration(
    rate: float, burstiness: float
) -> None:
    duration_s = 4.0
    n = duration_requests(rate, duration_s)
    offsets_ns = to_ns(arrival_offsets_s(n, rate, burstiness, seed=0))
    assert offsets_ns[-1] <= round(duration_s * 1e9)  # the workers' deadline, in whole ns
    # one more would arrive past it: the count is the most that fit
    assert (n + 1) / rate > duration_s


def test_paced_runs_draw_the_schedule_count_and_num_prompts_caps_it_only_when_given() -> None:
    assert planned_requests(config_given(duration=3.0, request_rate=10.0)) == 30
    assert planned_requests(config_given(duration=3.0, request_rate=10.0, num_prompts=20)) == 20
    assert planned_requests(config_given(duration=3.0, request_rate=10.0, num_prompts=99)) == 30


def test_unpaced_runs_keep_num_prompts_as_their_upper_bound() -> None:
    assert planned_requests(config_given(duration=3.0)) == 1000  # rate inf, the default
    assert planned_requests(config_given(duration=3.0, num_prompts=50, max_concurrency=4)) == 50
    assert planned_requests(config_given(request_rate=10.0, num_prompts=7)) == 7  # no duration


def test_the_bounded_config_says_what_it_prepares() -> None:
    bounded = bounded_by_duration(config_given(duration=3.0, request_rate=10.0), say=False)
    assert bounded.num_prompts == 30
    assert duration_line(bounded) == (
        "--duration 3 s at 10 req/s: 30 requests on one seeded schedule, the last due at 3.00 s"
    )
    capped = bounded_by_duration(
        config_given(duration=3.0, request_rate=10.0, num_prompts=12), say=False
    )
    assert "12 requests on one seeded schedule (capped by --num-prompts)" in duration_line(capped)
    closed = bounded_by_duration(config_given(duration=2.0, max_concurrency=8), say=False)
    assert duration_line(closed) == (
        "--duration 2 s: requests are sent until t0 + 2 s, prepared in blocks of 1024"
    )
    capped_loop = config_given(duration=2.0, max_concurrency=8, num_prompts=50)
    assert duration_line(bounded_by_duration(capped_loop, say=False)) == (
        "--duration 2 s: requests are sent until t0 + 2 s, at most 50 (--num-prompts)"
    )
    paced = config_given(duration=60.0, request_rate=100.0, duration_block=500)
    assert duration_line(bounded_by_duration(paced, say=False)) == (
        "--duration 60 s at 100 req/s: 6000 requests on one seeded schedule, prepared in "
        "blocks of 500, the last due at 60.00 s"
    )
    fast = bounded_by_duration(config_given(duration=60.0, request_rate=200.0), say=False)
    assert fast.duration_block == 2000  # 10 s of the rate, above the least block of 1024
    unbounded = config_given(num_prompts=5)
    assert bounded_by_duration(unbounded) is unbounded
    assert np.isfinite(bounded.duration or math.nan)


def test_duration_block_is_refused_where_nothing_is_topped_up() -> None:
    trace = config_given(duration=3.0, dataset_name="timed_trace", duration_block=8)
    with pytest.raises(ConfigError, match="--duration-block has no effect: a self-timed trace"):
        bounded_by_duration(trace, say=False)
    assert tops_up(config_given(duration=3.0, max_concurrency=4))
    assert not tops_up(trace) and not tops_up(config_given(num_prompts=5))
