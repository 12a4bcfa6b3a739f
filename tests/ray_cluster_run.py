"""Run loadgen on a three-node Ray cluster started here (``ray.cluster_utils.Cluster``), inside
the network namespace the caller made (tests/e2e/test_ray_cluster.py): a run with a worker on
each node, the same run on local workers, and a run that loses a node mid-run. Writes each run's
exit code and output to OUT/runs.json, its result JSON under OUT/NAME/.

Usage: python tests/ray_cluster_run.py OUT
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from ray.cluster_utils import Cluster

RUN = [
    "--mock", "--mock-itl-ms", "5", "--seed", "7", "--random-input-len", "32",
    "--random-output-len", "16", "--no-dataset-cache", "--save-detailed",
]  # fmt: skip


def loadgen(out: Path, name: str, *args: str, kill_node=None) -> dict:
    """Run ``loadgen run ARGS`` (results in OUT/NAME); with ``kill_node``, call it 1.5 s after
    the run's t0 (its first live-view line on stderr), so the node goes mid-run however long
    the workers took to join and sync on a busy machine."""
    command = [sys.executable, "-m", "loadgen", "run", *RUN, *args, "--save-result",
               "--result-dir", str(out / name)]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    started = threading.Event()
    stderr: list[str] = []

    def read_stderr() -> None:
        for line in proc.stderr:
            stderr.append(line)
            if "%|" in line:
                started.set()
        started.set()  # the run ended before its t0: nothing to kill mid-run

    def kill_after_t0() -> None:
        started.wait()
        if proc.poll() is None:
            time.sleep(1.5)
            kill_node()

    threads = [threading.Thread(target=read_stderr)]
    if kill_node is not None:
        threads.append(threading.Thread(target=kill_after_t0))
    for thread in threads:
        thread.start()
    stdout = proc.stdout.read()
    for thread in threads:
        thread.join()
    return {"rc": proc.wait(), "stdout": stdout, "stderr": "".join(stderr)}


def main(out: Path) -> None:
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        runs = {"cluster_up_s": time.monotonic() - started}
        three = ["--ray", cluster.address, "--workers", "3", "--num-prompts", "300"]
        runs["ray"] = loadgen(out, "ray", *three, "--request-rate", "150")
        runs["local"] = loadgen(out, "local", "--workers", "3", "--num-prompts", "300",
                                "--request-rate", "150")  # fmt: skip
        victim = list(cluster.worker_nodes)[-1]
        runs["lost"] = loadgen(
            out, "lost", *three, "--request-rate", "60",
            kill_node=lambda: cluster.remove_node(victim),
        )  # fmt: skip
        runs["total_s"] = time.monotonic() - started
        (out / "runs.json").write_text(json.dumps(runs))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
