"""loadgen.run's errors keep the CLI's exit codes: a stop signal's 130/143 is not a plain 1."""

from __future__ import annotations

from typing import Any

import pytest

import loadgen
import loadgen.api
from loadgen.fleet.fanout import FanoutError, UnreachableServer


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (FanoutError("stopped (SIGINT) while the workers started", 130), 130),
        (FanoutError("stopped (SIGTERM) while the workers started", 143), 143),
        (UnreachableServer("cannot connect to the server at http://127.0.0.1:9"), 1),
    ],
)
def test_a_run_error_keeps_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, error: FanoutError, code: int
) -> None:
    def fail(*_: Any, **__: Any) -> None:
        raise error

    monkeypatch.setattr(loadgen.api, "run_outcome", fail)
    with pytest.raises(loadgen.BenchmarkError) as failed:
        loadgen.run(base_url="http://127.0.0.1:9", model="m", tokenizer="x", num_prompts=1)
    assert failed.value.exit_code == code
    assert str(failed.value) == str(error)
