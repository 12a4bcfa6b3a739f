"""Pure parts of runs past one machine: clock offsets, a lost worker's credits, Ray placement,
key files, the per-host summary lines and the placement flags."""

from __future__ import annotations

import json
import stat

import pytest
from helpers import config_given

from loadgen.config import ConfigError
from loadgen.config.parsers import parse_listen
from loadgen.fleet.clock_sync import ClockOffset, estimate_offset
from loadgen.fleet.credit_pool import CreditPool
from loadgen.fleet.ray_placement import RayPlacementError, plan_nodes
from loadgen.report.hosts import host_lines
from workers.keys import (
    CoordinatorKeys,
    KeyFileError,
    WorkerKeys,
    new_keys,
    read_keys,
    write_keys,
)

# --- clock offsets ---------------------------------------------------------------------------


def exchange(offset_ns: int, sent_ns: int, out_ns: int, back_ns: int) -> tuple[int, int, int]:
    """A PING sent at ``sent_ns`` (coordinator clock) that took ``out_ns`` to reach a worker
    whose clock is ``offset_ns`` ahead, and ``back_ns`` to come back."""
    return sent_ns, sent_ns + out_ns + offset_ns, sent_ns + out_ns + back_ns


def test_the_shortest_round_trip_bounds_the_offset() -> None:
    offset = 5_000_000_000  # the worker's clock is 5 s ahead
    samples = [
        exchange(offset, 1_000, 900_000, 100_000),  # queued on the way out: a long round trip
        exchange(offset, 2_000_000, 40_000, 60_000),  # the shortest
        exchange(offset, 3_000_000, 50_000, 2_000_000),  # queued on the way back
    ]
    estimate = estimate_offset(samples)
    assert estimate == ClockOffset(offset - 10_000, 50_000, 100_000, 3)
    assert abs(estimate.offset_ns - offset) <= estimate.uncertainty_ns


@pytest.mark.parametrize("out_ns", [0, 1, 37_000, 99_999, 100_000])
def test_the_true_offset_is_always_within_the_uncertainty(out_ns: int) -> None:
    estimate = estimate_offset([exchange(-123_456_789, 10**12, out_ns, 100_000 - out_ns)])
    assert abs(estimate.offset_ns - -123_456_789) <= estimate.uncertainty_ns == 50_000


def test_no_exchange_is_an_error() -> None:
    with pytest.raises(ValueError, match="no PING/PONG"):
        estimate_offset([])


# --- a lost worker's credits -----------------------------------------------------------------


def test_a_lost_worker_frees_the_credits_it_held_for_those_waiting() -> None:
    pool = CreditPool(6, [10, 10, 10])  # 2 credits each at START, none free
    assert (pool.initial, pool.free) == ([2, 2, 2], 0)
    pool.on_demand(0, returned=0, waiting=3)  # worker 0 waits; nothing free: lend
    grants = pool.on_demand(1, returned=1, waiting=0)  # worker 1 lends one: it goes to 0
    assert [(m.worker, m.grant) for m in grants if m.grant] == [(0, 1)]
    assert pool.held == [3, 1, 2]
    messages = pool.on_lost(2)  # worker 2 is gone with its 2
    assert [(m.worker, m.grant) for m in messages if m.grant] == [(0, 2)]
    assert pool.held == [5, 1, 0] and pool.free == 0
    assert sum(pool.held) + pool.free == 6  # conserved
    assert pool.on_lost(2) == []  # lost once


# --- Ray placement ---------------------------------------------------------------------------


def nodes(*cpus: float) -> list[dict]:
    return [
        {"NodeID": f"n{i}", "NodeManagerAddress": f"10.0.0.{i}", "Resources": {"CPU": c}}
        for i, c in enumerate(cpus)
    ]


def test_workers_go_round_the_nodes_or_fill_them_in_order() -> None:
    assert plan_nodes(nodes(2, 2, 2), 5, None) == ["n0", "n1", "n2", "n0", "n1"]
    assert plan_nodes(nodes(2, 2, 2), 5, 2) == ["n0", "n0", "n1", "n1", "n2"]


def test_a_placement_the_cluster_cannot_hold_fails_by_name() -> None:
    with pytest.raises(RayPlacementError, match="needs 3 Ray nodes; the cluster has 2"):
        plan_nodes(nodes(4, 4), 5, 2)
    with pytest.raises(RayPlacementError, match=r"n1 \(10.0.0.1\) has 1 CPUs for 2 workers"):
        plan_nodes(nodes(2, 1), 4, None)
    with pytest.raises(RayPlacementError, match="no alive node"):
        plan_nodes([], 1, None)


# --- key files -------------------------------------------------------------------------------


def test_keygen_writes_two_private_files_that_fit_each_other(tmp_path) -> None:
    coordinator_file, worker_file = write_keys(tmp_path / "keys")
    for path in (coordinator_file, worker_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    coordinator = read_keys(coordinator_file, "coordinator")
    worker = read_keys(worker_file, "worker")
    assert isinstance(coordinator, CoordinatorKeys) and isinstance(worker, WorkerKeys)
    assert worker.coordinator_public == coordinator.public
    assert coordinator.worker_public == worker.public
    assert worker.token == coordinator.token
    assert "secret" not in json.loads(worker_file.read_text()).get("coordinator_public", "")
    assert coordinator.secret not in worker_file.read_text()  # a worker cannot pose as it
    with pytest.raises(KeyFileError, match="exists already"):
        write_keys(tmp_path / "keys")


def test_a_key_file_that_cannot_be_used_is_named_with_the_reason(tmp_path) -> None:
    _, worker_file = write_keys(tmp_path)
    with pytest.raises(KeyFileError, match=r"worker's key file; this side takes coordinator\.key"):
        read_keys(worker_file, "coordinator")
    with pytest.raises(KeyFileError, match="cannot read the key file"):
        read_keys(tmp_path / "absent.key", "worker")
    junk = tmp_path / "junk.key"
    junk.write_text("not json")
    with pytest.raises(KeyFileError, match="not a loadgen key file"):
        read_keys(junk, "worker")
    broken = tmp_path / "broken.key"
    data = json.loads(worker_file.read_text())
    broken.write_text(json.dumps({**data, "secret": "short"}))
    with pytest.raises(KeyFileError, match="secret is not a Z85 CurveZMQ key"):
        read_keys(broken, "worker")


def test_run_keys_are_fresh_each_time() -> None:
    (first, _), (second, _) = new_keys(), new_keys()
    assert first.secret != second.secret and first.token != second.token


# --- the summary's lines per host ------------------------------------------------------------


def worker(n: int, placement: str, host: str, address: str = "", offset=None, node=None) -> dict:
    return {
        "worker": n,
        "placement": placement,
        "node": node,
        "host": host,
        "address": address,
        "clock_offset_ns": offset,
        "clock_uncertainty_ns": None if offset is None else 40_000,
    }


def test_hosts_are_listed_with_their_clock_offsets() -> None:
    lines = host_lines(
        [
            worker(0, "local", "coord", offset=1_000),
            worker(1, "remote", "gpu-a", "10.0.0.7:40112", 2_500_000),
            worker(2, "remote", "gpu-a", "10.0.0.7:40113", 2_600_000),
            worker(3, "ray", "gpu-b", "10.0.0.8:5000", -75_000, node="abcdef0123456789"),
        ]
    )
    assert lines[0] == "Workers: 4 on 3 hosts (clock offset from the coordinator)"
    assert "coord (local)" in lines[1] and "same clock" in lines[1]
    assert "gpu-a (remote, 10.0.0.7)" in lines[2] and "1,2" in lines[2]
    assert "+2.500 ms ± 0.040 ms" in lines[2]
    assert "gpu-b (ray node abcdef012345, 10.0.0.8)" in lines[3] and "-0.075 ms" in lines[3]
    assert "lost" not in lines[2]
    gone = host_lines([{**worker(0, "remote", "h", "10.0.0.9:1", 0), "lost": "cut off"}])
    assert gone[1].endswith("; lost mid-run: worker 0")
    assert host_lines([worker(0, "local", "coord"), worker(1, "local", "coord")]) == []
    assert host_lines(None) == []


# --- the placement flags ---------------------------------------------------------------------


def test_listen_is_host_and_port() -> None:
    assert parse_listen("0.0.0.0:5557") == ("0.0.0.0", 5557)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("5557", "host:", ":5557", "host:70000", "host:port"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(bad)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workers": 0}, "0 only with --remote-workers"),
        ({"listen": ("0.0.0.0", 5557), "remote_workers": 2}, "need all of --listen"),
        ({"remote_workers": 2, "key": "k"}, "need all of --listen"),
        ({"ray": "auto", "listen": ("h", 1), "remote_workers": 1, "key": "k"}, "without --listen"),
        ({"ray": "auto", "workers": 0}, "0 only with --remote-workers"),
        ({"workers_per_node": 2}, "give it with --ray"),
    ],
)
def test_placement_flags_that_do_not_fit_together_exit_2(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_given(mock=True, **fields).validate()


def test_every_worker_may_join_by_hand() -> None:
    config_given(
        mock=True, workers=0, listen=("0.0.0.0", 5557), remote_workers=4, key="coordinator.key"
    ).validate()
    config_given(mock=True, ray="auto", workers=64, workers_per_node=8).validate()


def test_ray_without_its_extra_exits_2_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install 'loadgen\[ray\]'"):
        config_given(mock=True, ray="auto").validate()
