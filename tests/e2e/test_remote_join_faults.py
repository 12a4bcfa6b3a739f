"""Remote workers that misbehave before the run, on 127.0.0.1: a stop signal while the coordinator
waits for them to join, a worker that joins and vanishes before its shard, and a worker that
starts before its coordinator behind something that accepts TCP but fails the handshake."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import free_port, hang_guard

from workers.keys import write_keys

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    write_keys(directory)
    return directory


def coordinator(keys: Path, port: int, remote: int, *extra: str) -> subprocess.Popen[str]:
    """`loadgen run --mock` with one local worker, listening for ``remote`` more."""
    return subprocess.Popen(
        [sys.executable, "-m", "loadgen", "run", "--mock", "--tokenizer", "loadgen-mock",
         "--num-prompts", "40", "--random-input-len", "8", "--random-output-len", "4",
         "--disable-tqdm", "--no-dataset-cache", "--workers", "1",
         "--listen", f"127.0.0.1:{port}", "--remote-workers", str(remote),
         "--key", str(keys / "coordinator.key"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def worker(keys: Path, port: int, join_timeout: float = 60) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "loadgen", "worker", "--connect", f"tcp://127.0.0.1:{port}",
         "--key", str(keys / "worker.key"), "--join-timeout-sec", f"{join_timeout:g}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_line(stream, text: str, timeout: float = 60) -> str:
    """Read ``stream`` until a line holding ``text``; everything read so far."""
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        assert line, f"the process ended before {text!r}: {seen[-600:]}"
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"no {text!r} within {timeout} s: {seen[-600:]}")


def interpreter_start_s() -> float:
    """How long this machine takes to start Python and import loadgen's coordinator: the
    slack a bound on a process's exit gets here."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import loadgen.fleet.fanout"], check=True)
    return time.monotonic() - began


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_waiting_for_remote_workers_exits_at_once(
    keys: Path, signum: signal.Signals
) -> None:
    slack = interpreter_start_s()
    coord = coordinator(keys, free_port(), 2)
    try:
        assert coord.stdout is not None
        wait_for_line(coord.stdout, "Waiting for 2 remote workers")
        time.sleep(0.5)  # the coordinator is in its wait (its dataset takes milliseconds)
        coord.send_signal(signum)
        signalled = time.monotonic()
        coord.wait(timeout=hang_guard(60))
        exit_s = time.monotonic() - signalled
        err = coord.stderr.read()
    finally:
        coord.kill()
    assert coord.returncode == 128 + signum, err
    assert exit_s < 2.0 + slack, (exit_s, slack)  # was: ignored for up to 600 s
    assert f"error: interrupted by {signum.name} while waiting for --remote-workers" in err
    assert re.search(r"[01] of 3 workers had joined", err), err  # none remote; the local one?
    assert "Traceback" not in err


def test_a_worker_that_joins_and_vanishes_before_the_run_is_replaced(
    keys: Path, tmp_path: Path
) -> None:
    port = free_port()
    coord = coordinator(keys, port, 2, "--save-result", "--result-dir", str(tmp_path))
    workers = [worker(keys, port)]
    try:
        assert coord.stdout is not None
        wait_for_line(coord.stdout, "joined")
        workers[0].kill()  # its socket is gone; the coordinator still counts it joined
        workers[0].wait()
        workers.append(worker(keys, port))  # completes the count: the shards go out
        wait_for_line(coord.stdout, "joined")
        workers.append(worker(keys, port))  # takes the vanished worker's place
        _, err = coord.communicate(timeout=hang_guard(90))
        codes = [w.wait(timeout=hang_guard(15)) for w in workers[1:]]
    finally:
        coord.kill()
        for w in workers:
            w.kill()
    assert coord.returncode == 0, err[-2000:]
    assert codes == [0, 0]  # dismissed after the run
    assert "is gone before the run; its place is open to another worker" in err
    assert "Traceback" not in err
    (path,) = tmp_path.glob("*.json")
    result = json.loads(path.read_text())
    assert result["completed"] == 40 and result["failed"] == 0
    placed = [w["placement"] for w in result["loadgen"]["hosts"]]
    assert placed == ["local", "remote", "remote"]


class AcceptAndClose:
    """What a proxy or sidecar does before its backend is up: it accepts each connection on
    ``port`` and closes it, so a CurveZMQ handshake fails without a word from a coordinator."""

    def __init__(self, port: int) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(16)
        self.listener.settimeout(0.05)
        self.accepted = 0
        self.first = threading.Event()
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self.first.set()
            conn.close()

    def stop(self) -> None:
        self.running = False
        self.thread.join()
        self.listener.close()


@pytest.fixture
def accept_and_close() -> Iterator[tuple[AcceptAndClose, int]]:
    port = free_port()
    server = AcceptAndClose(port)
    try:
        yield server, port
    finally:
        if server.running:
            server.stop()


def test_a_worker_behind_a_failing_handshake_keeps_trying_until_its_coordinator_is_up(
    keys: Path, accept_and_close: tuple[AcceptAndClose, int]
) -> None:
    server, port = accept_and_close
    remote = worker(keys, port, join_timeout=60)
    try:
        assert server.first.wait(60), "the worker never connected"
        # Until the old limit of 3 failed handshakes is well behind: 10 reconnections.
        while server.accepted < 10 and remote.poll() is None:
            time.sleep(0.05)
        assert remote.poll() is None, remote.stderr.read()  # not "another key" after 3
        server.stop()
        coord = coordinator(keys, port, 1)
        out, err = coord.communicate(timeout=hang_guard(90))
        code = remote.wait(timeout=hang_guard(15))
    finally:
        remote.kill()
    assert coord.returncode == 0, err[-2000:]
    assert "joined" in out
    assert code == 0, remote.stderr.read()


def test_a_worker_whose_handshakes_keep_failing_says_so_at_its_join_timeout(
    keys: Path, accept_and_close: tuple[AcceptAndClose, int]
) -> None:
    server, port = accept_and_close
    started = time.monotonic()
    remote = worker(keys, port, join_timeout=3)
    assert server.first.wait(60), "the worker never connected"
    startup_s = time.monotonic() - started  # its interpreter and imports, on this machine
    try:
        code = remote.wait(timeout=hang_guard(60))
        ran_s = time.monotonic() - started
        err = remote.stderr.read()
    finally:
        remote.kill()
    assert code == 2, err
    assert 3 <= ran_s < 3 + 2 * startup_s, (ran_s, startup_s)
    assert server.accepted > 3  # the old rule gave up after three failed handshakes
    assert "no coordinator answered at" in err and "within 3 s (--join-timeout-sec)" in err
    assert "CurveZMQ handshakes failed there" in err and "a proxy or sidecar" in err
    assert "refused this worker's key" not in err
    assert "has another key than this worker.key" not in err  # the old message's blame


def test_a_remote_worker_with_an_empty_shard_is_no_sign_of_saturation(
    keys: Path, tmp_path: Path
) -> None:
    """--max-concurrency 1 below the worker count leaves the remote worker no request: it
    waits for t0 and ends at once, and its CPU over that instant (over 100 % of a few
    milliseconds, measured here before) must not read as a saturated worker."""
    port = free_port()
    remote = worker(keys, port)
    coord = coordinator(
        keys, port, 1, "--max-concurrency", "1", "--save-result", "--result-dir", str(tmp_path)
    )
    try:
        out, err = coord.communicate(timeout=hang_guard(90))
        assert remote.wait(timeout=hang_guard(15)) == 0
    finally:
        coord.kill()
        remote.kill()
    assert coord.returncode == 0, err[-2000:]
    (path,) = tmp_path.glob("*.json")
    client = json.loads(path.read_text())["loadgen"]["client"]
    assert client["worker_cpu_pct"][1] == 0.0  # the remote worker, without requests
    assert "workers saturated" not in out
