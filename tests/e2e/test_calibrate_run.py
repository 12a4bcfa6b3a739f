"""`loadgen calibrate` with the real processes: the recording mock server, the client run, and the
command itself."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from helpers import hang_guard, slowdown

from loadgen.calibrate import ClientRun, RecordingServer, compare, run_client
from loadgen.mock.recorder import TimingRecords


def _post_chat(url: str) -> None:
    body = {
        "model": "loadgen-mock",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3,
        "ignore_eos": True,
        "stream": True,
    }
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def test_recorded_timings_against_a_real_run(tmp_path: Path) -> None:
    server = RecordingServer(tmp_path, ttft_ms=0.0, itl_ms=5.0)
    try:
        url = server.start()
        before = time.perf_counter_ns()
        result, prefix = run_client(url, 0, 8, 200.0, 20, 2, 32, 8, tmp_path, timeout_s=60)
        after = time.perf_counter_ns()
        _post_chat(url)  # no x-request-id: recorded under its response id, role chunk counted
        live = server.records()
        server.stop()
    finally:
        server.kill()
    saved = TimingRecords.load(tmp_path / "server-timings.npz")
    for name in ("request_ids", "arrival_ns", "event_offsets", "event_ns"):
        np.testing.assert_array_equal(getattr(live, name), getattr(saved, name))

    ids = saved.request_ids.tolist()
    assert sorted(ids[:20]) == sorted(f"{prefix}{i}" for i in range(20))
    assert ids[20].startswith("chatcmpl-") and len(saved.events_of(20)) == 4
    arrivals = saved.arrival_ns[:20]
    # One clock for all processes: the server's instants fall inside the client's run.
    assert ((before < arrivals) & (arrivals < after)).all()
    for row in range(20):
        events = saved.events_of(row)
        assert len(events) == 8
        assert (np.diff(events) >= 0).all() and events[0] >= saved.arrival_ns[row]
        assert events[-1] < after

    comparison = compare(ClientRun.from_result(result), saved, prefix)
    assert (comparison.failed, comparison.unrecorded, comparison.count_mismatches) == (0, 0, 0)
    assert comparison.events == 160 and len(comparison.gap_error_s) == 20 * 7
    assert (comparison.ttft_error_s >= 0).all()
    # The client's TTFT is the server's plus the legs between them: 50 ms is ample on a quiet
    # machine, and a busy one stretches it as it stretched the calibration run.
    assert (comparison.ttft_error_s < 0.050 * slowdown()).all()
    assert (comparison.delivery_s > 0).all()  # nothing is read before it is written
    assert (comparison.send_leg_s > 0).all()


def test_calibrate_command(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "loadgen", "calibrate", "--concurrency", "4,8"]
    command += ["--output-len", "8", "--itl-ms", "5", "--work-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=hang_guard(120))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:3] for line in lines[4:6]] == [["4", "12", "0"], ["8", "24", "0"]]
    for row in lines[4:6]:
        # The floor measured before the step: timer and datagram p99, then the bound.
        timer, datagram, bound, trusted = row.split()[-4:]
        assert 0 < float(timer) < float(bound) and 0 < float(datagram) < float(bound)
        assert abs(float(bound) - max(float(timer), float(datagram)) - 1.0) < 0.006
        assert trusted in ("yes", "no")
    assert lines[6].startswith("columns (ms; client − server")
    assert lines[-1].startswith("Conclusion: ")
    assert "on this machine" in lines[-1]
    assert (tmp_path / "server-timings.npz").exists()
