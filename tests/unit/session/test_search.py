"""The search policy (loadgen/session/search.py) on synthetic latency-against-load curves, noise
included: it brackets, bisects, repeats a probe near the line and lands within its tolerance of
the true crossing; no sockets, no runs."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from loadgen.config.gates import parse_gate
from loadgen.report.slo import Estimate
from loadgen.session.search import Bounds, Verdict, judge, next_load, outcome

SLO = [parse_gate("p99_ttft_ms<=100")]
Curve = Callable[[float], float]


def queue_curve(capacity: float) -> Curve:
    """p99 TTFT of a server that serves ``capacity``: flat below it, climbing past it."""
    return lambda load: 50.0 + max(0.0, load - capacity) / capacity * 400.0


def search(
    curve: Curve, bounds: Bounds, noise_ms: float = 0.0, seed: int = 0
) -> tuple[dict[float, Verdict], list[float]]:
    """Run the policy against a curve, each run's value drawn around it with its interval."""
    rng = random.Random(seed)
    verdicts: dict[float, Verdict] = {}
    runs: dict[float, list[dict[str, Estimate]]] = {}
    probes: list[float] = []
    last = None
    while (load := next_load(verdicts, last, bounds)) is not None:
        assert len(probes) < 60, "the search does not end"
        value = curve(load) + rng.gauss(0.0, noise_ms)
        half = 1.96 * noise_ms
        estimate = Estimate(value, value - half, value + half) if noise_ms else Estimate(value)
        runs.setdefault(load, []).append({"p99_ttft_ms": estimate})
        verdicts[load] = judge(load, runs[load], SLO)
        probes.append(load)
        last = load
    return verdicts, probes


def test_a_rate_search_doubles_then_bisects_to_the_tolerance() -> None:
    crossing = 100.0 * (1 + 50 / 400)  # where the curve reaches 100 ms
    verdicts, probes = search(queue_curve(100.0), Bounds("rate", 1.0, 1024.0, 0.1))
    assert probes[:8] == [1, 2, 4, 8, 16, 32, 64, 128]  # doubled until it failed
    assert probes[8:] == [96, 112, 120]  # then bisected
    end = outcome(verdicts, Bounds("rate", 1.0, 1024.0, 0.1))
    assert end.low is not None and end.high is not None
    assert end.low <= crossing <= end.high
    assert end.high - end.low <= 0.1 * end.low
    assert end.best == end.low and abs(end.low - crossing) / crossing <= 0.1


@pytest.mark.parametrize("seed", range(20))
def test_with_noise_the_answer_stays_within_the_tolerance(seed: int) -> None:
    bounds = Bounds("rate", 4.0, 1024.0, 0.1, repeats=2)
    crossing = 100.0 * (1 + 50 / 400)
    verdicts, probes = search(queue_curve(100.0), bounds, noise_ms=8.0, seed=seed)
    end = outcome(verdicts, bounds)
    assert end.best is not None
    assert abs(end.best - crossing) / crossing <= 0.1 + 0.1  # the bracket's width, and noise
    repeated = [load for load in set(probes) if probes.count(load) > 1]
    for load in repeated:  # only loads near the line were repeated, at most 1 + repeats times
        assert probes.count(load) <= 3
        assert abs(queue_curve(100.0)(load) - 100.0) < 6 * 8.0


def test_a_probe_near_the_line_is_repeated_and_judged_on_its_runs_pooled() -> None:
    bounds = Bounds("rate", 8.0, 8.0, 0.1, repeats=2)
    near = {"p99_ttft_ms": Estimate(98.0, 90.0, 106.0)}  # 100 is inside: noise could flip it
    one = judge(8.0, [near], SLO)
    assert one.near and one.meets
    assert next_load({8.0: one}, 8.0, bounds) == 8.0  # again
    three = judge(8.0, [near] * 3, SLO)
    assert three.runs == 3
    assert (three.estimates["p99_ttft_ms"].low, three.estimates["p99_ttft_ms"].high) == (
        pytest.approx(98 - 8 / math.sqrt(3)),
        pytest.approx(98 + 8 / math.sqrt(3)),
    )
    assert next_load({8.0: three}, 8.0, bounds) is None  # the repeats are spent; max reached


def test_a_concurrency_search_lands_on_the_slot_count() -> None:
    slots = 6  # C <= 6 runs at once: TTFT 40 ms; beyond, every wave waits a service time
    curve = lambda c: 40.0 if c <= slots else 40.0 + 200.0  # noqa: E731
    bounds = Bounds("concurrency", 1.0, 256.0, 0.1)
    verdicts, probes = search(curve, bounds)
    assert all(p == int(p) for p in probes)
    end = outcome(verdicts, bounds)
    assert (end.best, end.high) == (6.0, 7.0)


def test_every_probe_meeting_the_slo_stops_at_the_maximum_and_says_so() -> None:
    bounds = Bounds("rate", 1.0, 50.0, 0.1)
    verdicts, probes = search(queue_curve(1000.0), bounds)
    assert probes == [1, 2, 4, 8, 16, 32, 50]
    end = outcome(verdicts, bounds)
    assert (end.best, end.high) == (50.0, None)
    assert "--search-max 50" in end.reason


def test_a_start_above_the_crossing_halves_until_one_holds() -> None:
    bounds = Bounds("rate", 512.0, 1024.0, 0.1)
    verdicts, probes = search(queue_curve(10.0), bounds)
    assert probes[:7] == [512, 256, 128, 64, 32, 16, 8]
    end = outcome(verdicts, bounds)
    assert end.low is not None and end.high is not None
    assert end.low <= 11.25 <= end.high


def test_no_load_meeting_the_slo_ends_at_the_floor() -> None:
    bounds = Bounds("concurrency", 4.0, 64.0, 0.1)
    verdicts, probes = search(lambda c: 1000.0, bounds)
    assert probes == [4, 2, 1]
    assert outcome(verdicts, bounds).best is None


def test_a_failed_run_misses_the_slo_whatever_the_others_measured() -> None:
    fine = {"p99_ttft_ms": Estimate(10.0)}
    assert judge(4.0, [fine], SLO).meets
    assert not judge(4.0, [fine, {}], SLO).meets
