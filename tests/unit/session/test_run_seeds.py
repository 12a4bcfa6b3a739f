"""A campaign's fresh prompts (issue 29 point 1): the seed each run draws with, how much of a
run's prompts earlier runs sent, and the warning when the server served them from its cache;
without sockets."""

from __future__ import annotations

import math

from helpers import config_given

from loadgen.report.prefix_cache import PrefixCacheHits
from loadgen.session.campaign import (
    Point,
    grid,
    run_seed,
    seeded,
    shared_prompts_warning,
    shared_share,
)

UNCAPPED_INF = Point(4, math.inf)


def test_the_derivation_is_pinned() -> None:
    # SHA-256 of "loadgen-prompts/{seed}/{point}/{run}", first 4 bytes big-endian, mod 2^31:
    # the values docs/compat.md's rule gives, so that a change of it fails here.
    assert run_seed(0, UNCAPPED_INF, 0) == 1481735184
    assert run_seed(0, UNCAPPED_INF, 1) == 1321393245
    assert run_seed(7, Point(None, 2.0), 3) == 1142429849


def test_every_point_and_run_of_a_grid_draws_its_own_seed() -> None:
    config = config_given(max_concurrency=(1, 4, 16), request_rate=(2.0, math.inf), num_runs=3)
    seeds = [run_seed(config.seed, point, run) for point in grid(config) for run in range(3)]
    assert len(set(seeds)) == len(seeds) == 18
    assert all(0 <= seed < 2**31 for seed in seeds)
    other = [run_seed(1, point, run) for point in grid(config) for run in range(3)]
    assert not set(seeds) & set(other)  # another --seed, other prompts everywhere


def test_the_same_point_draws_the_same_seed_in_another_campaign() -> None:
    small = grid(config_given(max_concurrency=(1, 4)))
    large = grid(config_given(max_concurrency=(4, 16)))
    assert small[1] == large[0]  # concurrency 4: first of one campaign, second of the other
    assert run_seed(0, small[1], 2) == run_seed(0, large[0], 2)


def test_same_prompts_keeps_the_seed_given() -> None:
    fresh = config_given(max_concurrency=(1, 4), seed=5)
    same = config_given(max_concurrency=(1, 4), seed=5, same_prompts=True)
    assert seeded(same, UNCAPPED_INF, 3) is same
    assert seeded(fresh, UNCAPPED_INF, 3).seed == run_seed(5, UNCAPPED_INF, 3) != 5


def test_the_shared_share_counts_bodies_sent_before() -> None:
    sent: set[bytes] = set()
    assert shared_share([b"a", b"b", b"c", b"d"], sent) == 0.0
    assert shared_share([b"a", b"b", b"x", b"y"], sent) == 0.5
    assert shared_share([b"a", b"b", b"x", b"y"], sent) == 1.0
    assert shared_share([], sent) == 0.0


HOT = PrefixCacheHits(hit_tokens=900, queried_tokens=1000, source="/metrics")


def test_shared_prompts_served_from_the_cache_get_one_line() -> None:
    same = config_given(max_concurrency=(1, 4), same_prompts=True)
    line = shared_prompts_warning(same, "max_concurrency=4-request_rate=inf run=0", 1.0, HOT)
    assert line is not None and "\n" not in line
    assert line.startswith("warning: max_concurrency=4-request_rate=inf run=0 sent 100% of")
    assert "90 % of its prompt tokens from its prefix cache (/metrics)" in line
    assert "--same-prompts sends every run the same prompts" in line
    small = shared_prompts_warning(config_given(num_runs=2), "p run=1", 0.75, HOT)
    assert small is not None and "too few prompts to differ" in small


def test_no_line_without_sharing_hits_or_with_a_reset() -> None:
    config = config_given(num_runs=2)
    assert shared_prompts_warning(config, "p", 0.25, HOT) is None  # fresh prompts
    assert shared_prompts_warning(config, "p", 1.0, None) is None  # the server reports none
    cold = PrefixCacheHits(0, 1000, "responses")
    assert shared_prompts_warning(config, "p", 1.0, cold) is None
    reset = config_given(num_runs=2, reset_prefix_cache=True)
    assert shared_prompts_warning(reset, "p", 1.0, HOT) is None
