"""Fresh prompts per point and run (issue 29 point 1), through the real CLI and workers against
a mock server of each test's own with its prefix cache on (--prefill-us-per-token): each run's
seed, the server's hit rate per point (near 0 with fresh prompts, high with --same-prompts),
the warning, and --reset-prefix-cache's calls."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import run_against_mock

import loadgen.session.prepare as prepare
from loadgen.session.campaign import Point, run_seed

CACHED = ("--prefill-us-per-token", "1")  # the mock keeps a prefix cache
GRID = ["--max-concurrency", "2,4", "--num-runs", "2"]
SMALL = ["--num-prompts", "12", "--random-input-len", "64", "--random-output-len", "4",
         "--workers", "1", "--disable-tqdm"]  # fmt: skip
POINTS = [Point(2, math.inf), Point(4, math.inf)]


def results(folder: Path) -> dict[tuple[str, int], dict]:
    """Each run's result JSON by (point, run)."""
    return {
        (p.name, k): json.loads((folder / p.name / f"{p.name}-run={k}.json").read_text())
        for p in POINTS
        for k in (0, 1)
    }


def summary_rows(tmp_path: Path) -> tuple[Path, list[dict[str, str]]]:
    (folder,) = tmp_path.iterdir()
    return folder, list(csv.DictReader((folder / "summary.csv").open()))


def test_each_run_draws_fresh_prompts_and_the_cache_finds_none(tmp_path: Path) -> None:
    run = run_against_mock(*GRID, *SMALL, "--result-dir", str(tmp_path), mock_args=CACHED)
    assert run.proc.returncode == 0, run.proc.stderr
    folder, rows = summary_rows(tmp_path)
    runs = results(folder)
    seeds = {key: result["loadgen"]["seed"] for key, result in runs.items()}
    assert seeds == {(p.name, k): run_seed(0, p, k) for p in POINTS for k in (0, 1)}
    for result in runs.values():
        hits = result["loadgen"]["prefix_cache"]
        assert hits["source"] == "/metrics" and hits["queried_tokens"] >= 12 * 64
        assert hits["hit_rate"] < 5, hits  # random prompts of other seeds share no block
    assert [float(row["prefix_cache_hit_rate_mean_of_runs"]) < 5 for row in rows] == [True] * 2
    assert "prefix cache hit" in run.proc.stdout  # the run lines and the table show it
    assert "warning:" not in run.proc.stdout + run.proc.stderr
    assert run.stats["prefix_cache_resets"] == 0


def test_same_prompts_are_served_from_the_cache_and_warned_of(tmp_path: Path) -> None:
    run = run_against_mock(*GRID, *SMALL, "--same-prompts", "--result-dir", str(tmp_path),
                           mock_args=CACHED)  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    folder, _ = summary_rows(tmp_path)
    runs = results(folder)
    assert {result["loadgen"]["seed"] for result in runs.values()} == {0}
    rates = [result["loadgen"]["prefix_cache"]["hit_rate"] for result in runs.values()]
    assert rates[0] < 5 and all(rate > 80 for rate in rates[1:]), rates
    output = run.proc.stdout + run.proc.stderr
    warnings = [line for line in output.splitlines() if "sent 100% of its prompts" in line]
    assert len(warnings) == 1, output  # once, at the first run that shares them
    assert warnings[0].startswith("warning: max_concurrency=2-request_rate=inf run=1 ")
    assert "--same-prompts sends every run the same prompts" in warnings[0]


def test_reset_prefix_cache_empties_it_before_every_run(tmp_path: Path) -> None:
    run = run_against_mock(*GRID, *SMALL, "--same-prompts", "--reset-prefix-cache",
                           "--result-dir", str(tmp_path), mock_args=CACHED)  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.stats["prefix_cache_resets"] == 4
    folder, _ = summary_rows(tmp_path)
    rates = [r["loadgen"]["prefix_cache"]["hit_rate"] for r in results(folder).values()]
    assert all(rate < 5 for rate in rates), rates
    assert "warning:" not in run.proc.stdout + run.proc.stderr


def test_llamacpp_reports_its_hits_in_each_answer(tmp_path: Path) -> None:
    run = run_against_mock(*GRID, *SMALL, "--same-prompts", "--result-dir", str(tmp_path),
                           mock_args=(*CACHED, "--personality", "llamacpp"))  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    folder, _ = summary_rows(tmp_path)
    hits = [r["loadgen"]["prefix_cache"] for r in results(folder).values()]
    assert {h["source"] for h in hits} == {"responses"}
    assert hits[0]["hit_rate"] < 5 and all(h["hit_rate"] > 80 for h in hits[1:]), hits


def test_a_server_without_a_reset_is_refused_in_one_line(tmp_path: Path) -> None:
    run = run_against_mock(*SMALL, "--reset-prefix-cache", mock_args=("--personality", "llamacpp"))
    assert run.proc.returncode == 1
    (line,) = run.proc.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: --reset-prefix-cache: http://127.0.0.1:")
    assert "serves no prefix-cache reset" in line and "docs/servers.md" in line
    assert run.stats["requests"].get("POST /v1/completions", 0) == 0  # refused before the run


def test_sglang_flushes_its_cache_before_a_single_run(tmp_path: Path) -> None:
    sglang = (*CACHED, "--personality", "sglang")
    run = run_against_mock(*SMALL, "--reset-prefix-cache", "--save-result", "--result-dir",
                           str(tmp_path), mock_args=sglang)  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.stats["prefix_cache_resets"] == 1
    (result,) = tmp_path.glob("*.json")
    assert json.loads(result.read_text())["loadgen"]["prefix_cache"]["source"] == "responses"


def test_a_campaigns_run_sends_what_a_single_run_with_its_seed_sends(tmp_path: Path) -> None:
    varied = [*SMALL, "--random-range-ratio", "0.5", "--request-rate", "50", "--save-detailed"]
    campaign = run_against_mock("--max-concurrency", "2,4", *varied, "--result-dir",
                                str(tmp_path / "campaign"), mock_args=CACHED)  # fmt: skip
    assert campaign.proc.returncode == 0, campaign.proc.stderr
    point = Point(4, 50.0)
    (folder,) = (tmp_path / "campaign").iterdir()
    ran = json.loads((folder / point.name / f"{point.name}-run=0.json").read_text())
    seed = run_seed(0, point, 0)
    alone_dir = tmp_path / "single"
    single = run_against_mock("--max-concurrency", "4", *varied, "--seed", str(seed),
                              "--save-result", "--result-dir", str(alone_dir))  # fmt: skip
    assert single.proc.returncode == 0, single.proc.stderr
    (path,) = alone_dir.glob("*.json")
    alone = json.loads(path.read_text())
    assert ran["loadgen"]["seed"] == alone["loadgen"]["seed"] == seed
    assert ran["loadgen"]["schedule_sha256"] == alone["loadgen"]["schedule_sha256"]
    assert ran["input_lens"] == alone["input_lens"]
    assert len(set(ran["input_lens"])) > 1  # lengths drawn from the seed, not all alike
    name = Point(2, 50.0).name
    other = json.loads((folder / name / f"{name}-run=0.json").read_text())
    assert other["input_lens"] != ran["input_lens"]  # the other point drew other prompts


def test_a_dataset_too_small_to_differ_is_warned_of(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(
        json.dumps({"prompt": f"question {i}: " + "tell me about the sea and the sky " * 8}) + "\n"
        for i in range(3)
    ))  # fmt: skip
    run = run_against_mock("--max-concurrency", "2", "--num-runs", "2", "--dataset-name",
                           "custom", "--dataset-path", str(rows), "--num-prompts", "3",
                           "--custom-output-len", "4", "--workers", "1", "--disable-tqdm",
                           "--result-dir", str(tmp_path / "out"), mock_args=CACHED)  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    output = run.proc.stdout + run.proc.stderr
    (warning,) = [line for line in output.splitlines() if line.startswith("warning: ")]
    assert "max_concurrency=2-request_rate=inf run=1 sent 100% of its prompts" in warning
    assert "the dataset has too few prompts to differ from run to run" in warning


def test_the_tokenizer_loads_once_for_every_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        loads.append(args)
        return real(*args, **kwargs)

    real = prepare.load_tokenizer
    monkeypatch.setattr(prepare, "load_tokenizer", counting)
    run = run_against_mock(*GRID, *SMALL, "--result-dir", str(tmp_path), mock_args=CACHED)
    assert run.proc.returncode == 0, run.proc.stderr
    folder, _ = summary_rows(tmp_path)
    assert len({r["loadgen"]["seed"] for r in results(folder).values()}) == 4  # 4 draws
    assert len(loads) == 1
