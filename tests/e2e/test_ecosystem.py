"""loadgen where other tools call it: as `vllm bench sweep serve`'s benchmark command (the
flags the sweep appends and overrides), and from the shell's completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import hang_guard, loadgen

# What vllm 0.33's sweep appends to the bench command (vllm/benchmarks/sweep/serve.py,
# run_benchmark); scripts/bench/vllm_sweep.py runs the sweep itself.
SWEEP_APPENDS = ["--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir"]


def test_a_bench_command_as_the_sweep_builds_it(tmp_path: Path) -> None:
    """The grid's values replace the command's own (`--max-concurrency 1` -> 4) or are added
    (`--request-rate 20`), then the sweep's flags; the result lands where the sweep reads it."""
    command = ["--mock", "--num-prompts", "12", "--random-input-len", "16",
               "--random-output-len", "4", "--max-concurrency", "4", "--disable-tqdm",
               "--request-rate", "20"]  # fmt: skip
    output = tmp_path / "BENCH--max_concurrency=4-request_rate=20" / "run=0.json"
    output.parent.mkdir()
    proc = loadgen(*command, *SWEEP_APPENDS, str(output.parent),
                   "--result-filename", output.name)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(output.read_text())
    assert (result["max_concurrency"], result["request_rate"], result["completed"]) == (4, 20, 12)
    assert "p99_tpot_ms" in result and "p99_e2el_ms" in result
    assert output.with_name("run=0.records.arrow").exists()


def complete(words: str) -> list[str]:
    """What bash completion offers for the last of ``words`` (click's protocol)."""
    env = {**os.environ, "_LOADGEN_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1)}  # fmt: skip
    # The console script: completion is keyed to the program's name (`python -m` is another).
    script = Path(sys.executable).with_name("loadgen")
    proc = subprocess.run(
        [str(script)], env=env, capture_output=True, text=True, timeout=hang_guard(60)
    )
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line]


def test_the_shell_completes_commands_and_flags() -> None:
    assert {"calibrate", "compare"} <= set(complete("loadgen c"))
    assert "--dataset-name" in complete("loadgen run --dataset-n")
