"""--dry-run through the real runner: preparation runs, the plan is printed, and the run ends
with 0 before a worker pool is made; with --model given it needs no server at all."""

from __future__ import annotations

import pytest
from helpers import free_port

import loadgen.fleet.fanout as fanout
import loadgen.session.runner as runner
from loadgen.config import RunConfig
from loadgen.text.tokenizer import MOCK_MODEL_NAME


def no_workers(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("a dry run made a worker pool")


def test_a_dry_run_prints_the_plan_and_starts_no_worker(
    terminal, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner, "worker_pool", no_workers)
    monkeypatch.setattr(fanout.WorkerPool, "__init__", no_workers)
    config = RunConfig(
        dry_run=True,
        model=MOCK_MODEL_NAME,
        port=free_port(),  # nothing listens there: the plan needs no server
        num_prompts=30,
        random_input_len=32,
        random_output_len=4,
        request_rate=50.0,
        max_concurrency=4,
        workers=2,
        max_model_len=1000,
        disable_tqdm=True,
        dataset_cache=False,
    )
    assert runner.run(config) == 0
    out = capsys.readouterr().out
    assert "Dry run stats:\n  Total prompts: 30\n" in out
    assert "  Arrivals: request rate 50 req/s, burstiness 1 (Poisson process)" in out
    assert "  worker 0: 15 requests, 2 of the 4 credits at the start" in out
    assert "  worker 1: 15 requests, 2 of the 4 credits at the start" in out
    assert out.rstrip().endswith("Dry run: no worker started, no request sent.")


def test_the_python_api_refuses_a_dry_run_in_one_line() -> None:
    with pytest.raises(runner.ConfigError, match="--dry-run prints a plan and has no outcome"):
        runner.run_outcome(RunConfig(dry_run=True))
