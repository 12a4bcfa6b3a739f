"""Workers on another host: the coordinator and the mock in one network namespace, remote workers
(`loadgen worker --connect`) in a second, joined by a veth pair the test makes (root only).

The TCP path with CurveZMQ: a run of local and remote workers with the single-host schedule and
per-host clock offsets; a worker of another version refused by name, both ways; a wrong key
refused; a worker cut off mid-run (its requests fail with the reason, the run completes with the
rest); a coordinator that disappears (its remote worker exits within seconds).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import hang_guard, slowdown, startups
from netns import VethPair, in_ns, skip_unless_netns, veth_pair

from workers.keys import WorkerKeys, new_keys, read_keys, write_keys
from workers.link import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, LOST_AFTER_S

pytestmark = pytest.mark.timeout(120)
PROTOCOL = "import workers.protocol as p"  # a worker of another version: one constant changed
LISTENING = re.compile(r"loadgen mock-server listening on http://[\d.]+:(\d+)\n")


@dataclass(frozen=True)
class Hosts:
    pair: VethPair
    mock_url: str
    keys: Path  # keygen's directory: coordinator.key and worker.key


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    skip_unless_netns()
    keys = tmp_path_factory.mktemp("keys")
    write_keys(keys)
    with veth_pair("lgrw") as pair:
        mock = subprocess.Popen(
            in_ns(pair.a, sys.executable, "-m", "loadgen.mock", "--host", pair.a_address,
                  "--port", "0", "--itl-ms", "5"),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            assert mock.stdout is not None
            match = LISTENING.fullmatch(mock.stdout.readline())
            assert match, "the mock did not say where it listens"
            yield Hosts(pair, f"http://{pair.a_address}:{match.group(1)}", keys)
        finally:
            mock.kill()
            mock.wait()


def run_args(hosts: Hosts, *extra: str, prompts: int = 200, rate: float = 100) -> list[str]:
    return [
        "--base-url", hosts.mock_url, "--model", "loadgen-mock", "--tokenizer", "loadgen-mock",
        "--num-prompts", str(prompts), "--request-rate", str(rate), "--seed", "7",
        "--random-input-len", "32", "--random-output-len", "16", "--no-dataset-cache", *extra,
    ]  # fmt: skip


def coordinator(
    hosts: Hosts, port: int, local: int, remote: int, *extra: str, prompts: int = 200,
    rate: float = 100,
) -> list[str]:  # fmt: skip
    """`loadgen run` in namespace a, listening for ``remote`` workers on its veth address."""
    return in_ns(
        hosts.pair.a, sys.executable, "-m", "loadgen", "run",
        *run_args(hosts, *extra, prompts=prompts, rate=rate), "--workers", str(local),
        "--listen", f"{hosts.pair.a_address}:{port}", "--remote-workers", str(remote),
        "--key", str(hosts.keys / "coordinator.key"),
    )  # fmt: skip


def worker(
    hosts: Hosts, port: int, key: Path | None = None, patch: str = "", join_timeout: int = 60
) -> subprocess.Popen:
    """`loadgen worker` in namespace b (``patch``: Python run first, as another version)."""
    argv = ["loadgen", "worker", "--connect", f"tcp://{hosts.pair.a_address}:{port}",
            "--key", str(key or hosts.keys / "worker.key"),
            "--join-timeout-sec", str(join_timeout)]  # fmt: skip
    code = f"import sys\n{patch}\nfrom loadgen.cli import main\nsys.argv = {argv!r}\nmain()"
    return subprocess.Popen(
        in_ns(hosts.pair.b, sys.executable, "-c", code),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(stream, text: str, timeout: float = 60) -> str:
    """Read ``stream`` until a line holding ``text``; everything read so far."""
    seen = ""
    deadline = time.monotonic() + hang_guard(timeout)
    while time.monotonic() < deadline:
        line = stream.readline()
        assert line, f"the process ended before {text!r}: {seen[-600:]}"
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"no {text!r} within {timeout} s: {seen[-600:]}")


def the_result(directory: Path) -> dict:
    (path,) = directory.glob("*.json")
    return json.loads(path.read_text())


def test_local_and_remote_workers_share_one_schedule_and_report_their_clocks(
    hosts: Hosts, tmp_path: Path
) -> None:
    workers = [worker(hosts, 5601), worker(hosts, 5601)]
    out = tmp_path / "multi"
    cap = ("--max-concurrency", "6")  # below the ~8 in flight the rate and 80 ms streams make
    run = subprocess.run(
        coordinator(hosts, 5601, 1, 2, *cap, "--save-result", "--result-dir", str(out)),
        capture_output=True, text=True, timeout=hang_guard(90),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    for proc in workers:
        assert proc.wait(timeout=hang_guard(15)) == 0, proc.stderr.read()  # dismissed after the run
    result = the_result(out)
    assert result["completed"] == 200 and result["failed"] == 0
    assert result["max_concurrent_requests"] == 6  # one cap, lent across the hosts, reached
    placed = result["loadgen"]["hosts"]
    assert [w["placement"] for w in placed] == ["local", "remote", "remote"]
    for remote in placed[1:]:
        assert remote["address"].startswith(hosts.pair.b_address)
        # One machine, one clock: the true offset is 0, and the estimate is within its bound.
        assert 0 < remote["clock_uncertainty_ns"] < 50_000_000
        assert abs(remote["clock_offset_ns"]) <= remote["clock_uncertainty_ns"]
    assert "Workers: 3 on 2 hosts" in run.stdout
    assert f"(remote, {hosts.pair.b_address})" in run.stdout
    # The single-host run of the same flags and seed has the same schedule.
    single = tmp_path / "single"
    alone = subprocess.run(
        in_ns(hosts.pair.a, sys.executable, "-m", "loadgen", "run", *run_args(hosts, *cap),
              "--workers", "3", "--save-result", "--result-dir", str(single)),
        capture_output=True, text=True, timeout=hang_guard(90),
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-2000:]
    sha = result["loadgen"]["schedule_sha256"]
    assert sha == the_result(single)["loadgen"]["schedule_sha256"]


def test_other_versions_and_wrong_keys_are_refused_by_name(hosts: Hosts, tmp_path: Path) -> None:
    coord = start(coordinator(hosts, 5602, 1, 1, "--save-result", "--result-dir", str(tmp_path)))
    try:
        refusals = {
            "protocol": (
                worker(hosts, 5602, patch=f"{PROTOCOL}; p.PROTOCOL_VERSION = 99"),
                "wire protocol 99",
            ),
            "loadgen": (
                worker(hosts, 5602, patch=f"{PROTOCOL}; p.LOADGEN_VERSION = '0.9'"),
                "loadgen 0.9",
            ),
        }  # fmt: skip
        for what, (proc, words) in refusals.items():
            assert proc.wait(timeout=hang_guard(60)) == 2, what
            stderr = proc.stderr.read()
            assert "refused" in stderr and words in stderr, stderr
            assert "install the same loadgen version" in stderr
        # A worker.key of another keygen: the handshake with this coordinator cannot succeed.
        # That proves nothing about the key (a proxy in the way fails it too): the worker
        # tries until --join-timeout-sec, then says the handshakes failed.
        other = tmp_path / "other"
        write_keys(other)
        stranger = worker(hosts, 5602, key=other / "worker.key", join_timeout=3)
        assert stranger.wait(timeout=hang_guard(60)) == 2
        said = stranger.stderr.read()
        assert "within 3 s (--join-timeout-sec)" in said and "handshakes failed" in said, said
        # The coordinator's public key, but a worker pair the coordinator never issued.
        theirs = read_keys(hosts.keys / "worker.key", "worker")
        assert isinstance(theirs, WorkerKeys)
        forged_pair = new_keys()[1]
        forged = WorkerKeys(theirs.coordinator_public, forged_pair.secret, forged_pair.public,
                            theirs.token)  # fmt: skip
        forged_file = tmp_path / "forged.key"
        forged_file.write_text(json.dumps(forged.__dict__))
        forged_file.chmod(0o600)
        impostor = worker(hosts, 5602, key=forged_file)
        assert impostor.wait(timeout=hang_guard(60)) == 2
        said = impostor.stderr.read()
        assert "refused this worker's key (public key " + forged_pair.public[:8] in said, said
        # The run still takes the right worker and completes.
        good = worker(hosts, 5602)
        _, err = coord.communicate(timeout=hang_guard(90))
        assert coord.returncode == 0, err[-2000:]
        assert good.wait(timeout=hang_guard(15)) == 0
    finally:
        coord.kill()
    assert err.count("warning: refused a worker on") == 2, err
    assert "wire protocol 99" in err and "loadgen 0.9" in err
    assert "refused a worker whose key is not this run's" in err
    assert f"(public key {forged_pair.public[:8]}...)" in err  # both sides name the key
    assert the_result(tmp_path)["completed"] == 200


def test_a_worker_cut_off_mid_run_fails_its_requests_and_the_run_completes(
    hosts: Hosts, tmp_path: Path
) -> None:
    remote = worker(hosts, 5603)
    coord = start(
        coordinator(hosts, 5603, 1, 1, "--save-result", "--result-dir", str(tmp_path),
                    "--save-detailed", prompts=300, rate=60)
    )  # fmt: skip
    try:
        assert coord.stdout is not None
        # The traffic lines come as the timed run starts (its records file, the shards and
        # t0 follow: well under a second quiet, up to two on a busy machine); 3 s later is
        # inside the 5 s run whatever the load did to the start-up before.
        wait_for_line(coord.stdout, "Traffic request rate")
        time.sleep(3.0)
        hosts.pair.cut()
        cut_at = time.monotonic()
        assert remote.wait(timeout=hang_guard(20)) == 3  # it lost the coordinator in turn
        worker_gone_s = time.monotonic() - cut_at
        out, err = coord.communicate(timeout=hang_guard(60))
    finally:
        hosts.pair.restore()
        coord.kill()
        remote.kill()
    # ZeroMQ's heartbeats miss the cut link, then the worker waits LOST_AFTER_S for the
    # coordinator; beyond those constants, two start-ups of the CLI on this machine.
    link_s = (HEARTBEAT_IVL_MS + HEARTBEAT_TIMEOUT_MS) / 1e3 + LOST_AFTER_S
    assert worker_gone_s < link_s + startups(2), worker_gone_s
    assert "lost the coordinator" in remote.stderr.read()
    assert coord.returncode == 1
    assert "the run lost workers: worker 1 (remote, host" in err
    assert f"at {hosts.pair.b_address}" in err and "nothing from it for" in err
    result = the_result(tmp_path)
    assert result["completed"] + result["failed"] == 300
    assert result["completed"] >= 150  # the local worker's half, and the remote's early part
    assert 0 < result["failed"] < 150
    lost = [e for e in result["errors"] if e]
    assert lost and all(e.startswith("lost: worker 1 (remote") for e in lost)
    assert "Workers: 2 on 2 hosts" in out


def test_remote_workers_exit_when_the_coordinator_disappears(hosts: Hosts, tmp_path: Path) -> None:
    remote = worker(hosts, 5604)
    coord = start(coordinator(hosts, 5604, 1, 1, prompts=600, rate=60))
    try:
        assert coord.stdout is not None
        wait_for_line(coord.stdout, "joined")
        time.sleep(1.5)
        coord.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        code = remote.wait(timeout=hang_guard(20))
        gone_s = time.monotonic() - killed_at
    finally:
        coord.kill()
        remote.kill()
    assert code == 3
    # The kernel closes the dead coordinator's sockets: the worker waits LOST_AFTER_S, not
    # for the heartbeats to time out.
    assert gone_s < LOST_AFTER_S + startups(2), gone_s
    assert "lost the coordinator" in remote.stderr.read()


def test_a_remote_worker_keeps_the_deadline_of_a_run_bounded_by_time(
    hosts: Hosts, tmp_path: Path
) -> None:
    # rate inf at a cap of 4: 2,000 requests of 80 ms streams would take 40 s; the run has 1 s
    remote = worker(hosts, 5605)
    run = subprocess.run(
        coordinator(hosts, 5605, 1, 1, "--max-concurrency", "4", "--duration", "1",
                    "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
                    prompts=2000, rate=float("inf")),
        capture_output=True, text=True, timeout=hang_guard(90),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert remote.wait(timeout=hang_guard(15)) == 0, remote.stderr.read()
    result = the_result(tmp_path)
    bound = result["loadgen"]["time_bound"]
    sent = bound["prepared"] - bound["not_sent_at_deadline"]
    assert 10 < sent < 2000 and result["completed"] == sent
    # no worker sent after its deadline (t0 on its own clock) by more than the send lag: the
    # first request went at t0, so sends are measured from it
    sends = [t - min(result["start_times"]) for t in result["start_times"]]
    lag_s = result["loadgen"]["send_lag_ms"]["max"] / 1e3
    slack = 0.05 * slowdown()
    assert max(sends) <= 1.0 + lag_s + slack
    assert result["duration"] <= 1.0 + lag_s + max(result["latencies"]) + slack
    assert [w["placement"] for w in result["loadgen"]["hosts"]] == ["local", "remote"]
