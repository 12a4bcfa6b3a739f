"""Runs bounded by time (--duration) with a steady window (--warmup-s, --cooldown-s): the real
CLI and workers against the mock, each run a few seconds, bounds measured in the same run."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
from helpers import cli, only_json, run_in_process, slowdown

from loadgen.records.read import read_records

SMALL = ["--mock", "--random-input-len", "16", "--disable-tqdm", "--save-result",
         "--save-detailed", "--workers", "2"]  # fmt: skip


def timed(*args: str) -> tuple[dict, str, float]:
    """``loadgen run ARGS`` in this process against the mock: its result JSON, its console
    (stdout and stderr), and its wall-clock seconds."""
    started = time.perf_counter()
    proc = run_in_process(*SMALL, *args)
    wall = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    result_dir = Path(args[args.index("--result-dir") + 1])
    return only_json(result_dir), proc.stdout + proc.stderr, wall


def test_a_closed_loop_run_sends_until_the_time_is_up(tmp_path: Path) -> None:
    duration = 2.0
    result, console, _ = timed(
        "--duration", "2s", "--max-concurrency", "4", "--mock-ttft-ms", "20", "--mock-itl-ms",
        "5", "--random-output-len", "8", "--result-dir", str(tmp_path),
    )  # fmt: skip
    bound = result["loadgen"]["time_bound"]
    prepared = bound["prepared"]
    sent = prepared - bound["not_sent_at_deadline"]
    print(console[-1500:])
    assert prepared == result["num_prompts"]  # every block's requests
    # about 4 streams of ~55 ms at a time for 2 s: fewer than prepared, far more than 4
    assert 20 < sent < prepared
    assert result["completed"] + result["failed"] == sent and result["failed"] == 0
    assert f"--duration 2 s: {sent} of the {prepared} requests prepared were sent" in console
    assert "--duration 2 s: requests are sent until t0 + 2 s, prepared in blocks of 1024" in console
    # Nothing was sent after the deadline (but for the dispatcher's own lag, measured here),
    # so the run ended within the longest request after it.
    # (start_times are on the coordinator's clock: the first went at t0, a few ms after it)
    sends = [t - min(result["start_times"]) for t in result["start_times"]]
    lag_s = result["loadgen"]["send_lag_ms"]["max"] / 1e3
    assert max(sends) <= duration + lag_s + 0.05 * slowdown()
    assert result["duration"] <= duration + lag_s + max(result["latencies"]) + 0.05 * slowdown()
    # the cap was kept busy until near the deadline
    assert max(sends) > duration - 0.5


def test_a_closed_loop_is_topped_up_block_after_block_until_the_time_is_up(
    tmp_path: Path,
) -> None:
    # blocks of 8 requests over 2 workers: a block lasts about 0.1 s of the 4 s
    duration = 4.0
    result, _console, _ = timed(
        "--duration", "4s", "--max-concurrency", "4", "--duration-block", "8", "--mock-ttft-ms",
        "20", "--mock-itl-ms", "5", "--random-output-len", "8", "--result-dir", str(tmp_path),
    )  # fmt: skip
    bound = result["loadgen"]["time_bound"]
    prepared, sent = bound["prepared"], bound["prepared"] - bound["not_sent_at_deadline"]
    assert sent > 10 * 8 and prepared % 8 == 0  # far more than one block, whole blocks
    assert result["completed"] == sent and result["failed"] == 0
    sends = sorted(t - min(result["start_times"]) for t in result["start_times"])
    lag_s = result["loadgen"]["send_lag_ms"]["max"] / 1e3
    assert duration - 0.5 < sends[-1] <= duration + lag_s + 0.05 * slowdown()
    # the report sees every request: one record each, in the file and read back
    (records,) = tmp_path.glob("*.records.arrow")
    again = cli("report", str(records))
    assert again.returncode == 0, again.stderr
    assert f"--duration 4 s: {sent} of the {prepared} requests prepared were sent" in again.stdout
    assert len(result["ttfts"]) == sent


def test_num_prompts_caps_a_run_bounded_by_time(tmp_path: Path) -> None:
    result, console, _ = timed(
        "--duration", "30s", "--max-concurrency", "4", "--num-prompts", "20",
        "--duration-block", "8", "--random-output-len", "4", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert "at most 20 (--num-prompts), prepared in blocks of 8" in console
    assert result["completed"] == result["num_prompts"] == 20
    assert result["duration"] < 30
    assert "all 20 requests prepared were sent" in console


def test_a_paced_run_in_small_blocks_keeps_the_one_schedule(tmp_path: Path) -> None:
    hashes = []
    for block in ("4", "64"):
        folder = tmp_path / block
        result, _console, _ = timed(
            "--duration", "2", "--request-rate", "20", "--seed", "3", "--duration-block", block,
            "--random-output-len", "4", "--result-dir", str(folder),
        )  # fmt: skip
        assert result["completed"] == result["num_prompts"] == 40
        hashes.append(result["loadgen"]["schedule_sha256"])
        bound = result["loadgen"]["time_bound"]
        assert bound["block_size"] == int(block)
        assert len(bound["block_seeds"]) == -(-40 // int(block)) and bound["block_seeds"][0] == 3
        (records,) = folder.glob("*.records.arrow")
        run = read_records(str(records))  # its end says what the blocks made
        assert run.start.schedule_sha256 == hashes[-1] and run.num_requests == 40
    # the dry run's one-shot schedule of the same count and seed
    dry = cli("run", "--mock", "--random-input-len", "16", "--dry-run", "--num-prompts", "40",
              "--request-rate", "20", "--seed", "3")  # fmt: skip
    (line,) = [line for line in dry.stdout.splitlines() if "schedule_sha256:" in line]
    assert hashes == [line.split()[-1]] * 2


def test_a_paced_run_draws_its_schedule_for_the_duration_and_reports_the_window(
    tmp_path: Path,
) -> None:
    result, console, _ = timed(
        "--duration", "2", "--request-rate", "20", "--warmup-s", "0.5", "--cooldown-s", "0.5",
        "--mock-ttft-ms", "10", "--mock-itl-ms", "2", "--random-output-len", "4",
        "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert "--duration 2 s at 20 req/s: 40 requests on one seeded schedule, the last due at " \
        "2.00 s" in console  # fmt: skip
    assert result["num_prompts"] == 40 and result["completed"] == 40
    assert result["loadgen"]["time_bound"]["not_sent_at_deadline"] == 0
    window = result["loadgen"]["steady_window"]
    assert window["start_s"] == 0.5
    assert window["end_s"] == pytest.approx(result["duration"] - 0.5)
    # about 20 requests are sent in the window's second; all 40 are in it or trimmed
    assert 10 <= window["requests"] <= 30
    assert window["requests"] + window["trimmed"] == 40
    assert window["completed"] == window["requests"]
    assert "Steady window 0.50 s to" in console
    assert "Requests in the window:" in console
    # loadgen report draws another window from the run's records
    (records,) = tmp_path.glob("*.records.arrow")
    again = cli("report", str(records), "--warmup-s", "1", "--cooldown-s", "0")
    assert again.returncode == 0, again.stderr
    assert "Steady window 1.00 s to" in again.stdout
    assert "--duration 2 s: 40 of the 40 requests prepared were sent" in again.stdout


def test_requests_still_in_flight_after_the_grace_are_cancelled(tmp_path: Path) -> None:
    # two streams of 100 tokens 50 ms apart (5 s), a 1 s run with 0.5 s of grace
    proc = run_in_process(
        *SMALL, "--duration", "1", "--duration-grace-s", "0.5", "--max-concurrency", "2",
        "--mock-itl-ms", "50", "--random-output-len", "100", "--result-dir", str(tmp_path),
    )  # fmt: skip
    # none completed: the run fails as any run does, its report and result written first
    assert proc.returncode == 1
    assert (
        "no request completed within --duration and its grace; the first error: cancelled: "
        "still in flight when --duration-grace-s ran out"
    ) in proc.stderr
    assert (result := only_json(tmp_path))["failed"] == 0  # cancelled, counted apart
    assert result["loadgen"]["errors"]["cancelled"] == 2
    result = only_json(tmp_path)
    bound = result["loadgen"]["time_bound"]
    assert bound["cancelled_at_grace"] == 2
    assert bound["not_sent_at_deadline"] == bound["prepared"] - 2
    assert "2 in flight when --duration-grace-s 0.5 ran out were cancelled" in proc.stdout
    # cancelled at 1.5 s: well before the 5 s the streams would take
    assert result["duration"] < 1.5 + 0.5 * slowdown()


def test_each_point_of_a_campaign_is_bounded_by_the_duration(tmp_path: Path) -> None:
    proc = run_in_process(
        *SMALL, "--duration", "1", "--request-rate", "10,20", "--mock-ttft-ms", "5",
        "--random-output-len", "4", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.iterdir()
    with open(folder / "summary.csv", encoding="utf-8") as f:
        rows = {row["point"]: row for row in csv.DictReader(f)}
    assert float(rows["max_concurrency=none-request_rate=10.0"]["completed"]) == 10
    assert float(rows["max_concurrency=none-request_rate=20.0"]["completed"]) == 20


def test_the_schedule_of_a_paced_duration_is_the_one_of_its_count() -> None:
    def schedule_hash(*args: str) -> str:
        proc = cli("run", "--mock", "--random-input-len", "16", "--dry-run", *args)
        assert proc.returncode == 0, proc.stderr
        (line,) = [line for line in proc.stdout.splitlines() if "schedule_sha256:" in line]
        return line.split()[-1]

    by_time = schedule_hash("--duration", "2", "--request-rate", "20", "--seed", "3")
    assert by_time == schedule_hash("--num-prompts", "40", "--request-rate", "20", "--seed", "3")
    assert by_time != schedule_hash("--num-prompts", "41", "--request-rate", "20", "--seed", "3")


def test_a_file_read_once_cycles_through_the_blocks(tmp_path: Path) -> None:
    rows = [{"prompt": f"say {i} " + "word " * (3 + 4 * i), "output_tokens": 2} for i in range(5)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result, console, _ = timed(
        "--duration", "3s", "--max-concurrency", "2", "--duration-block", "8",
        "--dataset-name", "custom", "--dataset-path", str(tmp_path / "prompts.jsonl"),
        "--skip-chat-template", "--no-oversample", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert "is sent again, reshuffled, in each block (the file cycles" in console
    sent = result["completed"]
    assert sent > 5 * 4 and result["failed"] == 0  # the file's 5 prompts, many times over
    assert len(set(result["input_lens"])) == 5  # the file's own prompts, no others


def test_each_point_of_a_closed_loop_campaign_is_topped_up_until_its_time_is_up(
    tmp_path: Path,
) -> None:
    proc = run_in_process(
        *SMALL, "--duration", "2", "--max-concurrency", "2,4", "--duration-block", "8",
        "--mock-ttft-ms", "20", "--mock-itl-ms", "5", "--random-output-len", "8",
        "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.iterdir()
    with open(folder / "summary.csv", encoding="utf-8") as f:
        rows = {row["point"]: row for row in csv.DictReader(f)}
    # ~55 ms a request: about 70 and 140 requests in 2 s, many blocks of 8 each
    assert float(rows["max_concurrency=2-request_rate=inf"]["completed"]) > 4 * 8
    assert float(rows["max_concurrency=4-request_rate=inf"]["completed"]) > 8 * 8
    seeds = set()
    for path in folder.glob("*/*.json"):
        bound = json.loads(path.read_text())["loadgen"]["time_bound"]
        assert bound["block_size"] == 8 and len(bound["block_seeds"]) > 4
        seeds.update(bound["block_seeds"])
    assert len(seeds) > 10  # each point's blocks draw from seeds of their own


def test_a_duration_past_a_self_timed_trace_is_refused_before_t0(tmp_path: Path) -> None:
    rows = [{"ts_ms": t, "input_length": 24, "output_length": 3, "hash_ids": [7, t]}
            for t in (0, 100, 300)]  # fmt: skip
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    trace = ["--mock", "--dataset-name", "timed_trace", "--dataset-path", str(path),
             "--timed-trace-label-timestamp", "ts_ms", "--timed-trace-sec-multiplier", "0.001",
             "--num-prompts", "3", "--disable-tqdm"]  # fmt: skip
    proc = run_in_process(*trace, "--duration", "5s")
    assert proc.returncode == 1
    (line,) = [line for line in proc.stderr.splitlines() if "--duration" in line]
    assert line.endswith(
        "--duration 5 s is longer than the trace: its last request is due 0.30 s after t0. "
        "Give --duration 0.3 or less (the trace is replayed as recorded, never repeated), or "
        "--no-self-timed to send its requests at --request-rate"
    )
    assert "Serving Benchmark Result" not in proc.stdout  # refused before t0
    within = run_in_process(*trace, "--duration", "0.3")
    assert within.returncode == 0, within.stderr
    assert "Successful requests:                     3" in within.stdout
