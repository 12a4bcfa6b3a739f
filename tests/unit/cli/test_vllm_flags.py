"""Every one of upstream's 105 flags, in underscore spelling: built ones reach the config,
the rest exit 2 with "not supported yet: --flag". No server and no run: `run` is replaced."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from helpers import DATA

from loadgen.cli import cli
from loadgen.cli import run as run_cli
from loadgen.cli.vllm_compat import COMMON_TITLE
from loadgen.config import COMMON_FLAGS, HELP_GROUPS, VLLM_BENCH_SERVE_FLAGS, RunConfig
from loadgen.config.flags import SUPPORTED_DATASETS
from loadgen.config.upstream import UPSTREAM_DATASETS

# Upstream's flag list (`vllm bench serve --help`, one flag a line), kept with the tests.
FLAGS_FILE = DATA / "vllm-bench-serve-flags.txt"

# A value for each built flag that differs from its default ([] for a boolean flag).
BUILT: dict[str, list[str]] = {
    "--sharegpt-output-len": ["64"],
    "--skip-chat-template": [],
    "--no-oversample": [],
    "--disable-shuffle": [],
    "--dataset-path": ["data.jsonl"],
    "--custom-output-len": ["64"],
    "--append-result": [],
    "--backend": ["openai-chat"],
    "--base-url": ["http://127.0.0.1:9"],
    "--burstiness": ["2.5"],
    "--dataset-name": ["sharegpt"],
    "--disable-tqdm": [],
    "--endpoint": ["/v1/chat/completions"],
    "--extra-body": ['{"a": 1}'],
    "--frequency-penalty": ["0.5"],
    "--goodput": ["ttft:100", "tpot:10"],
    "--header": ["x-a=1", "x-b=2"],
    "--host": ["10.0.0.1"],
    "--ignore-eos": [],
    "--input-len": ["77"],
    "--insecure": [],
    "--label": ["nightly"],
    "--logprobs": ["3"],
    "--lora-assignment": ["round-robin"],
    "--lora-modules": ["a", "b"],
    "--max-concurrency": ["8"],
    "--metadata": ["k=v", "n=2"],
    "--metric-percentiles": ["50,99"],
    "--min-p": ["0.1"],
    "--model": ["m"],
    "--num-prompts": ["7"],
    "--num-warmups": ["2"],
    "--output-len": ["33"],
    "--percentile-metrics": ["ttft,e2el"],
    "--port": ["9001"],
    "--presence-penalty": ["0.25"],
    "--profile": [],
    "--ramp-up-end-rps": ["20"],
    "--ramp-up-start-rps": ["10"],
    "--ramp-up-strategy": ["linear"],
    "--random-input-len": ["64"],
    "--random-output-len": ["16"],
    "--random-prefix-len": ["4"],
    "--random-range-ratio": ["0.5"],
    "--ready-check-timeout-sec": ["30"],
    "--repetition-penalty": ["1.1"],
    "--request-id-prefix": ["job-"],
    "--request-rate": ["12.5"],
    "--result-dir": ["out"],
    "--result-filename": ["r.json"],
    "--save-detailed": [],
    "--save-result": [],
    "--seed": ["42"],
    "--served-model-name": ["alias"],
    "--skip-tokenizer-init": [],
    "--custom-ensure-client-side-data": [],
    "--blazedit-max-distance": ["0.9"],
    "--blazedit-min-distance": ["0.1"],
    "--hf-name": ["x/y"],
    "--hf-output-len": ["64"],
    "--hf-split": ["test"],
    "--hf-subset": ["s"],
    "--no-stream": [],
    "--random-mm-base-items-per-request": ["2"],
    "--random-mm-bucket-config": ["{(64, 64, 1): 1.0}"],
    "--random-mm-limit-mm-per-prompt": ['{"image": 3}'],
    "--random-mm-num-mm-items-range-ratio": ["0.5"],
    "--enable-multimodal-chat": [],
    "--sonnet-input-len": ["300"],
    "--sonnet-output-len": ["64"],
    "--sonnet-prefix-len": ["64"],
    "--plot-timeline": [],
    "--plot-dataset-stats": [],
    "--timeline-itl-thresholds": ["10,20"],
    "--probe-request-rate": ["5"],
    "--timed-trace-chunk-hash-size": ["32"],
    "--timed-trace-label-hash-ids": ["h"],
    "--timed-trace-label-input-length": ["i"],
    "--timed-trace-label-output-length": ["o"],
    "--timed-trace-label-timestamp": ["t"],
    "--timed-trace-sec-multiplier": ["0.001"],
    "--self-timed": [],
    "--no-self-timed": [],
    "--spec-bench-category": ["coding"],
    "--spec-bench-output-len": ["64"],
    "--chat-template-kwargs": ['{"thinking": true}'],
    "--prefix-repetition-num-prefixes": ["2"],
    "--prefix-repetition-output-len": ["64"],
    "--prefix-repetition-prefix-len": ["64"],
    "--prefix-repetition-suffix-len": ["64"],
    "--trust-remote-code": [],
    "--use-beam-search": [],
    "--random-batch-size": ["2"],
    "--no-reranker": [],
    "--temperature": ["0.7"],
    "--tokenizer": ["gpt2"],
    "--tokenizer-mode": ["hf"],
    "--top-k": ["5"],
    "--top-p": ["0.9"],
    "--bfcl-categories": ["simple,multiple"],
    "--speed-bench-category": ["qa"],
    "--speed-bench-dataset-subset": ["throughput_1k"],
    "--speed-bench-output-len": ["64"],
    "--asr-max-audio-len-sec": ["30"],
    "--asr-min-audio-len-sec": ["1"],
}
# Flags some flags need alongside them, so the config validates.
NEEDS = {
    "--dataset-path": ["--dataset-name", "custom", "--skip-chat-template"],
    "--dataset-name": ["--dataset-path", "sharegpt.json"],
    "--ramp-up-strategy": ["--ramp-up-start-rps", "1", "--ramp-up-end-rps", "2"],
    "--ramp-up-start-rps": ["--ramp-up-strategy", "linear", "--ramp-up-end-rps", "20"],
    "--ramp-up-end-rps": ["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"],
    "--random-batch-size": ["--backend", "openai-embeddings"],
    "--self-timed": ["--dataset-name", "timed_trace", "--dataset-path", "t.jsonl"],
    "--no-self-timed": ["--dataset-name", "timed_trace", "--dataset-path", "t.jsonl"],
}
# Boolean flags checked through NEEDS: the field each sets, and to what.
FLAG_FIELDS = {"--self-timed": ("self_timed", True), "--no-self-timed": ("self_timed", False)}
# A value for each flag whose feature is not built yet ([] for a boolean flag): none left.
NOT_BUILT: dict[str, list[str]] = {}


def underscored(flag: str) -> str:
    """`--max-concurrency` -> `--max_concurrency`, the spelling upstream also accepts."""
    return "--" + flag[2:].replace("-", "_")


def parse(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[int, str, RunConfig | None]:
    """Run `loadgen run ARGS` with the benchmark itself replaced by config validation."""
    seen: list[RunConfig] = []

    def fake_run(config: RunConfig) -> int:
        config.validate()
        seen.append(config)
        return 0

    monkeypatch.setattr(run_cli, "run", fake_run)
    result = CliRunner().invoke(cli, ["run", *args])
    return result.exit_code, result.output, seen[0] if seen else None


def comparable(config: RunConfig) -> dict:
    """The config's fields, less the per-run random request-id prefix and the flags given."""
    fields = dataclasses.asdict(config)
    fields.pop("request_id_prefix")
    fields.pop("given")
    return fields


def test_the_tables_cover_exactly_upstreams_105_flags() -> None:
    assert not BUILT.keys() & NOT_BUILT.keys()
    assert set(BUILT) | set(NOT_BUILT) == VLLM_BENCH_SERVE_FLAGS
    assert len(VLLM_BENCH_SERVE_FLAGS) == 105
    assert set(FLAGS_FILE.read_text().split()) == VLLM_BENCH_SERVE_FLAGS


@pytest.mark.parametrize("flag", sorted(BUILT))
def test_built_flag_parses_in_underscore_spelling_and_reaches_the_config(
    monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    code, output, baseline = parse(monkeypatch, [])
    assert code == 0, output
    code, output, config = parse(
        monkeypatch, [underscored(flag), *BUILT[flag], *NEEDS.get(flag, [])]
    )
    assert code == 0, output
    assert config is not None and baseline is not None
    if flag == "--request-id-prefix":
        assert config.request_id_prefix == "job-"
    elif flag in FLAG_FIELDS:
        field, value = FLAG_FIELDS[flag]
        assert getattr(config, field) is value
    elif flag in NEEDS:  # the flags given with it change the config too: check its own field
        field = flag[2:].replace("-", "_")
        assert str(getattr(config, field)) == BUILT[flag][0]
    else:
        assert comparable(config) != comparable(baseline), f"{flag} changed nothing"


def test_every_upstream_flag_and_dataset_name_is_built() -> None:
    assert not NOT_BUILT
    assert set(UPSTREAM_DATASETS) <= set(SUPPORTED_DATASETS)


def test_help_shows_every_flag_in_upstreams_sections() -> None:
    result = CliRunner().invoke(cli, ["run", "--help"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    headers = [f"{COMMON_TITLE}:", "Options:", *(f"{title}:" for title in HELP_GROUPS)]
    assert "vllm bench serve flags not supported yet (they exit 2):" not in lines  # none left
    at = [lines.index(h) for h in headers]
    assert at == sorted(at)  # sections in upstream's order, loadgen's and the refused ones last
    sections = {
        h: lines[a : b if b else None] for h, a, b in zip(headers, at, [*at[1:], 0], strict=True)
    }

    def shown(title: str) -> list[str]:  # "-q, --quiet": the long name
        options = [line.split() for line in sections[f"{title}:"][1:] if line.startswith("  -")]
        return [next(w.rstrip(",") for w in words if w.startswith("--")) for words in options]

    assert shown(COMMON_TITLE) == list(COMMON_FLAGS)  # the flags most runs use come first
    for title, flags in HELP_GROUPS.items():
        assert set(shown(title)) == set(flags) - set(COMMON_FLAGS)  # each flag once
    every = [flag for title in [COMMON_TITLE, "Options", *HELP_GROUPS] for flag in shown(title)]
    assert len(every) == len(set(every))
    listed = {w for line in lines for w in line.split() if w.startswith("--")}
    assert listed >= VLLM_BENCH_SERVE_FLAGS
