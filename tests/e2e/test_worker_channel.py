"""The channel between the coordinator and its workers is the run's own: another local user can
neither connect to it nor feed the verdict's probes, and a message that is not the run's is
dropped, never acted on (the real CLI, workers and mock server)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import zmq
from helpers import hang_guard, only_json, start_loadgen, wait_for_t0

RUN = [
    "--mock", "--mock-itl-ms", "10", "--workers", "2", "--num-prompts", "200",
    "--random-input-len", "32", "--random-output-len", "16", "--max-concurrency", "16",
    "--save-result",
]  # fmt: skip
NOBODY = 65534

# Run as another user during the run (plain Python, nothing imported from the project): try to
# connect to every run's worker channel, and send every loopback UDP port a probe stamped 0: as
# old as a perf_counter_ns stamp can be (its age is the machine's uptime, older than the run; a
# stamp taken "an hour ago" is negative on a machine up for less than an hour). Prints what it
# managed.
ATTACKER = r"""
import os, socket, sys, time
tmp, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
tried, connected, probes = 0, 0, 0
oldest = (0).to_bytes(8, "little")
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
while time.monotonic() < deadline:
    for name in os.listdir(tmp):
        if name.startswith("loadgen-") and os.path.isdir(os.path.join(tmp, name)):
            tried += 1
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                unix.connect(os.path.join(tmp, name, "coordinator"))
                connected += 1
                unix.sendall(b"\xff" + b"\0" * 8 + b"\x7f")  # a ZMTP greeting would follow
            except OSError:
                pass
            finally:
                unix.close()
    with open("/proc/net/udp") as table:
        ports = [int(line.split()[1].split(":")[1], 16) for line in table.readlines()[1:]
                 if line.split()[1].startswith("0100007F:")]
    for port in ports:
        for payload in (oldest, oldest + b"\0" * 16):
            try:
                udp.sendto(payload, ("127.0.0.1", port))
                probes += 1
            except OSError:
                pass
    time.sleep(0.01)
print(f"tried={tried} connected={connected} probes={probes}")
"""


def as_nobody() -> None:
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def python_for_nobody() -> str | None:
    """A Python interpreter the other user may run (the test's own may sit under /root)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            subprocess.run(
                [python, "-c", "pass"], preexec_fn=as_nobody, check=True, timeout=hang_guard(30)
            )
            return python
        except (OSError, subprocess.SubprocessError):
            continue
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_local_user_cannot_connect_read_or_feed_the_verdict(tmp_path: Path) -> None:
    python = python_for_nobody()
    if python is None:
        pytest.skip("no Python interpreter the other user may run")
    launched = time.perf_counter()
    proc = start_loadgen(*RUN, "--result-dir", str(tmp_path))
    wait_for_t0(proc)
    attacker = subprocess.run(
        [python, "-c", ATTACKER, tempfile.gettempdir(), "2.0"],
        preexec_fn=as_nobody,
        capture_output=True,
        text=True,
        timeout=hang_guard(60),
    )
    _, stderr = proc.communicate(timeout=hang_guard(120))
    run_ms = (time.perf_counter() - launched) * 1e3
    assert attacker.returncode == 0, attacker.stderr
    tried, connected, probes = (int(part.split("=")[1]) for part in attacker.stdout.split())
    assert tried > 0 and probes > 0  # it found the run's channel directory and the probe ports
    assert connected == 0
    assert proc.returncode == 0, stderr
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (200, 0)
    client = result["loadgen"]["client"]
    assert client["loop_lag_samples"] > 0
    # A probe of the run's own is sent and read within the run; one stamped 0 would be as old
    # as the machine's uptime, more than the run by the time Python and pytest started.
    assert client["loop_lag_max_ms"] < run_ms, run_ms


def test_messages_that_are_not_the_runs_are_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    # The run's own temporary directory, so that no other run on the machine (a parallel test,
    # a benchmark) adds a channel to the one looked for; short, for ipc's 107-byte path limit.
    private = tempfile.mkdtemp(prefix="lg-")
    proc = start_loadgen(*RUN, "--result-dir", str(tmp_path), env={**os.environ, "TMPDIR": private})
    wait_for_t0(proc)
    (path,) = glob.glob(os.path.join(private, "loadgen-*", "coordinator"))
    ctx = zmq.Context()
    rogue = ctx.socket(zmq.DEALER)
    rogue.setsockopt(zmq.IDENTITY, b"w7")  # no such worker
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.connect(f"ipc://{path}")
    stranger = ctx.socket(zmq.DEALER)  # ZeroMQ gives it a random identity
    stranger.setsockopt(zmq.LINGER, 0)
    stranger.connect(f"ipc://{path}")
    for sock in (rogue, stranger):
        sock.send_multipart([b"garbage"])
        sock.send_multipart([b'{"v": 6, "t": "00", "kind": "fatal", "message": "stop"}'])
        sock.send_multipart([b'{"v": 6, "kind": "records", "errors": {}, "texts": {}}', b"", b""])
    time.sleep(0.5)
    rogue.close()
    stranger.close()
    ctx.term()
    _, stderr = proc.communicate(timeout=hang_guard(120))
    assert proc.returncode == 0, stderr
    assert "dropped a message" in stderr
    result = only_json(tmp_path)
    assert (result["completed"], result["failed"]) == (200, 0)
    assert not os.path.exists(path)  # the channel's directory goes with the run
    os.rmdir(private)  # empty: the run left nothing behind
