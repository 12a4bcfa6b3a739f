"""The global concurrency cap end to end: the real CLI and workers against a real mock process
that counts the requests it handles at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import only_json, run_against_mock

MIXED_OUTPUTS = ["--random-output-len", "64", "--random-range-ratio", '{"input": 0, "output": 0.9}']


def capped_run(
    result_dir: Path, *args: str, itl_ms: float = 0.0, mock_args: tuple[str, ...] = ()
) -> tuple[dict, int]:
    """Run `loadgen run` against a fresh mock; return the result JSON and the most requests the
    mock handled at once."""
    run = run_against_mock(
        "--model", "loadgen-mock", "--random-input-len", "16", "--disable-tqdm", "--save-result",
        "--save-detailed", "--result-dir", str(result_dir), *args,
        itl_ms=itl_ms, mock_args=mock_args,
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    return only_json(result_dir), run.stats["max_in_flight"]


def longest_dip_s(result: dict, cap: int) -> float:
    """The longest stretch of the steady state (cap first reached .. last send) with fewer than
    ``cap`` requests in flight: how long a free slot went unused while requests waited."""
    starts = np.array(result["start_times"])
    ends = starts + np.array(result["latencies"])
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.lexsort((steps, times))
    times, counts = times[order], np.cumsum(steps[order])
    longest, dip_start = 0.0, None
    steady_from, steady_to = times[np.argmax(counts >= cap)], starts.max()
    for t, count in zip(times, counts, strict=True):
        if not steady_from <= t <= steady_to:
            continue
        if count < cap and dip_start is None:
            dip_start = t
        elif count >= cap and dip_start is not None:
            longest, dip_start = max(longest, t - dip_start), None
    if dip_start is not None:
        longest = max(longest, steady_to - dip_start)
    return longest


@pytest.mark.parametrize("workers", ["1", "2"])
def test_closed_loop_cap_is_held_exactly_with_mixed_output_lengths(
    tmp_path: Path, workers: str
) -> None:
    cap = 8
    result, seen_by_server = capped_run(
        tmp_path, "--workers", workers, "--max-concurrency", str(cap), "--num-prompts", "160",
        *MIXED_OUTPUTS, itl_ms=2,
    )  # fmt: skip
    assert result["completed"] == 160
    assert seen_by_server == cap  # never above the cap, and it was reached
    assert result["max_concurrent_requests"] <= cap
    # No request waits on a busy worker while a slot is free elsewhere: the cap stays full.
    # A stranded request would leave a slot free for what is left of a stream (7-121 tokens,
    # 2 ms apart); refilling a slot takes the client's own delay, which a busy machine stretches.
    # Both are measured in this run: its shortest stream, and its workers' longest loop lag.
    dip_ms = longest_dip_s(result, cap) * 1e3
    shortest_ms = min(result["latencies"]) * 1e3
    delay_ms = result["loadgen"]["client"]["loop_lag_max_ms"]
    print(f"longest dip below the cap: {dip_ms:.1f} ms; shortest stream {shortest_ms:.1f} ms, "
          f"client delay up to {delay_ms:.1f} ms")  # fmt: skip
    assert dip_ms < shortest_ms + delay_ms


def test_open_loop_cap_is_never_exceeded_across_workers(tmp_path: Path) -> None:
    cap = 5
    result, seen_by_server = capped_run(
        tmp_path, "--workers", "2", "--max-concurrency", str(cap), "--request-rate", "400",
        "--num-prompts", "200", "--random-output-len", "16", itl_ms=2,
    )  # fmt: skip
    assert result["completed"] == 200
    assert seen_by_server == cap
    # 5 streams of 32 ms carry 156 requests/s, not 400: requests queued in the client.
    assert max(result["queue_times"]) > 0.01


def test_paced_run_reports_latency_from_the_intended_send_time(tmp_path: Path) -> None:
    # 2 slots of ~32 ms streams carry ~60 requests/s, not 300: requests queue in the client.
    result, _ = capped_run(
        tmp_path, "--workers", "2", "--max-concurrency", "2", "--request-rate", "300",
        "--num-prompts", "60", "--random-output-len", "16", itl_ms=2,
    )  # fmt: skip
    intended = result["loadgen"]["from_intended"]
    assert set(intended) == {"ttft", "e2el"}
    assert list(intended["ttft"]) == ["mean_ms", "median_ms", "std_ms", "p99_ms"]
    # Counted from the schedule, the queueing is inside; counted from the send, it is not.
    assert intended["ttft"]["p99_ms"] > result["p99_ttft_ms"] + 100
    assert intended["e2el"]["mean_ms"] > intended["ttft"]["mean_ms"]


def test_connections_opened_mid_run_are_recorded(tmp_path: Path) -> None:
    # The server drops idle connections after 50 ms; requests come every 200 ms.
    result, _ = capped_run(
        tmp_path, "--workers", "1", "--request-rate", "5", "--burstiness", "inf",
        "--num-prompts", "5", "--random-output-len", "4", mock_args=("--keepalive-timeout", "0.05"),
    )  # fmt: skip
    opened = result["loadgen"]["new_connections_during_run"]
    assert opened["count"] >= 4
    assert 0 < opened["connect_ms"]["p50"] <= opened["connect_ms"]["max"]
    assert result["completed"] == 5


def test_unpaced_run_has_no_intended_view_and_no_mid_run_connects(tmp_path: Path) -> None:
    result, _ = capped_run(tmp_path, "--workers", "2", "--num-prompts", "40")
    assert result["loadgen"]["from_intended"] is None
    assert result["loadgen"]["new_connections_during_run"]["count"] == 0  # all pre-opened
