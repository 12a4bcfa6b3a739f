"""Pre-opening never opens more connections than --max-concurrency, counted on the mock: each
worker opens its share of the cap, where each opening the whole cap opened 32 against llama.cpp
at --max-concurrency 16 over 2 workers, and the server closed the extra ones unused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hang_guard, mock_server, mock_stats, start_loadgen, stop_process, wait_for_t0


def accepted_at_t0(tmp_path: Path, cap: int, workers: int) -> tuple[int, dict]:
    """Connections a fresh mock has accepted when a run with ``cap`` and ``workers`` reaches
    t0 (its start check's, the coordinator's, the workers' pre-opened ones and this count's
    own), and the run's result."""
    result_dir = tmp_path / f"cap{cap}-w{workers}"
    with mock_server(itl_ms=20) as url:
        proc = start_loadgen(
            "--base-url", url, "--tokenizer", "loadgen-mock", "--num-prompts", "32",
            "--max-concurrency", str(cap), "--workers", str(workers),
            "--random-input-len", "8", "--random-output-len", "8",
            "--save-result", "--result-dir", str(result_dir),
        )  # fmt: skip
        try:
            wait_for_t0(proc)
            accepted = mock_stats(url)["connections"]["accepted"]
            _, err = proc.communicate(timeout=hang_guard(120))
        finally:
            stop_process(proc)
        assert proc.returncode == 0, err
    result = json.loads(next(result_dir.glob("*.json")).read_text())
    return accepted, result["loadgen"]


@pytest.mark.parametrize("workers", [2, 3])
def test_the_workers_preopen_the_cap_and_no_more(tmp_path: Path, workers: int) -> None:
    # What is not the workers' pre-opening, measured: a run that pre-opens one connection.
    baseline, _ = accepted_at_t0(tmp_path, 1, 1)
    accepted, extra = accepted_at_t0(tmp_path, 16, workers)
    assert accepted - (baseline - 1) == 16  # was 32: each worker opened up to the whole cap
    assert extra["connections_preopened"] == 16
    assert extra["new_connections_during_run"]["count"] == 0  # the cap's worth was enough
