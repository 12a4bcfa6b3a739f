"""Tests for the benchmark metrics (reference §3.2), on hand-built results with hand-worked
values, plus a cross-check against a literal re-implementation of upstream's per-request loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.report.metrics import (
    RequestResults,
    calculate_metrics,
    calculate_pooling_metrics,
    derive_timings,
    good_requests,
    latency_from_intended,
    peak_concurrency,
    peak_output_tokens_per_s,
    summarize,
)


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def make_results(success, arrival, send, events, prompt_lens, output_lens) -> RequestResults:
    """RequestResults from per-request event lists (the columnar layout built by hand)."""
    counts = [len(e) for e in events]
    return RequestResults(
        success=np.array(success, dtype=bool),
        released_s=np.array(arrival, dtype=np.float64),
        sent_s=np.array(send, dtype=np.float64),
        event_s=np.array([t for e in events for t in e], dtype=np.float64),
        event_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        prompt_lens=np.array(prompt_lens, dtype=np.int64),
        output_lens=np.array(output_lens, dtype=np.int64),
    )


# The hand fixture (seconds):
#   r0  ok      arrival 0.00  send 0.0  events 0.10 0.15 0.25       in 10  out 3
#   r1  ok      arrival 0.05  send 0.2  events 0.50                 in 20  out 1
#   r2  FAILED  arrival 0.10  send 0.3  events 0.45 0.55            in 30  out 0
#   r3  ok      arrival 0.20  send 0.4  events 0.90 1.30 1.35 1.60  in 40  out 6
# event_s is request-major, so it is not sorted in time (0.50 then 0.45).
DURATION = 2.0
PCTS = [50.0, 90.0, 99.0]


@pytest.fixture
def hand():
    return make_results(
        success=[True, True, False, True],
        arrival=[0.0, 0.05, 0.1, 0.2],
        send=[0.0, 0.2, 0.3, 0.4],
        events=[[0.1, 0.15, 0.25], [0.5], [0.45, 0.55], [0.9, 1.3, 1.35, 1.6]],
        prompt_lens=[10, 20, 30, 40],
        output_lens=[3, 1, 0, 6],
    )


def test_derive_timings_by_hand(hand):
    t = derive_timings(hand)
    # ttft = first event - send: 0.1-0, 0.5-0.2, 0.45-0.3 (failed, not used later), 0.9-0.4
    assert t.ttft_s.tolist() == approx([0.1, 0.3, 0.15, 0.5])
    # latency = last event - send; 0 for the failed request
    assert t.latency_s.tolist() == approx([0.25, 0.3, 0.0, 1.2])
    # queue = send - arrival
    assert t.queue_s.tolist() == approx([0.0, 0.15, 0.2, 0.2])
    # gaps within each request only; the straddling gaps 0.50-0.25, 0.45-0.50 and 0.90-0.55
    # are dropped
    assert t.itl_values().tolist() == approx([0.05, 0.10, 0.10, 0.40, 0.05, 0.25])
    assert t.itl_offsets.tolist() == [0, 2, 2, 3, 6]
    assert t.itls_of(0).tolist() == approx([0.05, 0.10])
    assert t.itls_of(1).tolist() == []
    assert t.itls_of(2).tolist() == approx([0.10])
    assert t.itls_of(3).tolist() == approx([0.40, 0.05, 0.25])


def test_derive_timings_empty_requests_at_edges():
    r = make_results(
        success=[False, True, False],
        arrival=[0.0, 0.0, 0.0],
        send=[0.0, 0.5, 0.0],
        events=[[], [1.0, 1.5], []],
        prompt_lens=[1, 1, 1],
        output_lens=[0, 2, 0],
    )
    t = derive_timings(r)
    assert t.ttft_s.tolist() == approx([0.0, 0.5, 0.0])
    assert t.latency_s.tolist() == approx([0.0, 1.0, 0.0])
    assert t.itl_values().tolist() == approx([0.5])
    assert t.itl_offsets.tolist() == [0, 0, 1, 1]


def test_derive_timings_without_any_event():
    r = make_results([False, False], [0.0, 1.0], [0.5, 1.5], [[], []], [5, 5], [0, 0])
    t = derive_timings(r)
    assert t.ttft_s.tolist() == [0.0, 0.0]
    assert t.latency_s.tolist() == [0.0, 0.0]
    assert t.queue_s.tolist() == approx([0.5, 0.5])
    assert len(t.itl_values()) == 0
    assert t.itl_offsets.tolist() == [0, 0, 0]


def test_calculate_metrics_by_hand(hand):
    m = calculate_metrics(hand, derive_timings(hand), DURATION, PCTS)
    assert m.completed == 3
    assert m.failed == 1
    assert m.total_input == 10 + 20 + 40  # the failed request's 30 is left out
    assert m.total_output == 3 + 1 + 0 + 6
    assert m.request_throughput == approx(3 / 2.0)
    assert m.output_throughput == approx(10 / 2.0)
    assert m.total_token_throughput == approx((70 + 10) / 2.0)
    # peak tokens/s: origin = 0.0 (min send), max end = 0.4 + 1.2 = 1.6 -> 3 buckets.
    # bucket 0: 0.10 0.15 0.25 | 0.50 | 0.90 = 5; bucket 1: 1.30 1.35 1.60 = 3.
    # (the failed request's 0.45 and 0.55 would make bucket 0 hold 7)
    assert m.max_output_tokens_per_s == 5.0
    # in flight: [0, 0.25) [0.2, 0.5) [0.4, 1.6): two at 0.2 and at 0.4, never three
    assert m.max_concurrent_requests == 2

    s = m.stats
    # TTFT over ok requests: 0.1 0.3 0.5 -> mean 0.3, median 0.3,
    # std = sqrt((0.2^2 + 0 + 0.2^2) / 3), p90 at rank 0.9*2 = 1.8 -> 0.3 + 0.8*0.2 = 0.46,
    # p99 at rank 1.98 -> 0.3 + 0.98*0.2 = 0.496
    assert s["ttft"].mean_ms == approx(300.0)
    assert s["ttft"].median_ms == approx(300.0)
    assert s["ttft"].std_ms == approx(1000 * math.sqrt(0.08 / 3))
    assert s["ttft"].percentiles_ms == [
        (50.0, approx(300.0)),
        (90.0, approx(460.0)),
        (99.0, approx(496.0)),
    ]
    # TPOT only for out > 1: r0 (0.25-0.1)/2 = 0.075, r3 (1.2-0.5)/5 = 0.14; r1 (out 1) left out
    # mean = median = 0.1075, std = 0.0325, p99 at rank 0.99 -> 0.075 + 0.99*0.065 = 0.13935
    assert s["tpot"].mean_ms == approx(107.5)
    assert s["tpot"].median_ms == approx(107.5)
    assert s["tpot"].std_ms == approx(32.5)
    assert s["tpot"].percentiles_ms[2] == (99.0, approx(139.35))
    # ITL pooled over ok requests: 0.05 0.10 | 0.40 0.05 0.25 (r2's 0.10 left out)
    # sorted 0.05 0.05 0.10 0.25 0.40: mean 0.85/5 = 0.17, median 0.10,
    # var = (0.12^2 + 0.12^2 + 0.07^2 + 0.08^2 + 0.23^2) / 5 = 0.093 / 5 = 0.0186,
    # p50 at rank 2 -> 0.10, p99 at rank 3.96 -> 0.25 + 0.96*0.15 = 0.394
    assert s["itl"].mean_ms == approx(170.0)
    assert s["itl"].median_ms == approx(100.0)
    assert s["itl"].std_ms == approx(1000 * math.sqrt(0.0186))
    assert s["itl"].percentiles_ms[0] == (50.0, approx(100.0))
    assert s["itl"].percentiles_ms[2] == (99.0, approx(394.0))
    # E2EL: 0.25 0.3 1.2 -> mean 1.75/3, median 0.3,
    # deviations -1/3, -0.85/3, 1.85/3 -> var = (1 + 0.7225 + 3.4225) / 9 / 3,
    # p99 at rank 1.98 -> 0.3 + 0.98*0.9 = 1.182
    assert s["e2el"].mean_ms == approx(1750 / 3)
    assert s["e2el"].median_ms == approx(300.0)
    assert s["e2el"].std_ms == approx(1000 * math.sqrt(5.145 / 27))
    assert s["e2el"].percentiles_ms[2] == (99.0, approx(1182.0))
    # queue over ok requests: 0 0.15 0.2; e2el + queue: 0.25 0.45 1.4
    assert s["client_queue_time"].mean_ms == approx(350 / 3)
    assert s["client_queue_time"].median_ms == approx(150.0)
    assert s["e2el_including_client_queue"].mean_ms == approx(700.0)
    assert s["e2el_including_client_queue"].median_ms == approx(450.0)


@pytest.mark.parametrize(
    ("slos", "good"),
    [
        ({"ttft": 350}, 2),  # 0.1 0.3 ok, 0.5 not
        ({"tpot": 1}, 1),  # only r1: out = 1 counts as tpot 0
        ({"e2el": 500}, 2),  # 0.25 0.3 ok, 1.2 not
        ({"ttft": 200, "tpot": 100}, 1),  # r0 only: r1 misses ttft, r3 misses both
        ({"ttft": 600, "tpot": 150, "e2el": 1500}, 3),
        ({"ttft": 50}, 0),
    ],
)
def test_goodput_by_hand(hand, slos, good):
    m = calculate_metrics(hand, derive_timings(hand), DURATION, PCTS, goodput_slos_ms=slos)
    assert m.request_goodput == approx(good / DURATION)


def test_good_requests_limits_are_inclusive():
    ttft = np.array([0.25, 0.5])
    tpot = np.array([0.0, 0.125])
    e2el = np.array([1.0, 2.0])
    assert good_requests(ttft, tpot, e2el, {"ttft": 250}) == 1
    assert good_requests(ttft, tpot, e2el, {"ttft": 500, "tpot": 125, "e2el": 2000}) == 2
    assert good_requests(ttft, tpot, e2el, {"e2el": 1999}) == 1
    assert good_requests(ttft, tpot, e2el, {}) == 2


def test_summarize_empty_sample_is_all_zero():
    s = summarize(np.array([]), [50.0, 99.0])
    assert (s.mean_ms, s.median_ms, s.std_ms) == (0.0, 0.0, 0.0)
    assert s.percentiles_ms == [(50.0, 0.0), (99.0, 0.0)]


def test_summarize_population_std_and_linear_percentiles():
    s = summarize(np.array([0.004, 0.001, 0.002, 0.003]), [25.0, 50.0, 99.9])
    # mean 2.5 ms, population std sqrt((2.25+0.25+0.25+2.25)/4) = sqrt(1.25) ms,
    # p25 at rank 0.75 -> 1.75 ms, p99.9 at rank 2.997 -> 3.997 ms
    assert s.mean_ms == approx(2.5)
    assert s.median_ms == approx(2.5)
    assert s.std_ms == approx(math.sqrt(1.25))
    assert s.percentiles_ms == [(25.0, approx(1.75)), (50.0, approx(2.5)), (99.9, approx(3.997))]


def test_all_failed_run():
    r = make_results(
        success=[False, False],
        arrival=[0.0, 0.0],
        send=[0.0, 0.1],
        events=[[0.2], []],
        prompt_lens=[7, 8],
        output_lens=[0, 0],
    )
    m = calculate_metrics(r, derive_timings(r), 1.0, [99.0], goodput_slos_ms={"ttft": 1000})
    assert (m.completed, m.failed, m.total_input, m.total_output) == (0, 2, 0, 0)
    assert m.request_throughput == 0.0
    assert m.request_goodput == 0.0
    assert m.max_output_tokens_per_s == 0.0
    assert m.max_concurrent_requests == 0
    for stats in m.stats.values():
        assert (stats.mean_ms, stats.median_ms, stats.std_ms) == (0.0, 0.0, 0.0)
        assert stats.percentiles_ms == [(99.0, 0.0)]


# --- peaks ----------------------------------------------------------------------------------


def test_peak_tokens_two_buckets():
    # origin 10.0; max end max(10.8, 11.7) = 11.7 -> ceil(1.7) + 1 = 3 buckets
    # bucket 0: 10.2 10.6 10.9 = 3 ; bucket 1: 11.0 11.3 11.5 11.7 = 4
    send = np.array([10.0, 10.5])
    latency = np.array([0.8, 1.2])
    tokens = np.array([10.2, 10.6, 10.9, 11.0, 11.3, 11.5, 11.7])
    assert peak_output_tokens_per_s(send, latency, tokens) == 4.0
    # without the last token, bucket 0 wins with 3
    assert peak_output_tokens_per_s(send, latency, tokens[:-2]) == 3.0


def test_peak_tokens_buckets_start_at_first_send_not_at_zero():
    # relative to 0.0 these would fall in buckets 5, 5, 6, 6; relative to 5.6 they are 0 0 0 1
    send = np.array([5.6])
    latency = np.array([1.0])
    assert peak_output_tokens_per_s(send, latency, np.array([5.7, 5.9, 6.1, 6.6])) == 3.0


def test_peak_tokens_empty():
    empty = np.array([])
    assert peak_output_tokens_per_s(empty, empty, empty) == 0.0


@pytest.mark.parametrize(
    ("intervals", "peak"),
    [
        ([], 0),
        ([(0.0, 1.0)], 1),
        ([(0.0, 1.0), (1.0, 2.0)], 1),  # back to back: half-open, no overlap
        ([(0.0, 1.5), (1.0, 2.0)], 2),
        ([(0.0, 1.0), (0.0, 1.0)], 2),
        ([(0.0, 3.0), (1.0, 2.0), (1.5, 2.5)], 3),
        ([(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (0.5, 1.0)], 2),
        ([(1.0, 1.0)], 0),  # [1, 1) is empty: never in flight
        ([(0.0, 2.0), (1.0, 1.0)], 1),
        ([(0.0, 0.0), (0.0, 1.0), (0.0, 1.0)], 2),
        ([(0.0, 1.0), (1.0, 1.0), (1.0, 2.0)], 1),
    ],
)
def test_peak_concurrency(intervals, peak):
    start = np.array([a for a, _ in intervals], dtype=np.float64)
    end = np.array([b for _, b in intervals], dtype=np.float64)
    assert peak_concurrency(start, end) == peak


# --- cross-check against upstream's loop ---------------------------------------------------


def upstream_metrics(success, arrival, send, events, prompt_lens, output_lens, dur, pcts, slos):
    """A literal per-request re-implementation of upstream's calculate_metrics."""
    out_lens, ttfts, tpots, all_tpots, itls, e2els, queues = [], [], [], [], [], [], []
    total_input = completed = 0
    ok_outputs = []
    for i in range(len(success)):
        if not success[i]:
            out_lens.append(0)
            continue
        st = send[i]
        ev = events[i]
        ttft = ev[0] - st
        itl = []
        for k in range(1, len(ev)):
            itl.append(ev[k] - ev[k - 1])
        latency = ev[-1] - st
        out = output_lens[i]
        out_lens.append(out)
        total_input += prompt_lens[i]
        tpot = 0
        if out > 1:
            tpot = (latency - ttft) / (out - 1)
            tpots.append(tpot)
        all_tpots.append(tpot)
        itls += itl
        ttfts.append(ttft)
        e2els.append(latency)
        queues.append(st - arrival[i])
        completed += 1
        ok_outputs.append((st, ttft, itl, latency))

    good = 0
    for ttft, tpot, e2el in zip(ttfts, all_tpots, e2els, strict=True):
        checks = []
        if "ttft" in slos:
            checks.append(slos["ttft"] / 1000 >= ttft)
        if "tpot" in slos:
            checks.append(slos["tpot"] / 1000 >= tpot)
        if "e2el" in slos:
            checks.append(slos["e2el"] / 1000 >= e2el)
        good += all(checks)

    max_tokens = 0.0
    max_conc = 0
    if ok_outputs:
        min_start = min(o[0] for o in ok_outputs)
        max_end = max(o[0] + o[3] for o in ok_outputs)
        buckets = [0] * (int(np.ceil(max_end - min_start)) + 1)
        for st, ttft, itl, _ in ok_outputs:
            times = [st + ttft]
            now = times[0]
            for gap in itl:
                now += gap
                times.append(now)
            for t in times:
                b = int(t - min_start)
                if 0 <= b < len(buckets):
                    buckets[b] += 1
        max_tokens = float(max(buckets))
        sweep = [(st, 1) for st, *_ in ok_outputs] + [(o[0] + o[3], -1) for o in ok_outputs]
        running = 0
        for _, delta in sorted(sweep):  # (t, -1) sorts before (t, +1)
            running += delta
            max_conc = max(max_conc, running)

    def stats(x):
        x = x or [0]
        return (
            float(np.mean(x)) * 1000,
            float(np.median(x)) * 1000,
            float(np.std(x)) * 1000,
            [(p, float(np.percentile(x, p)) * 1000) for p in pcts],
        )

    total_output = sum(out_lens)
    return {
        "completed": completed,
        "failed": len(success) - completed,
        "total_input": total_input,
        "total_output": total_output,
        "request_throughput": completed / dur,
        "request_goodput": good / dur,
        "output_throughput": total_output / dur,
        "total_token_throughput": (total_input + total_output) / dur,
        "max_output_tokens_per_s": max_tokens,
        "max_concurrent_requests": max_conc,
        "stats": {
            "ttft": stats(ttfts),
            "tpot": stats(tpots),
            "itl": stats(itls),
            "e2el": stats(e2els),
            "client_queue_time": stats(queues),
            "e2el_including_client_queue": stats(
                [a + b for a, b in zip(e2els, queues, strict=True)]
            ),
        },
    }


def random_fixture(seed: int, n: int = 200):
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0.0, 20.0, n))
    queue = np.where(rng.random(n) < 0.5, 0.0, rng.exponential(0.3, n))
    send = arrival + queue
    success = rng.random(n) < 0.85
    events, out = [], []
    for i in range(n):
        count = int(rng.integers(1, 40)) if success[i] else int(rng.integers(0, 4))
        first = send[i] + rng.uniform(0.02, 0.8)
        gaps = rng.exponential(0.03, max(count - 1, 0))
        events.append([first, *(first + np.cumsum(gaps)).tolist()][:count])
        if not success[i]:
            out.append(0)
        elif rng.random() < 0.1:
            out.append(1)  # e.g. one token, or the no-tokenizer fallback
        else:
            out.append(count + int(rng.integers(0, 3)))  # a chunk may hold several tokens
    prompt = rng.integers(1, 2000, n)
    return success.tolist(), arrival.tolist(), send.tolist(), events, prompt.tolist(), out


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_upstream_loop_on_random_fixture(seed):
    success, arrival, send, events, prompt, out = random_fixture(seed)
    assert 0 < sum(success) < len(success)
    assert any(not ok and ev for ok, ev in zip(success, events, strict=True))
    pcts = [25.0, 50.0, 90.0, 99.0, 99.9]
    slos = {"ttft": 500.0, "tpot": 40.0, "e2el": 1500.0}
    dur = max(e[-1] for e in events if e) + 0.25

    results = make_results(success, arrival, send, events, prompt, out)
    m = calculate_metrics(results, derive_timings(results), dur, pcts, goodput_slos_ms=slos)
    ref = upstream_metrics(success, arrival, send, events, prompt, out, dur, pcts, slos)

    for name in ("completed", "failed", "total_input", "total_output", "max_concurrent_requests"):
        assert getattr(m, name) == ref[name], name
    for name in (
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
    ):
        assert getattr(m, name) == approx(ref[name]), name
    assert 0 < ref["request_goodput"] < ref["request_throughput"]  # the SLOs bite
    assert set(m.stats) == set(ref["stats"])
    for name, (mean, median, std, percentiles) in ref["stats"].items():
        got = m.stats[name]
        assert got.mean_ms == approx(mean), name
        assert got.median_ms == approx(median), name
        assert got.std_ms == approx(std), name
        assert [p for p, _ in got.percentiles_ms] == [p for p, _ in percentiles], name
        assert [v for _, v in got.percentiles_ms] == approx([v for _, v in percentiles]), name


def test_latency_from_intended_counts_from_the_schedule() -> None:
    results = RequestResults(
        success=np.array([True, False, True]),
        released_s=np.array([0.0, 0.1, 0.3]),
        sent_s=np.array([0.0, 0.1, 0.5]),  # request 2 waited 0.2 s for a slot
        event_s=np.array([0.05, 0.07, 0.6, 0.65, 0.7]),
        event_offsets=np.array([0, 2, 2, 5]),
        prompt_lens=np.array([1, 1, 1]),
        output_lens=np.array([2, 0, 3]),
    )
    ttft, e2el = latency_from_intended(results, scheduled_s=np.array([0.0, 0.1, 0.25]))
    np.testing.assert_allclose(ttft, [0.05, 0.35])
    np.testing.assert_allclose(e2el, [0.07, 0.45])


def test_pooling_metrics_by_hand() -> None:
    # A pooling answer is one instant (the end of its body): TTFT = E2EL = that instant - send.
    #   r0  ok      arrival 0.0  send 0.0  answer 0.1   in 10  sequences 1
    #   r1  ok      arrival 0.1  send 0.2  answer 0.5   in 20  sequences 3
    #   r2  FAILED  arrival 0.2  send 0.3  (no answer)  in 30  sequences 1
    #   r3  ok      arrival 0.3  send 0.4  answer 0.6   in 40  sequences 2
    results = make_results(
        success=[True, True, False, True],
        arrival=[0.0, 0.1, 0.2, 0.3],
        send=[0.0, 0.2, 0.3, 0.4],
        events=[[0.1], [0.5], [], [0.6]],
        prompt_lens=[10, 20, 30, 40],
        output_lens=[0, 0, 0, 0],
    )
    timings = derive_timings(results)
    metrics = calculate_pooling_metrics(
        results, timings, np.array([1, 3, 1, 2]), DURATION, [50.0, 90.0]
    )
    assert (metrics.completed, metrics.failed) == (3, 1)
    assert metrics.total_input == 70  # successful requests only
    assert metrics.total_input_sequences == 6
    assert metrics.request_throughput == approx(1.5)
    assert metrics.input_sequence_throughput == approx(3.0)
    assert metrics.total_token_throughput == approx(35.0)
    e2el = metrics.stats["e2el"]  # latencies 0.1, 0.3, 0.2
    assert e2el.mean_ms == approx(200.0)
    assert e2el.median_ms == approx(200.0)
    assert e2el.std_ms == approx(1000 * math.sqrt(0.02 / 3))  # population std
    # Linear interpolation: rank 0.9 * 2 = 1.8 between 0.2 and 0.3.
    assert e2el.percentiles_ms == [(50.0, approx(200.0)), (90.0, approx(280.0))]
    queue = metrics.stats["client_queue_time"]  # 0.0, 0.1, 0.1
    assert queue.mean_ms == approx(200 / 3)
    assert metrics.stats["e2el_including_client_queue"].mean_ms == approx(200.0 + 200 / 3)
