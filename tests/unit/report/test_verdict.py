"""The client's verdict on itself, from hand-made figures; no sockets. Each cause is provoked by
its figures alone, and the thresholds are checked to be relative to what was measured."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from loadgen.records.model import HostUsage
from loadgen.report.verdict import (
    HOST_BUSY,
    PROBE_TICK_MS,
    SATURATED,
    TOO_FAST,
    ClientHealth,
    RunScale,
    aligned_delay_ms,
    judge,
    measure,
    not_judged,
    verdict,
)

MS = 1_000_000  # ns


def host(
    other: float = 3.0,
    *,
    cpus: int = 2,
    demand: tuple[float, ...] = (6.0,),
    wait: tuple[float, ...] = (1.0,),
    peak: tuple[float, ...] | None = None,
    peak_cpu: tuple[float, ...] | None = None,
    started: float = 0.0,
    steal: float = 0.0,
    busiest: tuple[str, int, float, bool] = ("", 0, 0.0, False),
) -> HostUsage:
    name, pid, pct, is_started = busiest
    return HostUsage(
        cpus=cpus,
        wall_s=10.0,
        loadgen_pct=5.0,
        started_pct=started,
        other_pct=other,
        steal_pct=steal,
        idle_pct=100.0 - 5.0 - other - started - steal,
        busiest_name=name,
        busiest_pid=pid,
        busiest_pct=pct,
        busiest_started=is_started,
        worker_demand_pct=list(demand),
        worker_wait_pct=list(wait),
        worker_peak_demand_pct=list(peak if peak is not None else demand),
        worker_peak_cpu_pct=list(
            peak_cpu if peak_cpu is not None else (d - w for d, w in zip(demand, wait, strict=True))
        ),
    )


def health(
    loop_lag_ms: list[float],
    *,
    cpu_pct: tuple[float, ...] = (5.0,),
    send_lag_ms: list[float] = (0.1,),  # type: ignore[assignment]
    rate: float = 10.0,
    itl: float | None = 20.0,
    ttft: float | None = 100.0,
    gap: float | None = None,
    usage: HostUsage | None = None,
    measured: bool = True,
) -> ClientHealth:
    return measure(
        np.asarray(send_lag_ms, dtype=np.float64),
        (np.asarray(loop_lag_ms, dtype=np.float64) * MS).astype(np.int64),
        [int(p * 10 * MS) for p in cpu_pct],
        [1000 * MS] * len(cpu_pct),
        rate,
        scale=RunScale(itl_ms=itl, ttft_ms=ttft, arrival_gap_ms=gap),
        host=(usage or host(demand=cpu_pct, wait=(0.0,) * len(cpu_pct))) if measured else None,
    )


def tail(ms: float) -> list[float]:
    """A loop-lag sample whose p99 is ``ms`` and p50 0.1 ms, as a run's usually is."""
    return [0.1] * 95 + [ms] * 5


def test_quiet_run_is_ok_and_says_how_much_delay_its_timings_carry() -> None:
    h = health([0.1] * 99 + [0.9], cpu_pct=(4.0, 5.0))
    assert h.worker_cpu_pct == [4.0, 5.0]
    assert math.isclose(h.loop_lag_max_ms, 0.9)
    assert verdict(h) == (
        "client: OK: timings carry ≤ 0.11 ms of client delay at p99, 0.5 % of the median ITL "
        "20.00 ms; worker CPU max 5 %, other processes 3 % of the CPUs"
    )


@pytest.mark.parametrize(
    ("itl", "ttft", "ok"),
    [
        (20.0, 100.0, True),  # 1 ms is 5 % of a 20 ms ITL
        (5.0, 100.0, False),  # 20 % of a 5 ms ITL
        (None, 2000.0, True),  # no ITL (1-token answers): 1 ms against a 2 s TTFT
        (None, 8.0, False),  # 12.5 % of an 8 ms TTFT
    ],
)
def test_the_same_delay_is_judged_against_what_was_measured(
    itl: float | None, ttft: float, ok: bool
) -> None:
    text = verdict(health(tail(1.0), itl=itl, ttft=ttft))
    assert text.startswith("client: OK") is ok, text


def test_the_delay_is_quoted_against_the_median_it_weighs_most_on() -> None:
    judged = judge(health(tail(1.0), itl=5.0, ttft=100.0))
    assert (judged.quantity, judged.share, judged.delay_ms) == ("median ITL", 0.2, 1.0)
    assert "20 % of the median ITL 5.00 ms" in verdict(health(tail(1.0), itl=5.0, ttft=100.0))
    assert "50× the median ITL 0.02 ms" in verdict(health(tail(1.0), itl=0.02))


def test_a_single_late_sample_in_a_hundred_does_not_decide() -> None:
    # p99 by linear interpolation of 100 samples: 0.01 of the way from 0.1 to 50 ms.
    h = health([0.1] * 99 + [50.0])
    assert math.isclose(h.loop_lag_p99_ms, 0.1 + 0.01 * 49.9)
    assert verdict(h).startswith("client: OK")


def test_a_saturated_worker_is_named_with_the_remedy() -> None:
    usage = host(demand=(40.0, 99.0), wait=(1.0, 2.0))
    text = verdict(health(tail(5.0), cpu_pct=(39.0, 97.0), usage=usage))
    assert judge(health(tail(5.0), cpu_pct=(39.0, 97.0), usage=usage)).causes == [SATURATED]
    assert text == (
        "client-bound: timings carry ≤ 5.00 ms of client delay at p99, 25 % of the median ITL "
        "20.00 ms; worker CPU max 97 %, other processes 3 % of the CPUs; workers saturated: "
        "lower the rate: every one of the 2 CPUs has a worker"
    )


@pytest.mark.parametrize(
    ("workers", "cpus", "rate", "remedy"),
    [
        (1, 4, 10.0, "add --workers, 1 worker on 4 CPUs, or lower the rate"),
        (2, 4, math.inf, "add --workers, 2 workers on 4 CPUs, or lower --max-concurrency"),
        (4, 4, 10.0, "lower the rate: every one of the 4 CPUs has a worker"),
    ],
)
def test_the_saturation_remedy_depends_on_the_free_cpus(
    workers: int, cpus: int, rate: float, remedy: str
) -> None:
    usage = host(cpus=cpus, demand=(95.0,) * workers, wait=(0.0,) * workers)
    text = verdict(health(tail(0.1), cpu_pct=(95.0,) * workers, rate=rate, usage=usage))
    assert text.endswith(f"; workers saturated: {remedy}")


def test_saturation_over_the_run_is_judged_even_when_the_delay_is_small() -> None:
    # A worker at its ceiling caps the throughput it reports, whatever its stamps carry.
    text = verdict(health(tail(0.1), cpu_pct=(95.0,), usage=host(demand=(96.0,), wait=(1.0,))))
    assert text.startswith("client-bound: timings carry ≤ 0.10 ms")
    assert "workers saturated" in text


def test_saturation_in_a_burst_explains_a_delay_that_matters_only() -> None:
    burst = host(demand=(30.0,), wait=(2.0,), peak=(100.0,), peak_cpu=(97.0,))
    assert judge(health(tail(0.2), usage=burst)).causes == []  # 1 % of ITL: nothing to explain
    assert judge(health(tail(5.0), usage=burst)).causes == [SATURATED]


def test_a_worker_that_mostly_waited_for_a_cpu_was_held_up_by_the_host() -> None:
    # Runnable 95 % of the run but on a CPU for 10 %: the host, not the worker's own work.
    usage = host(60.0, demand=(95.0,), wait=(85.0,), busiest=("hog", 42, 55.0, False))
    text = verdict(health(tail(5.0), cpu_pct=(10.0,), usage=usage))
    assert judge(health(tail(5.0), cpu_pct=(10.0,), usage=usage)).causes == [HOST_BUSY]
    assert "worker CPU max 10 %, a worker 85 % of the run waiting for a CPU" in text


def test_a_busy_host_is_named_with_its_busiest_process_and_the_remedy() -> None:
    usage = host(70.0, busiest=("stress-ng", 4242, 48.0, False))
    text = verdict(health(tail(3.0), itl=5.0, usage=usage))
    assert judge(health(tail(3.0), itl=5.0, usage=usage)).causes == [HOST_BUSY]
    assert text == (
        "client-bound: timings carry ≤ 3.00 ms of client delay at p99, 60 % of the median ITL "
        "5.00 ms; worker CPU max 5 %, other processes 70 % of the CPUs; host busy, most by "
        "stress-ng pid 4242 48 %: stop it or run loadgen on another machine"
    )


def test_the_server_under_test_on_this_host_is_named_as_such() -> None:
    usage = dataclasses.replace(
        host(70.0, busiest=("llama-server", 77, 60.0, False)), busiest_serves=True
    )
    assert verdict(health(tail(3.0), itl=5.0, usage=usage)).endswith(
        "host busy, most by the server under test (llama-server pid 77 60 %), which shares these "
        "CPUs: its share is not the client's; run the server on another machine or give each "
        "its own CPUs (taskset -c)"
    )


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        (host(5.0, steal=40.0), "host busy, mostly hypervisor steal: use a host with dedicated"),
        (
            host(2.0, started=30.0, busiest=("python", 7, 30.0, True)),
            "host busy, most by the --mock server: run the server on another machine",
        ),
    ],
)
def test_steal_and_the_mock_server_have_their_own_remedy(usage: HostUsage, said: str) -> None:
    assert said in verdict(health(tail(3.0), itl=5.0, usage=usage))


def test_a_busy_host_that_did_not_delay_the_stamps_reads_ok() -> None:
    # The case of issue 15: 2 % worker CPU on a busy host was 'client-bound' whatever the ITL.
    text = verdict(health(tail(1.7), itl=20.0, usage=host(90.0)))
    assert text.startswith("client: OK: timings carry ≤ 1.70 ms of client delay at p99, 8 %")
    assert text.endswith("other processes 90 % of the CPUs")


def test_itls_within_a_few_wake_ups_are_not_resolved() -> None:
    # Loop lag p50 0.12 ms: an ITL under 0.36 ms cannot be told from the stamps' own delay.
    h = health([0.12] * 90 + [0.4] * 10, itl=0.02)
    judged = judge(h)
    assert (judged.causes, judged.unresolved) == ([TOO_FAST], ["ITL"])
    assert verdict(h).endswith(
        "; too fast for this machine: ITLs under 0.36 ms, 3× its wake-up delay, are not "
        "resolved: read TPOT, a per-request mean"
    )


def test_arrivals_within_a_few_timer_delays_are_not_resolved() -> None:
    h = health(tail(0.1), send_lag_ms=[0.2] * 100, rate=5000.0, gap=0.2, ttft=100.0)
    assert judge(h).unresolved == ["arrivals"]
    assert "arrivals under 0.60 ms apart, 3× its timer delay, leave in bunches" in verdict(h)
    at_inf = health(tail(0.1), send_lag_ms=[0.2] * 100, rate=math.inf, gap=None)
    assert judge(at_inf).unresolved == []


def test_a_delay_that_matters_with_nothing_to_blame_is_the_machines_own() -> None:
    # Quiet workers, quiet host, ITL well above the wake-up delay, yet a 0.9 ms p99 on 5 ms.
    h = health([0.12] * 95 + [0.9] * 5, itl=5.0)
    assert judge(h).causes == [TOO_FAST]
    assert verdict(h).endswith(
        "; too fast for this machine: neither loadgen's workers nor other processes explain "
        "the delay, so times under 9.0 ms are finer than it resolves to 10 %: read TPOT, a "
        "per-request mean"
    )


def test_every_cause_that_holds_is_listed_with_its_remedy() -> None:
    usage = host(60.0, demand=(99.0,), wait=(30.0,), busiest=("hog", 9, 50.0, False))
    h = health([0.2] * 90 + [9.0] * 10, cpu_pct=(69.0,), itl=0.3, usage=usage)
    assert judge(h).causes == [SATURATED, HOST_BUSY, TOO_FAST]
    text = verdict(h)
    assert "; workers saturated: add --workers" in text
    assert "; host busy, most by hog pid 9 50 %: stop it" in text
    assert "; too fast for this machine: ITLs under 0.60 ms" in text


def test_send_lag_weighs_on_ttft_at_a_finite_rate_only() -> None:
    late = [3.0] * 100
    paced = health(tail(0.1), send_lag_ms=late, ttft=20.0)
    assert verdict(paced).startswith(
        "client-bound: requests left ≤ 3.00 ms late at p99, 15 % of the median TTFT 20.00 ms;"
    )
    assert verdict(health(tail(0.1), send_lag_ms=late, ttft=20.0, rate=math.inf)).startswith(
        "client: OK: timings carry ≤ 0.10 ms"
    )


def test_without_host_figures_the_verdict_says_so_and_still_judges() -> None:
    text = verdict(health(tail(0.2), measured=False))
    assert text.endswith("; worker CPU max 5 %, host CPU not measured")
    assert verdict(health(tail(0.1), cpu_pct=(95.0,), measured=False)).endswith(
        "; workers saturated: add --workers if CPUs are free, or lower the rate"
    )


def test_no_samples_is_said_not_an_error() -> None:
    h = measure(np.zeros(0), np.zeros(0, np.int64), [0], [0], 10.0)
    assert (h.loop_lag_p99_ms, h.send_lag_p99_ms, h.worker_cpu_pct) == (0.0, 0.0, [0.0])
    assert verdict(h).startswith("client: OK: client delay not sampled")


@pytest.mark.parametrize(
    "h",
    [
        health(tail(0.3)),
        health(tail(5.0), cpu_pct=(97.0,), usage=host(demand=(99.0,), wait=(1.0,))),
        health(tail(3.0), itl=0.5, usage=host(70.0, busiest=("x", 1, 60.0, False))),
        health([0.12] * 95 + [0.9] * 5, itl=0.2, send_lag_ms=[0.25] * 100, gap=0.5, rate=2e3),
        health(tail(0.3), measured=False),
    ],
)
def test_one_line_with_no_brackets_and_each_figure_once(h: ClientHealth) -> None:
    text = verdict(h)
    assert "\n" not in text and not re.search(r"[()\[\]]", text)
    figures = re.findall(r"\d+\.\d+ ms", text)
    assert len(figures) == len(set(figures)), text


def test_the_json_keeps_the_figures_and_adds_the_judgement() -> None:
    usage = host(70.0, busiest=("hog", 5, 60.0, False))
    h = health(tail(3.0), itl=5.0, usage=usage)
    out = h.to_json()
    # The keys the JSON had before keep their meaning.
    assert out["loop_lag_p99_ms"] == 3.0 and out["loop_lag_samples"] == 100
    assert (out["send_lag_p99_ms"], out["send_lag_judged"]) == (0.1, True)
    assert out["worker_cpu_pct"] == [5.0]
    assert out["delay_p99_ms"] == 3.0 and out["delay_of"] == "median ITL"
    assert math.isclose(out["delay_share"], 0.6)
    assert out["causes"] == [HOST_BUSY]
    assert out["host"]["other_pct"] == 70.0 and out["host"]["busiest_name"] == "hog"
    assert out["judged_against_ms"] == {
        "median_itl": 5.0,
        "median_ttft": 100.0,
        "median_arrival_gap": None,
    }
    assert out["thresholds"] == {
        "delay_share": 0.1,
        "worker_cpu_pct": 90.0,
        "host_busy_pct": 25.0,
        "resolution_multiple": 3.0,
    }
    # Against a zero median the share is infinite, which JSON does not hold: null.
    assert health(tail(1.0), itl=0.0).to_json()["delay_share"] is None


def test_a_run_that_did_not_end_is_not_judged() -> None:
    text = not_judged(measure(np.array([0.5]), np.zeros(0, np.int64), [], [], math.inf))
    assert text == (
        "client: not judged: the run did not end, so its workers' loop lag and CPU were never "
        "reported; send lag p99 0.50 ms at --request-rate inf"
    )


def test_aligned_delay_is_the_longest_lag_when_a_burst_holds_the_first_tokens() -> None:
    lags = (np.array([0.1] * 990 + [8.0] * 9 + [20.0]) * MS).astype(np.int64)
    burst = np.concatenate([np.full(64, 0.003), np.full(64, 3.2), np.full(64, 6.4)])
    # Each wave's 64 first tokens share a 10 ms slot: 1 % of 192 is under one slot's worth,
    # so the longest stall may have met them all; plus the probe's tick.
    assert aligned_delay_ms(lags, burst) == pytest.approx(20.0 + PROBE_TICK_MS)


def test_aligned_delay_excuses_the_densest_slots_within_one_percent() -> None:
    lags = (np.arange(1, 1001, dtype=np.float64) * 0.01 * MS).astype(np.int64)  # 0.01..10 ms
    # One first token per slot, as paced runs are (mid-slot: no rounding moves one across).
    spread = np.concatenate([[0.0], np.arange(1, 1000) * 0.01 + 0.005])
    # 10 requests may lie above the p99: the 10 longest lags are excused, the 11th bounds.
    assert aligned_delay_ms(lags, spread) == pytest.approx(9.9 + PROBE_TICK_MS)
    assert aligned_delay_ms(np.zeros(0, np.int64), spread) is None
    assert aligned_delay_ms(lags, np.zeros(0)) is None


def burst_health(rate: float, lags_ms: list[float]) -> ClientHealth:
    first = np.concatenate([np.full(64, 0.002), np.full(64, 3.2)])
    return measure(
        np.zeros(0),
        (np.asarray(lags_ms) * MS).astype(np.int64),
        [50 * MS],
        [1000 * MS],
        rate,
        scale=RunScale(itl_ms=50.0, ttft_ms=15.0),
        host=host(),
        first_token_s=first,
    )


def test_a_closed_loop_states_the_delay_its_bursts_meet() -> None:
    h = burst_health(math.inf, [0.1] * 995 + [12.0] * 5)
    assert h.burst_delay_p99_ms == pytest.approx(12.0 + PROBE_TICK_MS)
    assert h.client_delay_ms == h.burst_delay_p99_ms > h.loop_lag_p99_ms
    text = verdict(h)
    assert text.startswith("client-bound: timings carry ≤ 13.00 ms of client delay at p99, 87 %")
    assert f"loop lag p99 over the run's time was {h.loop_lag_p99_ms:.2f} ms" in text
    assert "\n" not in text and not re.search(r"[()\[\]]", text)
    assert h.to_json()["burst_delay_p99_ms"] == h.burst_delay_p99_ms


def test_a_paced_run_keeps_the_loop_lag_p99_over_time() -> None:
    # Its arrivals follow the schedule, not the loop: a stall meets them as it meets time.
    h = burst_health(10.0, [0.1] * 995 + [12.0] * 5)
    assert h.burst_delay_p99_ms is None and h.client_delay_ms == h.loop_lag_p99_ms
    assert "closed loop" not in verdict(h)
