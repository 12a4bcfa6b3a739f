"""Workers placed by Ray: a three-node cluster (``ray.cluster_utils.Cluster``) started inside a
network namespace with only its loopback, so that nothing Ray advertises leaves the machine; a
run with a worker on each node, and a run that loses a node mid-run (tests/ray_cluster_run.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import hang_guard
from netns import in_ns, namespace, skip_unless_netns

pytestmark = pytest.mark.timeout(240)
SCRIPT = Path(__file__).parent.parent / "ray_cluster_run.py"


def result(directory: Path) -> dict:
    (path,) = directory.glob("*.json")
    return json.loads(path.read_text())


def test_ray_places_a_worker_on_each_node_and_survives_losing_one(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the [ray] extra is not installed")
    skip_unless_netns()
    with namespace("lgray") as ns:
        done = subprocess.run(
            in_ns(ns, sys.executable, str(SCRIPT), str(tmp_path)),
            capture_output=True, text=True, timeout=hang_guard(220),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads((tmp_path / "runs.json").read_text())

    ray, local, lost = runs["ray"], runs["local"], runs["lost"]
    assert ray["rc"] == 0, ray["stderr"][-2000:]
    on_ray = result(tmp_path / "ray")
    assert on_ray["completed"] == 300
    placed = on_ray["loadgen"]["hosts"]
    assert [w["placement"] for w in placed] == ["ray"] * 3
    assert len({w["node"] for w in placed}) == 3  # one worker on each node
    for w in placed:
        assert abs(w["clock_offset_ns"]) <= w["clock_uncertainty_ns"]  # one machine, one clock
    assert "Workers: 3 on 3 hosts" in ray["stdout"]
    assert local["rc"] == 0, local["stderr"][-2000:]
    sha = on_ray["loadgen"]["schedule_sha256"]
    assert sha == result(tmp_path / "local")["loadgen"]["schedule_sha256"]

    assert lost["rc"] == 1, lost["stderr"][-2000:]
    assert "the run lost workers: worker " in lost["stderr"]
    assert "its Ray actor died" in lost["stderr"]
    after = result(tmp_path / "lost")
    assert after["completed"] + after["failed"] == 300
    assert after["completed"] >= 200  # two workers' shares, and the lost one's early part
    assert 0 < after["failed"] <= 100
    errors = [e for e in after["errors"] if e]
    assert errors and all(e.startswith("lost: worker ") and "Ray actor died" in e for e in errors)
    assert len(after["loadgen"]["worker_problems"]) == 1
