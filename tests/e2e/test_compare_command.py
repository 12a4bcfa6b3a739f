"""`loadgen compare`: real runs of the real CLI against the embedded mock, compared from their
records files by the real compare CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import InProcess, cli, only_json_path, run_in_process

PACED = ["--num-prompts", "120", "--request-rate", "60", "--random-input-len", "16",
         "--random-output-len", "8", "--mock-itl-ms", "5", "--disable-tqdm"]  # fmt: skip


def run_into(directory: Path, ttft_ms: int) -> Path:
    """A paced run whose mock answers after ``ttft_ms``; its result JSON."""
    proc = run_in_process(
        "--mock", "--mock-ttft-ms", str(ttft_ms), *PACED,
        "--save-result", "--result-dir", str(directory),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return only_json_path(directory)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The module's runs, made once: two against a mock answering after 20 ms ("fast",
    "again"), one after 60 ms ("slow"); each result JSON, its records file beside it."""
    folder = tmp_path_factory.mktemp("runs")
    return {name: run_into(folder / name, ttft_ms) for name, ttft_ms in
            (("fast", 20), ("again", 20), ("slow", 60))}  # fmt: skip


def compare(*args: str) -> InProcess:
    """``loadgen compare ARGS``, in this process (it reads files and starts nothing)."""
    return cli("compare", *args)


def metric_line(stdout: str, metric: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.strip().startswith(metric)]
    return line


def test_a_slower_server_is_flagged_and_a_run_against_itself_is_not(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    fast, slow = runs["fast"], runs["slow"]
    records = str(fast).replace(".json", ".records.arrow")
    proc = compare(records, str(slow), str(fast), "--resamples", "300", "--json",
                   str(tmp_path / "cmp.json"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Each side is named by its file, less the suffix: the base records and its JSON alike.
    assert proc.stdout.startswith(f"{slow.stem} against {fast.stem} (1 and 1 run(s);")
    slow_block = proc.stdout.split(f"{fast.stem} against {fast.stem}")[0]
    assert metric_line(slow_block, "median ttft (ms)").endswith(" *")
    data = json.loads((tmp_path / "cmp.json").read_text())
    slow_rows, same_rows = ({m["metric"]: m for m in c["metrics"]} for c in data["comparisons"])
    # The slower server's TTFT minus the faster's: each never below the mock's delay, and the
    # difference the two runs' own (how far above 40 ms it lands is this machine's noise).
    ttft = slow_rows["median ttft (ms)"]
    fast_ttft, slow_ttft = (json.loads(p.read_text())["median_ttft_ms"] for p in (fast, slow))
    assert (ttft["base"], ttft["other"]) == pytest.approx((fast_ttft, slow_ttft))
    assert fast_ttft >= 20 and slow_ttft >= 60
    assert ttft["delta"] == pytest.approx(slow_ttft - fast_ttft)
    assert slow_rows["median ttft (ms)"]["flagged"]
    assert not any(row["flagged"] for row in same_rows.values())
    assert same_rows["request throughput (req/s)"]["interval"] is None
    # The values are the report's: the base's equal its own result JSON's.
    report = json.loads(fast.read_text())
    for metric in ("mean ttft", "median tpot", "p99 itl", "p99 ttft"):
        key = metric.replace(" ", "_") + "_ms"
        assert same_rows[f"{metric} (ms)"]["base"] == pytest.approx(report[key], rel=1e-9)
    assert same_rows["request throughput (req/s)"]["base"] == pytest.approx(
        report["request_throughput"], rel=1e-9
    )


def test_a_folder_pools_its_runs(tmp_path: Path, runs: dict[str, Path]) -> None:
    repeats = tmp_path / "repeats"
    repeats.mkdir()
    for name in ("fast", "again"):
        for path in runs[name].parent.iterdir():
            shutil.copy(path, repeats / path.name)
    proc = compare(str(repeats), str(repeats), "--resamples", "50")
    assert proc.returncode == 0, proc.stderr
    assert "(2 and 2 run(s);" in proc.stdout


def test_a_json_that_is_not_a_result_is_one_line_and_exit_2(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely.json"
    lonely.write_text("{}")
    proc = compare(str(lonely), str(lonely))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {lonely}: neither a loadgen nor a `vllm bench serve` result JSON (it lacks "
        "completed, duration, request_throughput)"
    ]


def vllm_result(run: dict) -> dict:
    """A `vllm bench serve` result of the same load, in upstream's keys only (the reference's
    section 4.1: no "loadgen" object, no cancelled or not sent, E2EL left out as upstream does
    unless asked), its TTFTs 30 ms slower than ``run``'s."""
    keys = ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
            "num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
            "completed", "failed", "total_input_tokens", "total_output_tokens",
            "request_throughput", "request_goodput", "output_throughput",
            "total_token_throughput", "max_output_tokens_per_s",
            "max_concurrent_requests"]  # fmt: skip
    result = {key: run[key] for key in keys} | {"latencies": [], "queue_times": []}
    for metric in ("ttft", "tpot", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            result[f"{stat}_{metric}_ms"] = run[f"{stat}_{metric}_ms"]
    for stat in ("mean", "median", "p99"):
        result[f"{stat}_ttft_ms"] += 30.0
    return result


def test_a_vllm_result_is_compared_by_its_summary_figures(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    fast = runs["fast"]  # a loadgen result JSON, its records beside it: read as its JSON here
    ours = json.loads(fast.read_text())
    upstream = tmp_path / "vllm.json"
    upstream.write_text(json.dumps(vllm_result(ours)))
    proc = compare(str(fast), str(upstream), "--json", str(tmp_path / "cmp.json"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [
        "summary figures only: no records, no intervals",
        f"vllm (vllm bench serve) against {fast.stem} (loadgen); difference = vllm − {fast.stem}",
    ]
    ttft = next(line for line in lines if line.strip().startswith("median ttft (ms)"))
    assert ttft.split()[5] == "+30.000" and ttft.split()[-1] == "-", ttft  # no interval
    assert not any(line.endswith("*") for line in lines)  # and no mark
    (compared,) = json.loads((tmp_path / "cmp.json").read_text())["comparisons"]
    assert json.loads((tmp_path / "cmp.json").read_text())["summary_only"] is True
    metrics = {m["metric"]: m for m in compared["metrics"]}
    assert metrics["median ttft (ms)"]["delta"] == pytest.approx(30.0)
    assert metrics["median ttft (ms)"]["interval"] is None
    assert metrics["p99 e2el (ms)"]["other"] is None  # upstream wrote no E2EL
    assert metrics["not sent"]["base"] == ours["loadgen"]["errors"]["not_sent"] == 0
    assert metrics["not sent"]["other"] is None  # upstream counts no unsent requests
    assert metrics["request throughput (req/s)"]["delta"] == 0


def test_a_run_without_records_beside_a_records_side_is_one_line_and_exit_2(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    upstream = tmp_path / "vllm.json"
    upstream.write_text(json.dumps(vllm_result(json.loads(runs["fast"].read_text()))))
    records = str(runs["slow"]).replace(".json", ".records.arrow")
    proc = compare(str(upstream), records)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {upstream} has no records, so every side is compared by its result JSON; "
        f"{records} is not one"
    ]
