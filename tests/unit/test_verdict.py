"""The client's verdict on itself, from hand-made samples; no sockets."""

from __future__ import annotations

import math

import numpy as np

from loadgen.report.verdict import measure, verdict

MS = 1_000_000  # ns


def health(loop_lag_ms, cpu_pct=(30.0,), send_lag_ms=(0.1,), rate=100.0):
    return measure(
        np.asarray(send_lag_ms, dtype=np.float64),
        (np.asarray(loop_lag_ms, dtype=np.float64) * MS).astype(np.int64),
        [int(p * 10 * MS) for p in cpu_pct],
        [1000 * MS] * len(cpu_pct),
        rate,
    )


def test_ok_when_every_figure_is_within_its_threshold() -> None:
    h = health([0.1] * 99 + [0.9], cpu_pct=(40.0, 55.0), send_lag_ms=[0.5] * 100)
    assert h.worker_cpu_pct == [40.0, 55.0]
    assert math.isclose(h.loop_lag_max_ms, 0.9)
    assert verdict(h) == (
        "client: OK (send lag p99 0.50 ms, loop lag p99 0.11 ms, worker CPU max 55 %)"
    )


def test_loop_lag_p99_over_1_ms_is_client_bound() -> None:
    h = health([0.1] * 97 + [5.0] * 3)
    assert h.loop_lag_p99_ms > 1.0
    assert verdict(h).startswith("client-bound: loop lag p99 5.00 ms > 1 ms (")


def test_a_single_late_sample_in_a_hundred_does_not_decide() -> None:
    # p99 by linear interpolation of 100 samples: 0.01 of the way from 0.1 to 50 ms.
    h = health([0.1] * 99 + [50.0])
    assert math.isclose(h.loop_lag_p99_ms, 0.1 + 0.01 * 49.9)
    assert verdict(h).startswith("client: OK")


def test_saturated_worker_is_client_bound_even_with_low_lag() -> None:
    text = verdict(health([0.1] * 10, cpu_pct=(50.0, 93.0)))
    assert text.startswith("client-bound: worker CPU 93 % >= 90 % (")


def test_send_lag_judged_only_at_a_finite_rate() -> None:
    late = [3.0] * 100
    assert verdict(health([0.1], send_lag_ms=late)).startswith(
        "client-bound: send lag p99 3.00 ms > 2 ms"
    )
    at_inf = verdict(health([0.1], send_lag_ms=late, rate=math.inf))
    assert at_inf.startswith("client: OK (send lag p99 3.00 ms (rate inf),")


def test_every_reason_is_listed() -> None:
    text = verdict(health([9.0] * 10, cpu_pct=(99.0,), send_lag_ms=[7.0]))
    assert text.count(";") == 2
    for part in ("loop lag p99 9.00 ms", "worker CPU 99 %", "send lag p99 7.00 ms"):
        assert part in text


def test_no_samples_is_zero_not_an_error() -> None:
    h = measure(np.zeros(0), np.zeros(0, np.int64), [0], [0], 10.0)
    assert (h.loop_lag_p99_ms, h.send_lag_p99_ms, h.worker_cpu_pct) == (0.0, 0.0, [0.0])
