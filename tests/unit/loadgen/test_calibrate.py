"""`loadgen calibrate`'s steps (loadgen/calibrate.py): their load, and the run each asks for, as
`loadgen run`'s parser reads it (tests/e2e/test_calibrate_run.py runs them)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadgen.calibrate import ClientStep, step_load
from loadgen.cli.keywords import build_config
from loadgen.text.tokenizer import MOCK_MODEL_NAME


def test_step_load_holds_about_concurrency_streams_open() -> None:
    # 64 events 50 ms apart: 3.2 s streams, so 64 / 3.2 s arrivals keep 64 open.
    assert step_load(64, 3.0, 0.0, 50.0, 64)[:2] == (192, pytest.approx(20.0))
    assert step_load(1, 0.1, 0.0, 0.0, 8)[:2] == (1, math.inf)
    # The time limit: two minutes, and ten times the step's rounds of streams.
    assert step_load(64, 3.0, 0.0, 50.0, 64)[2] == pytest.approx(120 + 10 * 3.2 * 3)


def test_a_step_asks_loadgen_run_for_its_load_and_joinable_request_ids(tmp_path: Path) -> None:
    step = ClientStep(2, 64, 192, 20.0, 3, 32, 8, 250.0)
    config = build_config(step.options("http://127.0.0.1:9"))
    assert (config.base_url, config.model) == ("http://127.0.0.1:9", MOCK_MODEL_NAME)
    assert (config.workers, config.max_concurrency, config.num_prompts) == (3, 64, 192)
    assert config.request_rate == 20.0
    assert (config.random_input_len, config.random_output_len) == (32, 8)
    assert config.request_id_prefix == step.prefix == "calib-2-"
    assert not config.save_result  # the result stays in memory
    assert config.disable_tqdm  # no progress bar beside calibrate's table
    unbounded = ClientStep(0, 1, 1, math.inf, 1, 8, 8, 130.0)
    assert build_config(unbounded.options("http://127.0.0.1:9")).request_rate == math.inf

    kept = ClientStep(2, 64, 192, 20.0, 3, 32, 8, 250.0, result_dir=tmp_path / "step-2")
    config = build_config(kept.options("http://127.0.0.1:9"))
    assert config.save_result and config.save_detailed  # --work-dir keeps the client's result
    assert (config.result_dir, config.result_filename) == (str(tmp_path / "step-2"), "step.json")
