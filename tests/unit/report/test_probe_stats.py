"""--probe-request-rate: upstream's probe statistics and summary block, from hand-made results."""

from __future__ import annotations

import pytest

from loadgen.report.probes import ProbeResults, probe_lines, probe_stats


def test_stats_are_upstreams_over_successful_probes() -> None:
    stats = probe_stats(ProbeResults(latencies_s=[0.010, 0.030, 0.020, 0.040], failures=2))
    assert stats == {
        "probe_completed": 4,
        "probe_failed": 2,
        "probe_median_e2el_ms": pytest.approx(25.0),
        "probe_p99_e2el_ms": pytest.approx(39.7),  # linear: 30 + 0.97 * (40 - 30)
        "probe_max_e2el_ms": pytest.approx(40.0),
    }
    assert probe_stats(ProbeResults(latencies_s=[], failures=3)) is None  # as upstream: no keys
    assert probe_lines(stats) == [
        "------------------Probe Requests------------------",
        "Probe requests completed:                4         ",
        "Probe requests failed:                   2         ",
        "Median probe E2EL (ms):                  25.00     ",
        "P99 probe E2EL (ms):                     39.70     ",
        "Max probe E2EL (ms):                     40.00     ",
    ]
