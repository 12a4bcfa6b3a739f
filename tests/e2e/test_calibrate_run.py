"""`loadgen calibrate` with the real processes: the recording mock server, a step's client run in
this process, the command itself, a step stopped by its time limit, Ctrl-C, and SIGTERM between
steps."""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import hang_guard, slowdown, startups

from loadgen.calibrate import CalibrationError, ClientStep, RecordingServer, StepRun, calibrate
from loadgen.cli.calibrate import run_step
from loadgen.console import collect_notes
from loadgen.mock.recorder import TimingRecords
from loadgen.timing_error import ClientRun, compare


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


def naming(text: str) -> list[int]:
    """The live processes whose command line holds ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


def in_group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


def gone(find: Callable[[], list[int]]) -> bool:
    """Whether ``find()`` comes back empty (no such process left) within a hang guard."""
    deadline = time.monotonic() + hang_guard(10)
    while find():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def step_row(lines: list[str], concurrency: int) -> list[str]:
    """The table row of the step at ``concurrency``, split in columns."""
    rows = [line.split() for line in lines if line.split()[:1] == [str(concurrency)]]
    assert len(rows) == 1, lines
    return rows[0]


def test_recorded_timings_against_a_real_run(tmp_path: Path) -> None:
    server = RecordingServer(tmp_path, ttft_ms=0.0, itl_ms=5.0)
    step = ClientStep(0, 8, 20, 200.0, 2, 32, 8, hang_guard(60), tmp_path / "step-0")
    try:
        url = server.start()
        before = time.perf_counter_ns()
        run = run_step(url, step)
        after = time.perf_counter_ns()
        _post_chat(url)  # no x-request-id: recorded under its response id, role chunk counted
        live = server.records()
        server.stop()
    finally:
        server.kill()
    assert (run.stopped, run.exit_code) == (None, 0)
    saved = TimingRecords.load(tmp_path / "server-timings.npz")
    for name in ("request_ids", "arrival_ns", "read_ns", "accepted_ns", "event_offsets"):
        np.testing.assert_array_equal(getattr(live, name), getattr(saved, name))
    np.testing.assert_array_equal(live.event_ns, saved.event_ns)

    prefix = step.prefix
    ids = saved.request_ids.tolist()
    assert sorted(ids[:20]) == sorted(f"{prefix}{i}" for i in range(20))
    assert ids[20].startswith("chatcmpl-") and len(saved.events_of(20)) == 4
    arrivals = saved.arrival_ns[:20]
    # One clock for all processes: the server's instants fall inside the client's run.
    assert ((before < arrivals) & (arrivals < after)).all()
    # Each request's bytes were read before its handler, on a connection accepted before that.
    assert saved.read_ns is not None and saved.accepted_ns is not None
    reads, accepts = saved.read_ns[:20], saved.accepted_ns[:20]
    assert ((accepts > 0) & (accepts <= reads) & (reads <= arrivals)).all()
    for row in range(20):
        events = saved.events_of(row)
        assert len(events) == 8
        assert (np.diff(events) >= 0).all() and events[0] >= saved.arrival_ns[row]
        assert events[-1] < after

    # The figures the run handed back in memory are its detailed result's, value for value.
    detailed = ClientRun.from_result(json.loads((tmp_path / "step-0" / "step.json").read_text()))
    for name in ("ttft_s", "failed", "start_s"):
        np.testing.assert_array_equal(getattr(run.client, name), getattr(detailed, name))
    for mine, theirs in zip(run.client.itls_s, detailed.itls_s, strict=True):
        np.testing.assert_array_equal(mine, theirs)

    comparison = compare(run.client, saved, prefix)
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
    assert done.stderr == ""  # the steps' runs show nothing of their own
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
    assert (tmp_path / "step-1" / "step.json").exists()  # --work-dir keeps the client's results


# Short streams, far more of them than a few seconds can serve: a step that a time limit or a
# signal stops with some requests finished and most not.
LONG_STEP = {"concurrency": 4, "itl_ms": 20.0, "output_len": 8, "rounds": 1000.0}


def test_a_step_past_its_time_limit_stops_with_its_measured_part(tmp_path: Path) -> None:
    limit_s = startups(3)  # long enough for the run to start, far short of its 4,000 requests

    def limited(url: str, step: ClientStep) -> StepRun:
        return run_step(url, dataclasses.replace(step, time_limit_s=limit_s))

    with collect_notes() as lines, pytest.raises(CalibrationError) as raised:
        calibrate(
            concurrencies=[LONG_STEP["concurrency"]],
            workers=2,
            itl_ms=LONG_STEP["itl_ms"],
            ttft_ms=0.0,
            input_len=16,
            output_len=LONG_STEP["output_len"],
            rounds=LONG_STEP["rounds"],
            threshold_ms=None,
            floor_seconds=0.5,
            work_dir=tmp_path,
            run_step=limited,
        )
    assert str(raised.value) == (
        f"loadgen run at concurrency 4 did not finish in {limit_s:.0f} s; its row covers the "
        "requests that finished"
    )
    assert raised.value.exit_code == 1
    row = step_row([line.text for line in lines], 4)
    assert (row[1], row[-1]) == ("4000", "stopped")
    assert 0 < int(row[2]) < 4000  # failed: those in flight or unsent when it stopped
    assert float(row[4]) >= 0  # the finished requests' TTFT error p50
    assert not naming(str(tmp_path / "server-timings.npz"))  # the mock server was stopped


def test_ctrl_c_stops_the_step_prints_its_row_exits_130_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "loadgen", "calibrate", "--floor-seconds", "0.5"]
    command += ["--concurrency", str(LONG_STEP["concurrency"]), "--rounds", "1000"]
    command += ["--itl-ms", "20", "--output-len", "8", "--work-dir", str(tmp_path)]
    # In a process group of its own, as a terminal's foreground job: Ctrl-C signals the group.
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], hang_guard(30))
        assert ready, "calibrate printed nothing"
        first = proc.stdout.readline()
        assert first.startswith("mock server http://"), first
        url = first.split()[2].rstrip(":")
        deadline = time.monotonic() + hang_guard(30)
        while True:  # until the step is under way: with 4 streams, 12 arrivals, 8 finished
            with urllib.request.urlopen(url + "/timings", timeout=10) as response:
                if len(TimingRecords.from_bytes(response.read()).request_ids) >= 12:
                    break
            assert time.monotonic() < deadline, "the step's run never started"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        rest, stderr = proc.communicate(timeout=hang_guard(30))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stderr == (
        "Error: interrupted by SIGINT at the step of concurrency 4; its row covers the requests "
        "that finished\n"
    )
    row = step_row(rest.splitlines(), 4)
    assert (row[1], row[-1]) == ("4000", "stopped")
    assert 0 < int(row[2]) < 4000
    # No process left: the mock server (its own session) nor the workers (calibrate's group).
    assert gone(lambda: naming(str(tmp_path / "server-timings.npz")))
    assert gone(lambda: in_group(proc.pid))


def test_sigterm_between_steps_ends_calibrate_with_143_and_stops_the_mock(tmp_path: Path) -> None:
    # The floor is measured for 5 s before the step: the signal lands there, outside any run.
    command = [sys.executable, "-m", "loadgen", "calibrate", "--floor-seconds", "5"]
    command += ["--concurrency", "4", "--work-dir", str(tmp_path)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], hang_guard(30))
        assert ready, "calibrate printed nothing"
        assert proc.stdout.readline().startswith("mock server http://")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=hang_guard(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, stderr
    assert stderr == (
        "Error: interrupted by SIGTERM at the step of concurrency 4; the rows above are what was "
        "measured\n"
    )
    assert gone(lambda: naming(str(tmp_path / "server-timings.npz")))
