"""`loadgen calibrate`'s step runs (loadgen/cli/calibrate.py): how a step that ended early is told
and which exit code it gives (tests/e2e/test_calibrate_run.py stops real ones)."""

from __future__ import annotations

import signal

from loadgen.calibrate import ClientStep
from loadgen.cli.calibrate import ended_early
from loadgen.fleet.fanout import FanoutError
from loadgen.session.lifecycle import RunFailed

STEP = ClientStep(0, 64, 192, 20.0, 2, 32, 8, 130.4)


def test_a_step_past_its_time_limit_says_so_and_exits_1() -> None:
    stopped = RunFailed("interrupted by SIGALRM: ...", 128 + signal.SIGALRM)
    why = "loadgen run at concurrency 64 did not finish in 130 s"
    assert ended_early(STEP, stopped) == (why, 1)


def test_a_stop_signal_names_itself_and_exits_128_plus_its_number() -> None:
    assert ended_early(STEP, RunFailed("interrupted", 130)) == (
        "interrupted by SIGINT at the step of concurrency 64",
        130,
    )
    waiting = FanoutError("interrupted by SIGTERM while waiting for workers", 143)
    why = "interrupted by SIGTERM at the step of concurrency 64"
    assert ended_early(STEP, waiting) == (why, 143)
    assert ended_early(STEP, RunFailed("interrupted", 129))[1] == 129


def test_any_other_end_is_a_failure() -> None:
    failed = ("loadgen run at concurrency 64 failed", 1)
    assert ended_early(STEP, RunFailed("the run lost workers: ...")) == failed
    assert ended_early(STEP, ValueError("an error without an exit code")) == failed
