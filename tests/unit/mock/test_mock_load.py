"""The load the mock's /metrics reports, from what its handlers noted (loadgen/mock/load.py):
tokens held in the KV cache and generated as each request's events fall due, counters that end
equal to the usage answered. On a clock the test sets, no sockets."""

from __future__ import annotations

import pytest

import loadgen.mock.load as load_module
from loadgen.mock.load import ServerLoad


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(load_module.time, "monotonic", lambda: now[0])
    return now


def test_tokens_fill_the_cache_as_their_events_fall_due(clock: list[float]) -> None:
    load = ServerLoad(itl_s=0.01, kv_capacity=1000)
    a = load.start(prompt_tokens=100, output_tokens=10, ttft_s=0.05, cached=64)
    load.start(prompt_tokens=200, output_tokens=4, ttft_s=0.0, cached=-1)
    first = load.snapshot(waiting=3, cache_queried=None, cache_hits=None)
    # b's first token is due at once, a's in 50 ms
    assert (first.running, first.waiting, first.kv_tokens) == (2, 3, 301)
    assert first.generation_tokens == 1 and first.reserved_tokens == 314
    assert first.kv_usage == pytest.approx(0.301)
    assert (first.prompt_tokens, first.prompt_computed) == (300, 236)
    clock[0] += 0.0705  # a: 3 tokens (at 50, 60, 70 ms); b: all 4 (at 0, 10, 20, 30 ms)
    later = load.snapshot(waiting=0, cache_queried=None, cache_hits=None)
    assert (later.generation_tokens, later.kv_tokens) == (7, 307)
    load.end(a)
    load.end(a)  # an end noted twice counts once
    done = load.snapshot(waiting=0, cache_queried=600, cache_hits=150)
    assert (done.running, done.requests) == (1, 1)
    assert (done.finished_prompt_tokens, done.finished_generation_tokens) == (100, 10)
    assert done.generation_tokens == 14 and done.cache_hit_rate == 0.25


def test_the_usage_stops_at_a_full_cache(clock: list[float]) -> None:
    load = ServerLoad(itl_s=0.0, kv_capacity=100)  # --itl-ms 0: a whole answer at once
    load.start(prompt_tokens=90, output_tokens=20, ttft_s=0.0, cached=0)
    snapshot = load.snapshot(waiting=0, cache_queried=None, cache_hits=None)
    assert (snapshot.kv_tokens, snapshot.kv_usage, snapshot.preemptions) == (110, 1.0, 0)
