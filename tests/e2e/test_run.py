"""End to end: the real CLI, real worker processes and a real mock server process on 127.0.0.1;
what a run sends and measures with its coordinator in the test's process (``run_in_process``),
its exit codes, stdout and signals with the CLI in its own (``loadgen``)."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import shutil
import signal
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    cli,
    hang_guard,
    loadgen,
    mock_server,
    only_json,
    only_json_path,
    refusal,
    run_against_mock,
    run_in_process,
    start_loadgen,
    wait_for_t0,
)

from loadgen.datasets.sonnet import load_sonnet_lines, sample_sonnet_requests
from loadgen.mock.bodies import render_chat
from loadgen.mock.process import EmbeddedMockServer
from loadgen.mock.recorder import TimingRecords
from loadgen.records.read import read_records
from loadgen.report.html_charts import FAILURES_TITLE
from loadgen.text.chat_template import load_chat_template
from loadgen.text.tokenizer import PACKAGED_TOKENIZER, LocalTokenizer, load_tokenizer

SMALL = ["--random-input-len", "64", "--random-output-len", "16", "--disable-tqdm"]
# The mock's model, with the ready check's first request (which the mock counts too).
READY_CHECKED = ["--model", "loadgen-mock", "--ready-check-timeout-sec", "30",
                 "--ready-check-interval-sec", "0.1"]  # fmt: skip
# The result JSON keys of a generation run without --save-detailed, in upstream's order.
UPSTREAM_KEYS = [
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "latencies",
    "queue_times",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
]
DETAILED_KEYS = [
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
]
# The result JSON keys of a pooling run without --save-detailed, in upstream's order.
UPSTREAM_POOLING_KEYS = [
    *UPSTREAM_KEYS[: UPSTREAM_KEYS.index("duration") + 1],
    "completed",
    "total_input_tokens",
    "total_input_sequences",
    "request_throughput",
    "input_sequence_throughput",
    "total_token_throughput",
    "latencies",
    "queue_times",
]


def expected_keys(
    metrics: list[str],
    detailed: bool = False,
    percentiles: tuple[str, ...] = ("99",),
    server_metrics: bool = True,
) -> list[str]:
    """Upstream's keys in its order; a detailed result of a server that sends vLLM's metrics
    object (the mock's default personality) has ``server_queue_times`` and ``server_ttfts``."""
    keys = list(UPSTREAM_KEYS)
    if detailed:
        at = keys.index("latencies")
        keys[at : at + 2] = DETAILED_KEYS
        if server_metrics:
            keys.extend(["server_queue_times", "server_ttfts"])
    return [*keys, *stats_keys(metrics, percentiles), "loadgen"]


def stats_keys(metrics: list[str], percentiles: tuple[str, ...] = ("99",)) -> list[str]:
    """mean, median, std and percentile keys of each metric, in upstream's order."""
    stats = ["mean_{}_ms", "median_{}_ms", "std_{}_ms", *(f"p{p}_{{}}_ms" for p in percentiles)]
    return [s.format(m) for m in metrics for s in stats]


def children_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("workers", [1, 2])
def test_mock_run_accounts_for_every_request(tmp_path: Path, workers: int) -> None:
    # With one worker, the CLI in its own process: its stdout as a pipe gets it, to the last line.
    launch = loadgen if workers == 1 else run_in_process
    proc = launch(
        "--mock", "--workers", str(workers), "--num-prompts", "60", *SMALL,
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "============ Serving Benchmark Result ============" in proc.stdout
    assert "Successful requests:                     60" in proc.stdout
    # The mock ignores sampling parameters: upstream's temperature warning would be noise
    # (tests/e2e/test_first_run.py checks it against a server).
    assert "temperature" not in proc.stdout
    result = only_json(tmp_path)
    assert list(result) == expected_keys(["ttft", "tpot", "itl"], detailed=True)
    assert (result["completed"], result["failed"]) == (60, 0)
    assert result["request_rate"] == "inf"
    assert result["loadgen"]["workers"] == workers
    assert result["loadgen"]["connections_preopened"] == 60  # one per concurrent request
    assert result["loadgen"]["truncated_streams"] == 0  # every mock stream ends with [DONE]
    # The summary and the JSON both end with the client's verdict on itself.
    *_, last_line, results_line, records_line = proc.stdout.strip().splitlines()
    assert results_line.startswith("Results written to ")
    assert records_line == f"Records written to {only_json_path(tmp_path)}".replace(
        ".json", ".records.arrow"
    )
    assert re.match(
        r"client(: OK|-bound): timings carry ≤ \d+\.\d\d ms of client delay at p99, .+; "
        r"worker CPU max \d+ %, .+",
        last_line,
    )
    assert list(result["loadgen"])[-1] == "verdict"
    assert result["loadgen"]["verdict"] == last_line
    client = result["loadgen"]["client"]
    assert len(client["worker_cpu_pct"]) == workers
    assert client["loop_lag_samples"] > 0
    assert result["output_lens"] == [16] * 60  # usage.completion_tokens, ignore_eos forced
    assert result["total_output_tokens"] == 60 * 16
    # The mock counts its BOS token; the dataset's 63 tokens + 1 = 64 per prompt.
    assert all(60 <= n <= 68 for n in result["input_lens"])
    assert all(len(itl) == 15 for itl in result["itls"])
    assert all(t > 0 for t in result["ttfts"])
    assert all(lat >= ttft for lat, ttft in zip(result["latencies"], result["ttfts"], strict=True))
    assert result["errors"] == [""] * 60
    assert all(text.strip() for text in result["generated_texts"])
    assert result["max_concurrent_requests"] <= 60
    # Upstream's default name: {backend}-{rate as a Python float}qps-{model}-{date}.json
    assert re.fullmatch(
        r"openai-infqps-loadgen-mock-\d{8}-\d{6}\.json", only_json_path(tmp_path).name
    )
    assert result["date"] in only_json_path(tmp_path).name


def test_chat_backend_with_concurrency_cap_and_underscore_flags(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions", "--num_prompts", "40", "--max_concurrency", "3",
        "--percentile_metrics", "ttft,e2el,client_queue_time", "--metric_percentiles", "50,99.9",
        "--mock-itl-ms", "1", *SMALL, "--save-result", "--result_dir", str(tmp_path),
        "--result-filename", "chat.json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "chat.json").read_text())
    assert list(result) == expected_keys(
        ["ttft", "e2el", "client_queue_time"], percentiles=("50", "99.9")
    )
    assert (result["completed"], result["failed"]) == (40, 0)
    assert result["backend"] == "openai-chat"
    assert result["max_concurrency"] == 3
    assert 1 <= result["max_concurrent_requests"] <= 3
    for metric in ("ttft", "e2el", "client_queue_time"):
        assert f"p99.9_{metric}_ms" in result
        assert f"p50_{metric}_ms" in result
    assert "mean_itl_ms" not in result
    assert "Maximum request concurrency:             3" in proc.stdout
    assert "P99.9 TTFT (ms):" in proc.stdout


@pytest.mark.parametrize("detailed", [False, True])
def test_pooling_run_writes_upstreams_pooling_keys_and_summary(
    tmp_path: Path, detailed: bool
) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--backend", "openai-embeddings",
        "--endpoint", "/v1/embeddings", "--num-prompts", "30", "--random-input-len", "32",
        "--request-rate", "500", "--max-concurrency", "4",
        "--percentile-metrics", "e2el,client_queue_time,ttft", "--disable-tqdm",
        "--save-result", "--result-dir", str(tmp_path), *(["--save-detailed"] if detailed else []),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    keys = list(UPSTREAM_POOLING_KEYS)
    if detailed:  # input_lens before latencies, errors after queue_times
        keys.insert(keys.index("latencies"), "input_lens")
        keys.append("errors")
    # ttft is never reported for pooling, even when asked for.
    assert list(result) == [*keys, *stats_keys(["e2el", "client_queue_time"]), "loadgen"]
    assert (result["completed"], result["total_input_sequences"]) == (30, 30)
    # The mock counts its BOS token: usage.prompt_tokens is 32 or so per prompt.
    assert 30 * 28 <= result["total_input_tokens"] <= 30 * 36
    assert len(result["latencies"]) == 30 and all(lat > 0 for lat in result["latencies"])
    if detailed:
        assert result["errors"] == [""] * 30
        assert sum(result["input_lens"]) == result["total_input_tokens"]
    summary = proc.stdout[proc.stdout.index(" Serving Benchmark Result ") - 12 :]
    labels = [line[:40].strip() for line in summary.splitlines()[1:9]]
    assert labels == [
        "Successful requests:",
        "Failed requests:",
        "Maximum request concurrency:",
        "Request rate configured (RPS):",
        "Benchmark duration (s):",
        "Total input tokens:",
        "Request throughput (req/s):",
        "Input throughput (inputs/s):",
    ]
    assert "Total generated tokens" not in proc.stdout
    assert "End-to-end Latency" in proc.stdout and "Time to First Token" not in proc.stdout
    assert "sends no temperature" not in proc.stdout  # a generation-only warning


def test_pooling_answers_count_prompt_tokens_as_upstream_in_every_encoding(
    tmp_path: Path,
) -> None:
    input_lens = {}
    for encoding_format in ("float", "bytes", "bytes_only"):
        out = tmp_path / encoding_format
        proc = run_in_process(
            "--mock", "--workers", "1", "--backend", "vllm-pooling", "--endpoint", "/pooling",
            "--extra-body", json.dumps({"encoding_format": encoding_format}),
            "--num-prompts", "10", "--random-input-len", "32", "--disable-tqdm",
            "--save-result", "--save-detailed", "--result-dir", str(out),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        result = only_json(out)
        assert result["completed"] == 10
        input_lens[encoding_format] = result["input_lens"]
    # usage.prompt_tokens from the JSON body or from the metadata header: the same counts.
    assert input_lens["bytes"] == input_lens["float"]
    # bytes_only answers carry no usage: the dataset's lengths, one less (the mock counts BOS).
    assert [n + 1 for n in input_lens["bytes_only"]] == input_lens["float"]


@pytest.mark.parametrize(
    ("args", "requests", "sequences"),
    [
        # 22 documents, 5 per request against one query: 5 requests, 22 scored pairs.
        (["--backend", "vllm-rerank", "--endpoint", "/v1/rerank",
          "--dataset-name", "random-rerank", "--random-batch-size", "5"], 5, 22),
        # 22 texts, 8 per request: 3 requests embedding 22 inputs.
        (["--backend", "openai-embeddings", "--endpoint", "/v1/embeddings",
          "--random-batch-size", "8"], 3, 22),
    ],
)  # fmt: skip
def test_batched_pooling_runs_count_requests_and_inputs(
    tmp_path: Path, args: list[str], requests: int, sequences: int
) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", *args, "--num-prompts", "22", "--random-input-len", "32",
        "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    assert result["num_prompts"] == 22  # what was asked, as upstream
    assert (result["completed"], result["total_input_sequences"]) == (requests, sequences)
    assert len(result["input_lens"]) == len(result["latencies"]) == requests
    assert f"Successful requests:                     {requests}" in proc.stdout


def test_prefix_repetition_run_sends_groups_without_request_ids(tmp_path: Path) -> None:
    timings = tmp_path / "timings.npz"
    proc = run_against_mock(
        *READY_CHECKED, "--dataset-name", "prefix_repetition", "--num-prompts", "14",
        "--prefix-repetition-num-prefixes", "4", "--prefix-repetition-prefix-len", "24",
        "--prefix-repetition-suffix-len", "8", "--output-len", "4", "--workers", "2",
        "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
        mock_args=("--record-timings", str(timings)),
    ).proc  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "prefix_repetition: sending 12 requests, 3 per prefix" in proc.stdout
    result = only_json(tmp_path)
    assert (result["num_prompts"], result["completed"]) == (14, 12)
    assert result["output_lens"] == [4] * 12
    # 24 + 8 tokens and the mock's BOS, give or take a merge where prefix and suffix join.
    assert all(28 <= n <= 38 for n in result["input_lens"]), result["input_lens"]
    # As upstream, no x-request-id: the mock names every request itself (cmpl-...).
    ids = TimingRecords.load(timings).request_ids.tolist()
    assert len(ids) == 13 and all(i.startswith("cmpl-") for i in ids)  # the ready check too


def test_probes_are_reported_apart_with_upstreams_keys(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--num-prompts", "40", *SMALL, "--mock-itl-ms", "2",
        "--max-concurrency", "4", "--probe-request-rate", "50",
        "--save-result", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Probe request rate: 50.0 req/s" in proc.stdout
    result = only_json(tmp_path)
    keys = expected_keys(["ttft", "tpot", "itl"])
    at = keys.index("rtfx") + 1
    keys[at:at] = [
        "probe_completed", "probe_failed", "probe_median_e2el_ms", "probe_p99_e2el_ms",
        "probe_max_e2el_ms",
    ]  # fmt: skip
    assert list(result) == keys
    assert result["probe_completed"] >= 1 and result["probe_failed"] == 0
    assert result["completed"] == 40  # the probes are not the run's requests
    summary = proc.stdout.splitlines()
    block = summary.index("------------------Probe Requests------------------")
    assert summary[block - 1].startswith("Total token throughput (tok/s):")
    assert summary[block + 1].startswith("Probe requests completed:")


def test_plots_are_written_beside_the_result_file_even_unsaved(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--num-prompts", "12", *SMALL, "--mock-itl-ms", "1",
        "--plot-timeline", "--timeline-itl-thresholds", "1,5", "--plot-dataset-stats",
        "--result-dir", str(tmp_path), "--result-filename", "run.json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"Timeline plot saved to: {tmp_path / 'run.timeline.html'}" in proc.stdout
    assert f"Dataset statistics plot saved to: {tmp_path / 'run.dataset_stats.png'}" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run.dataset_stats.png",
        "run.timeline.html",
    ]  # fmt: skip  (no --save-result: no JSON, as upstream)
    html = (tmp_path / "run.timeline.html").read_text()
    assert "Req 11" in html and "ITL \\u003c 1ms" in html  # JSON-escaped in the page
    assert "Could not infer format" not in proc.stderr


def test_random_mm_chat_run_sends_its_images(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions", "--dataset-name", "random-mm",
        "--random-mm-bucket-config", "{(32, 32, 1): 1.0}", "--random-mm-base-items-per-request",
        "2", "--num-prompts", "10", *SMALL, "--save-result", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    assert (result["completed"], result["total_output_tokens"]) == (10, 160)  # ignore_eos forced
    refused = refusal("--mock", "--dataset-name", "random-mm", *SMALL)
    assert refused.returncode == 2
    assert "is not supported on backend 'openai'" in refused.stderr


def test_spec_decode_counters_become_upstreams_block_and_keys(tmp_path: Path) -> None:
    proc = run_against_mock(
        *READY_CHECKED, "--num-prompts", "20", *SMALL,
        "--save-result", "--result-dir", str(tmp_path),
        mock_args=("--spec-decode-draft-tokens", "4"),
    ).proc  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    keys = expected_keys(["ttft", "tpot", "itl"])
    at = keys.index("rtfx") + 1
    keys[at:at] = [
        "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
        "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
        "spec_decode_per_position_acceptance_rates",
    ]  # fmt: skip
    assert list(result) == keys
    # The mock: one 4-token draft per generated token, 2 accepted; the ready check's tokens
    # come before the first reading, so only the run's 20 x 16 count.
    assert result["spec_decode_num_drafts"] == 320
    assert (result["spec_decode_acceptance_rate"], result["spec_decode_acceptance_length"]) == (
        50.0,
        3.0,
    )
    assert result["spec_decode_per_position_acceptance_rates"] == [1.0, 1.0, 0.0, 0.0]
    lines = proc.stdout.splitlines()
    block = lines.index("---------------Speculative Decoding---------------")
    assert lines[block + 1] == "Acceptance rate (%):                     50.00     "
    assert lines[block + 11] == "=" * 50


def test_random_prompts_are_cut_to_a_server_tokenizer_that_counts_more(tmp_path: Path) -> None:
    # The server's tokenizer: the packaged one without most of its merges, so it splits the
    # client's prompts into more tokens.
    tokenizer = json.loads(PACKAGED_TOKENIZER.read_text())
    tokenizer["model"]["merges"] = tokenizer["model"]["merges"][:500]
    (tmp_path / "server-tokenizer.json").write_text(json.dumps(tokenizer))
    proc = run_against_mock(
        *READY_CHECKED, "--num-prompts", "20", *SMALL,
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
        mock_args=("--tokenizer", str(tmp_path / "server-tokenizer.json")),
    ).proc  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"WARNING: tokenizer mismatch \(server=\d+, expected=63\), re-aligning prompts\.",
        proc.stdout,
    )
    # The server now counts each prompt as the dataset's 63 tokens plus its BOS, give or take
    # a token where a cut lands inside a merge.
    lens = only_json(tmp_path / "out")["input_lens"]
    assert all(62 <= n <= 66 for n in lens), lens


def test_hf_dataset_from_a_local_copy(tmp_path: Path) -> None:
    rows = [{"turns": [" ".join(["word"] * (3 + i % 5)), "more"]} for i in range(40)]
    (tmp_path / "mt").mkdir()
    (tmp_path / "mt" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_in_process(
        "--mock", "--dataset-name", "hf", "--dataset-path", str(tmp_path / "mt"),
        "--hf-name", "philschmid/mt-bench", "--hf-split", "train", "--num-prompts", "12",
        "--output-len", "3", "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert result["completed"] == 12 and result["output_lens"] == [3] * 12
    refused = refusal("--mock", "--dataset-name", "hf", "--dataset-path", "nobody/unknown-dataset")
    assert refused.returncode == 2
    assert "Unsupported dataset path: nobody/unknown-dataset. --dataset-name hf reads" in (
        refused.stderr
    )


def test_custom_image_chat_run(tmp_path: Path) -> None:
    rows = [{"prompt": f"Describe picture {i}", "image_files": ["/img/a.png"]} for i in range(5)]
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_in_process(
        "--mock", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--dataset-name", "custom_image", "--dataset-path", str(tmp_path / "i.jsonl"),
        "--num-prompts", "0", "--custom-output-len", "3", "--disable-tqdm",
        "--save-result", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["completed"], result["total_output_tokens"]) == (5, 15)


NO_USAGE = json.dumps({"stream_options": {"include_usage": False}})  # the mock then sends none


@pytest.mark.parametrize("skip_tokenizer_init", [False, True])
def test_output_tokens_without_usage_fall_back_in_the_coordinator(
    tmp_path: Path, skip_tokenizer_init: bool
) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--num-prompts", "20", *SMALL, "--extra-body", NO_USAGE,
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        *(["--skip-tokenizer-init"] if skip_tokenizer_init else []),
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    assert result["completed"] == 20
    if skip_tokenizer_init:
        # Upstream without a tokenizer: 1 token per request; no tokenizer_id; TTFT, TPOT, ITL
        # and the token throughputs are not reported.
        assert result["output_lens"] == [1] * 20
        assert result["tokenizer_id"] is None
        assert list(result) == expected_keys(["e2el"], detailed=True, server_metrics=False)
        for absent in ("Total generated tokens", "Output token throughput", "Time to First"):
            assert absent not in proc.stdout
        assert "Peak concurrent requests:" in proc.stdout
        assert "End-to-end Latency" in proc.stdout
    else:
        # The streamed text re-tokenized after the run: the mock's 16 tokens.
        assert result["output_lens"] == [16] * 20
        assert result["tokenizer_id"] == "loadgen-mock"
        assert list(result) == expected_keys(
            ["ttft", "tpot", "itl", "e2el"], detailed=True, server_metrics=False
        )
    # The dataset was built either way (with the server's /tokenize when skipping).
    assert all(60 <= n <= 68 for n in result["input_lens"])


def test_bad_flag_values_exit_2_with_one_line() -> None:
    proc = refusal("--mock", "--extra-body", "{not json")
    assert proc.returncode == 2
    assert "--extra-body" in proc.stderr
    proc = refusal("--mock", "--max-concurrency", "0")
    assert proc.returncode == 2
    assert "--max-concurrency must be greater than 0" in proc.stderr
    proc = refusal("--mock", "--header", "novalue")
    assert proc.returncode == 2
    assert "--header" in proc.stderr
    proc = refusal("--mock", "--random-range-ratio", "1.5")
    assert proc.returncode == 2
    assert "--random-range-ratio" in proc.stderr
    proc = refusal("--mock", "--random-input-len", "0")
    assert proc.returncode == 2
    assert "--random-input-len" in proc.stderr


def test_missing_tokenizer_is_a_one_line_error() -> None:
    proc = refusal("--mock", "--tokenizer", "/no/such/tokenizer", "--workers", "2")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: tokenizer path /no/such/tokenizer does not exist"


def test_server_errors_are_counted_as_failures(tmp_path: Path) -> None:
    proc = run_against_mock(
        "--model", "loadgen-mock", "--workers", "2", "--num-prompts", "50",
        *SMALL, "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
        mock_args=("--error-rate", "0.3", "--seed", "1"),
    ).proc  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path)
    assert result["completed"] + result["failed"] == 50
    assert 0 < result["failed"] < 50
    failed = [e for e in result["errors"] if e]
    assert len(failed) == result["failed"]
    assert all(e.startswith("HTTP 500") for e in failed)
    assert "Failed requests during benchmark run detected (capping to 10):" in proc.stdout
    # Errors in every view (issue 29 point 4): grouped by kind after upstream's table, in the
    # JSON, each exported row, report.html's table and its failures over time.
    n = result["failed"]
    kind = "HTTP 500 Internal Server Error"
    assert f"failed requests by kind: {n} × {kind}" in proc.stdout.splitlines()
    assert "requests not completed" not in proc.stdout  # none cancelled or not sent
    assert result["loadgen"]["errors"] == {
        "failed": n, "cancelled": 0, "not_sent": 0, "by_kind": {kind: n},
    }  # fmt: skip
    (records,) = tmp_path.glob("*.records.arrow")
    rows = list(csv.DictReader(io.StringIO(cli("report", str(records), "--format", "csv").stdout)))
    assert Counter(row["outcome"] for row in rows) == {"completed": 50 - n, "failed": n}
    assert {row["error_kind"] for row in rows if row["outcome"] == "failed"} == {kind}
    drawn = cli("report", str(records), "--format", "html", "--output", str(tmp_path / "r.html"))
    assert drawn.returncode == 0, drawn.stderr
    page = html.unescape((tmp_path / "r.html").read_text())
    assert "Requests that did not complete" in page
    assert f"<td>failed</td><td>{kind}</td><td>{n}</td>" in page
    assert FAILURES_TITLE in page


def test_model_discovered_from_server_when_omitted(tmp_path: Path) -> None:
    proc = run_against_mock(
        "--num-prompts", "10", *SMALL, "--save-result", "--result-dir", str(tmp_path)
    ).proc
    assert proc.returncode == 0, proc.stderr
    assert "First model name: loadgen-mock" in proc.stdout
    assert only_json(tmp_path)["model_id"] == "loadgen-mock"


def test_killed_worker_ends_the_run_with_partial_results(tmp_path: Path) -> None:
    proc = start_loadgen(
        "--mock", "--mock-itl-ms", "40", "--workers", "2", "--num-prompts", "40",
        "--random-input-len", "32", "--random-output-len", "100",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
    )  # fmt: skip
    workers = wait_for_workers(proc.pid, count=2)
    wait_for_t0(proc)
    time.sleep(1.5)  # mid-run: each stream takes about 4 s
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=hang_guard(60))
    assert proc.returncode == 1
    assert "worker 0 died" in stderr or "worker 1 died" in stderr, stderr
    result = only_json(tmp_path)
    errors = result["loadgen"]["errors"]
    assert result["completed"] + result["failed"] + errors["cancelled"] + errors["not_sent"] == 40
    assert result["failed"] >= 1  # the lost worker's requests
    assert any(e.startswith("lost: worker") for e in result["errors"])


def test_server_going_away_fails_the_open_requests_without_a_hang(tmp_path: Path) -> None:
    mock = EmbeddedMockServer(itl_ms=40)
    url = mock.start()
    proc = start_loadgen(
        "--base-url", url, "--model", "loadgen-mock", "--workers", "2", "--num-prompts", "30",
        "--random-input-len", "32", "--random-output-len", "100",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
    )  # fmt: skip
    wait_for_t0(proc)
    time.sleep(1.5)  # mid-run: each stream takes about 4 s
    assert mock.process is not None
    mock.process.kill()
    mock.stop()
    proc.communicate(timeout=hang_guard(60))
    result = only_json(tmp_path)
    assert result["completed"] + result["failed"] == 30
    assert result["failed"] == 30  # every stream was still open when the server died
    assert proc.returncode == 1  # nothing succeeded: a clear error, not a silent zero


def wait_for_workers(pid: int, count: int, timeout: float = 30) -> list[int]:
    """The worker processes of a running `loadgen run` (spawned children that import workers)."""
    deadline = time.monotonic() + hang_guard(timeout)
    while time.monotonic() < deadline:
        found = []
        for child in children_of(pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"multiprocessing" in cmdline and b"resource_tracker" not in cmdline:
                found.append(child)
        if len(found) >= count:
            return sorted(found)
        time.sleep(0.05)
    raise AssertionError("the workers did not start")


def test_paced_run_with_cap_reports_queue_inclusive_latency(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--workers", "2", "--num-prompts", "40", "--request-rate", "100",
        "--burstiness", "inf", "--max-concurrency", "4",
        "--percentile-metrics", "ttft,e2el_including_client_queue", *SMALL,
        "--save-result", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Request rate configured (RPS):           100.00" in proc.stdout
    assert "Queue-inclusive End-to-end Latency" in proc.stdout
    path = only_json_path(tmp_path)
    assert path.name.startswith("openai-100.0qps-concurrency4-loadgen-mock-")
    result = json.loads(path.read_text())
    assert result["request_rate"] == 100.0
    assert result["completed"] == 40
    assert "p99_e2el_including_client_queue_ms" in result
    # Constant gaps of 10 ms: the last request is released at 0.4 s, so the run lasts longer.
    assert result["duration"] >= 0.4
    # Sent on time: the median send lag is within the workers' own measured loop delay and
    # one 10 ms gap of the schedule (time queued for the cap is not send lag).
    lag_ms = result["loadgen"]["send_lag_ms"]["p50"]
    delay_ms = result["loadgen"]["client"]["loop_lag_max_ms"]
    print(f"send lag p50 {lag_ms:.2f} ms, loop lag max {delay_ms:.2f} ms")
    assert lag_ms < delay_ms + 10, (lag_ms, delay_ms)


def test_ramp_up_run_reports_upstreams_keys_events_and_name(tmp_path: Path) -> None:
    proc = run_in_process(
        "--mock", "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "50",
        "--ramp-up-end-rps", "200", "--num-prompts", "40", *SMALL,
        "--save-result", "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traffic ramp-up strategy: linear.\n" in proc.stdout
    assert (
        "Will increase RPS from 50 to 200 RPS over the duration of the benchmark.\n" in proc.stdout
    )
    assert "Traffic request rate" not in proc.stdout
    path = only_json_path(tmp_path)
    assert re.fullmatch(
        r"openai-ramp-up-linear-50qps-200qps-loadgen-mock-\d{8}-\d{6}\.json", path.name
    )
    result = json.loads(path.read_text())
    keys = expected_keys(["ttft", "tpot", "itl"])
    at = keys.index("max_concurrency") + 1
    keys[at:at] = ["ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"]
    keys.insert(keys.index("rtfx") + 1, "rps_change_events")
    assert list(result) == keys
    assert result["request_rate"] == "inf"
    assert (result["ramp_up_strategy"], result["ramp_up_start_rps"]) == ("linear", 50)
    assert result["ramp_up_end_rps"] == 200
    assert result["completed"] == 40
    # Request i's rate is 50 + 150 i / 39: the last reaches 200, so every whole rps has an event.
    events = result["rps_change_events"]
    assert [e["rps"] for e in events] == list(range(50, 201))
    assert all(set(e) == {"rps", "timestamp"} for e in events)
    stamps = [datetime.fromisoformat(e["timestamp"]) for e in events]
    assert stamps == sorted(stamps)
    assert abs(datetime.now() - stamps[0]) < timedelta(minutes=1)
    # The last event is stamped at the last request's scheduled release, within the run.
    assert timedelta(0) < stamps[-1] - stamps[0] <= timedelta(seconds=result["duration"])


def test_goodput_label_metadata_and_appended_results(tmp_path: Path) -> None:
    args = (
        "--mock", "--workers", "2", "--num-prompts", "12", *SMALL, "--result-dir", str(tmp_path),
        "--label", "nightly", "--metadata", "gpu=h200", "run=7", "--goodput", "ttft:60000",
        "tpot:60000",
    )  # fmt: skip
    first = run_in_process(*args, "--save-result")
    assert first.returncode == 0, first.stderr
    assert "Request goodput (req/s):" in first.stdout
    path = only_json_path(tmp_path)
    assert path.name.startswith("nightly-inf")
    result = json.loads(path.read_text())
    keys = list(result)
    assert keys[keys.index("num_prompts") + 1 : keys.index("request_rate")] == ["gpu", "run"]
    assert (result["label"], result["gpu"], result["run"]) == ("nightly", "h200", "7")
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])

    again = run_in_process(*args[:-3], "--goodput", "e2el:0", "--append-result",
                    "--result-filename", path.name)  # fmt: skip
    assert again.returncode == 0, again.stderr
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["request_goodput"] == 0.0  # no request ends within 0 ms


def test_no_goodput_flag_means_null_goodput(tmp_path: Path) -> None:
    proc = run_in_process("--mock", "--num-prompts", "4", *SMALL, "--save-result",
                   "--result-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Request goodput" not in proc.stdout
    assert json.loads(only_json_path(tmp_path).read_text())["request_goodput"] is None


def test_profile_brackets_the_timed_run() -> None:
    run = run_against_mock(
        "--model", "loadgen-mock", "--num-prompts", "6", *SMALL, "--profile", in_process=False
    )  # fmt: skip
    proc, seen = run.proc, run.stats["requests"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # Upstream's order: the run is announced, then the profiler starts, then the traffic.
    started = lines.index("Profiler started")
    assert lines.index("Starting main benchmark run...") < started
    assert started < lines.index("Traffic request rate: inf")
    assert lines.index("Stopping profiler...") > started
    assert "Profiler stopped" in lines
    assert seen["POST /start_profile"] == seen["POST /stop_profile"] == 1


def test_profile_refused_by_the_server_fails_before_the_run() -> None:
    proc = run_against_mock(
        "--model", "loadgen-mock", "--num-prompts", "3", *SMALL, "--profile",
        mock_args=("--unavailable-for", "60"),
    ).proc  # fmt: skip
    assert proc.returncode == 1
    assert "--profile: POST " in proc.stderr and "HTTP 503" in proc.stderr
    assert "Traffic request rate: inf" not in proc.stdout


def test_lora_modules_name_the_model_of_each_request(tmp_path: Path) -> None:
    with mock_server("--lora", "adapter-a", "--lora", "adapter-b") as url:
        served = run_in_process("--base-url", url, "--model", "loadgen-mock", "--num-prompts",
                                "8", *SMALL, "--lora-modules", "adapter-a", "adapter-b",
                                "--lora_assignment", "round-robin")  # fmt: skip
        unknown = run_in_process("--base-url", url, "--model", "loadgen-mock", "--num-prompts",
                                 "4", *SMALL, "--lora-modules", "adapter-c")  # fmt: skip
    assert served.returncode == 0, served.stderr
    assert "Successful requests:                     8" in served.stdout
    # Every request named the adapter, which this server does not serve.
    assert unknown.returncode == 1
    assert "The model `adapter-c` does not exist." in unknown.stderr


def write_custom_file(path: Path) -> list[dict]:
    rows = [{"prompt": " ".join(["word"] * (3 + 4 * i)), "output_tokens": 4 + i} for i in range(5)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def test_custom_dataset_sends_upstreams_sample_in_order(tmp_path: Path) -> None:
    import random

    rows = write_custom_file(tmp_path / "prompts.jsonl")
    proc = run_in_process(
        "--mock", "--workers", "2", "--dataset_name", "custom",
        "--dataset-path", str(tmp_path / "prompts.jsonl"), "--skip-chat-template",
        "--custom-output-len", "-1", "--ignore-eos", "--num-prompts", "8", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["completed"], result["failed"]) == (8, 0)
    order = list(rows)  # upstream: random.seed(seed); shuffle; oversample with random.choice
    random.seed(0)
    random.shuffle(order)
    random.seed(0)
    order += [random.choice(order[:5]) for _ in range(3)]
    assert result["output_lens"] == [row["output_tokens"] for row in order]
    # The mock counts each prompt's tokens plus its BOS: 1 + 3 + 4i words, one token each.
    assert result["input_lens"] == [len(row["prompt"].split()) + 1 for row in order]


def test_custom_dataset_without_oversampling_sends_the_file_once(tmp_path: Path) -> None:
    write_custom_file(tmp_path / "prompts.jsonl")
    proc = run_in_process(
        "--mock", "--dataset-name", "custom", "--dataset-path", str(tmp_path / "prompts.jsonl"),
        "--skip-chat-template", "--no-oversample", "--num-prompts", "8", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "sending 5 of the 8 asked for" in proc.stdout
    assert "Successful requests:                     5" in proc.stdout
    result = only_json(tmp_path / "out")
    assert result["num_prompts"] == 8  # the value of --num-prompts, as upstream writes it
    assert len(result["errors"]) == 5


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--dataset-path", "{file}", "--tokenizer", "{tok}"], "pass --skip-chat-template", 1),
        ([], "--dataset-name custom needs --dataset-path", 2),
        (["--skip-chat-template", "--dataset-path", "{missing}"], "No such file", 1),
    ],
)
def test_custom_dataset_refusals_name_the_culprit(
    tmp_path: Path, args: list[str], message: str, code: int
) -> None:
    write_custom_file(tmp_path / "prompts.jsonl")
    # A tokenizer without a chat template: only the template is missing.
    (tmp_path / "tok").mkdir()
    shutil.copy(PACKAGED_TOKENIZER, tmp_path / "tok" / "tokenizer.json")
    names = {
        "file": str(tmp_path / "prompts.jsonl"),
        "missing": str(tmp_path / "no.jsonl"),
        "tok": str(tmp_path / "tok"),
    }
    proc = refusal("--mock", "--dataset-name", "custom", *(a.format(**names) for a in args))
    assert proc.returncode == code
    assert message in proc.stderr.strip().splitlines()[-1]  # one line names it


def test_custom_prompts_get_the_chat_template_unless_skipped(tmp_path: Path) -> None:
    rows = write_custom_file(tmp_path / "prompts.jsonl")
    proc = run_in_process(
        "--mock", "--dataset-name", "custom", "--dataset-path", str(tmp_path / "prompts.jsonl"),
        "--disable-shuffle", "--num-prompts", "5", "--output-len", "4", "--disable-tqdm",
        "--chat-template-kwargs", '{"thinking": true}',
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stdout
    result = only_json(tmp_path / "out")
    # The server counted the templated prompts (with its own BOS before the template's).
    template, tokenizer = load_chat_template("loadgen-mock"), load_tokenizer("loadgen-mock")
    rendered = [template.render_user_prompt(row["prompt"]) for row in rows]
    assert rendered[0].startswith("<|begin_of_text|>user: word")
    assert result["input_lens"] == [len(tokenizer.encode(text).ids) for text in rendered]
    templated = run_in_process(
        "--mock", "--dataset-name", "custom", "--dataset-path", str(tmp_path / "prompts.jsonl"),
        "--disable-shuffle", "--num-prompts", "5", "--output-len", "4", "--disable-tqdm",
        "--skip-chat-template", "--chat-template-kwargs", '{"thinking": true}',
    )  # fmt: skip
    assert templated.returncode == 0, templated.stderr
    assert "warning: --chat-template-kwargs has no effect with --skip-chat-template" in (
        templated.stdout
    )


def test_spec_bench_sends_first_turns_templated_in_seed_0_order(tmp_path: Path) -> None:
    import random

    questions = [
        {"question_id": i, "category": "coding" if i % 2 else "qa", "turns": ["word " * i, "x"]}
        for i in range(9)
    ]
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    proc = run_in_process(
        "--mock", "--dataset-name", "spec_bench", "--dataset-path", str(path),
        "--spec-bench-category", "coding", "--num-prompts", "4", "--output-len", "3",
        "--seed", "7", "--skip-chat-template", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Upstream's quirks, kept and told: its SpecBench gets no seed and no skip flag.
    assert "warning: --skip-chat-template has no effect with --dataset-name spec_bench" in (
        proc.stdout
    )
    assert "warning: --seed 7 does not reach the spec_bench shuffle" in proc.stdout
    result = only_json(tmp_path / "out")
    assert result["output_lens"] == [3] * 4
    coding = [{"prompt": q["turns"][0]} for q in questions if q["category"] == "coding"]
    random.seed(0)
    random.shuffle(coding)
    template, tokenizer = load_chat_template("loadgen-mock"), load_tokenizer("loadgen-mock")
    expected = [len(tokenizer.encode(template.render_user_prompt(r["prompt"])).ids) for r in coding]
    assert result["input_lens"] == expected  # templated, in seed-0 order


@pytest.mark.parametrize("self_timed", [True, False])
def test_timed_trace_replays_token_id_prompts_at_the_trace_instants(
    tmp_path: Path, self_timed: bool
) -> None:
    rows = [
        {"ts_ms": t, "input_length": 24, "output_length": 3, "hash_ids": [7, t]}
        for t in (0, 100, 300, 250)
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    proc = run_in_process(
        "--mock", "--workers", "2", "--dataset-name", "timed_trace", "--dataset-path", str(path),
        "--timed-trace-label-timestamp", "ts_ms", "--timed-trace-sec-multiplier", "0.001",
        "--num-prompts", "10", "--disable-tqdm", "--request-rate", "1000",
        *([] if self_timed else ["--no-self-timed"]),
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["num_prompts"], result["completed"]) == (10, 4)
    assert result["input_lens"] == [24] * 4  # token ids, counted as sent (no BOS added)
    assert result["output_lens"] == [3] * 4  # ignore_eos forced, as upstream
    # The release instants (what the schedule governs; the send stamp comes a loop pass later,
    # which a busy machine stretches), each late by at most the run's measured send lag.
    (records_file,) = (tmp_path / "out").glob("*.records.arrow")
    released_ns = read_records(str(records_file)).records["released_ns"]
    sent = np.sort(released_ns - released_ns.min()) / 1e9
    late_s = result["loadgen"]["send_lag_ms"]["max"] / 1e3 + 0.001
    print(f"released at {sent}; send lag up to {late_s * 1e3:.2f} ms")
    if self_timed:
        assert "Self timing is set, using the timestamps from the trace file." in proc.stdout
        assert "warning: --request-rate has no effect with a self-timed trace" in proc.stdout
        # 0, 100, 300 ms, and the earlier 250 goes right after 300 (a running maximum).
        np.testing.assert_allclose(sent, [0.0, 0.1, 0.3, 0.3], atol=late_s)
    else:
        assert "Traffic request rate: 1000.0" in proc.stdout
        assert sent.max() < 0.003 + late_s  # 4 requests at 1000/s: not the trace's instants


@pytest.mark.parametrize("chat", [False, True])
def test_sonnet_sends_templated_text_or_raw_chat_prompts(tmp_path: Path, chat: bool) -> None:
    poem = tmp_path / "sonnet.txt"
    poem.write_text("".join(f"{' '.join(['the'] * (2 + i % 4))} verse\n" for i in range(30)))
    backend = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"] if chat else []
    proc = run_in_process(
        "--mock", *backend, "--dataset-name", "sonnet", "--dataset-path", str(poem),
        "--sonnet-input-len", "90", "--sonnet-prefix-len", "40", "--sonnet-output-len", "5",
        "--num-prompts", "6", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert result["completed"] == 6 and result["output_lens"] == [5] * 6
    assert all(40 <= n <= 92 for n in result["input_lens"]), result["input_lens"]
    # The server counts what it got: the templated text (plus its BOS) for completions; the
    # raw prompt, in its own "user: ...\n" chat rendering, for chat. The same seed draws the
    # same prompts here, so the counts tell which was sent.
    template, tokenizer = load_chat_template("loadgen-mock"), load_tokenizer("loadgen-mock")
    sampled = sample_sonnet_requests(
        load_sonnet_lines(str(poem)), LocalTokenizer(tokenizer), template.render_user_prompt,
        6, 90, 40, 5, 0, send_templated=True,
    )  # fmt: skip
    raw = [p.removeprefix("<|begin_of_text|>user: ").removesuffix("\nassistant: ") for p in
           sampled.prompts]  # fmt: skip
    sent = [render_chat([{"role": "user", "content": r}]) for r in raw] if chat else sampled.prompts
    assert result["input_lens"] == [len(tokenizer.encode(text).ids) for text in sent]


def test_custom_num_prompts_0_sends_every_line(tmp_path: Path) -> None:
    write_custom_file(tmp_path / "prompts.jsonl")
    proc = run_in_process(
        "--mock", "--dataset-name", "custom", "--dataset-path", str(tmp_path / "prompts.jsonl"),
        "--skip-chat-template", "--num-prompts", "0", "--disable-tqdm",
        "--save-result", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["num_prompts"], result["completed"]) == (0, 5)  # as upstream: 0 means all


def write_sharegpt_file(path: Path, lengths: list[tuple[int, int]]) -> list[dict]:
    entries = [
        {
            "id": f"e{i}",
            "conversations": [
                {"from": "human", "value": " ".join(["the"] * p)},
                {"from": "gpt", "value": " ".join(["a"] * c)},
            ],
        }
        for i, (p, c) in enumerate(lengths)
    ]
    path.write_text(json.dumps(entries))
    return entries


def test_sharegpt_dataset_asks_for_each_completions_length(tmp_path: Path) -> None:
    import random

    # The second entry's 2-word completion (3 tokens with a BOS) fails upstream's filter.
    lengths = [(5, 9), (6, 2), (7, 11), (8, 12), (9, 13)]
    entries = write_sharegpt_file(tmp_path / "sg.json", lengths)
    proc = run_in_process(
        "--mock", "--workers", "2", "--dataset-name", "sharegpt",
        "--dataset_path", str(tmp_path / "sg.json"), "--ignore-eos", "--num-prompts", "6",
        "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp_path / "o"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "o")
    assert (result["completed"], result["failed"]) == (6, 0)
    order = list(entries)
    random.seed(0)
    random.shuffle(order)
    kept = [e for e in order if e["id"] != "e1"]
    random.seed(0)
    kept += [random.choice(kept) for _ in range(2)]
    words = [[len(turn["value"].split()) for turn in e["conversations"]] for e in kept]
    assert result["output_lens"] == [c + 1 for _, c in words]  # completion tokens with a BOS
    assert result["input_lens"] == [p + 1 for p, _ in words]


def test_sharegpt_entries_with_an_image_or_video_run_on_chat_and_completions(
    tmp_path: Path,
) -> None:
    # The parts themselves are checked in tests/unit/datasets/test_dataset_sharegpt.py and against
    # upstream by dataset_parity.py; here they travel through the CLI, workers and the mock.
    entries = write_sharegpt_file(tmp_path / "sg.json", [(5, 9), (6, 10), (7, 11)])
    entries[0]["image"], entries[1]["video"] = "https://example.com/a.png", "clips/b.mp4"
    (tmp_path / "sg.json").write_text(json.dumps(entries))
    args = ["--mock", "--dataset-name", "sharegpt", "--dataset-path", str(tmp_path / "sg.json")]
    for backend, endpoint in (
        ("openai-chat", "/v1/chat/completions"),
        ("openai", "/v1/completions"),
    ):
        proc = run_in_process(
            *args, "--backend", backend, "--endpoint", endpoint, "--num-prompts", "3",
            "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path / backend),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert only_json(tmp_path / backend)["completed"] == 3


def test_sharegpt_short_dataset_without_oversampling_leaves_a_worker_idle(tmp_path: Path) -> None:
    write_sharegpt_file(tmp_path / "sg.json", [(5, 9), (6, 2)])
    proc = run_in_process(
        "--mock", "--workers", "2", "--dataset-name", "sharegpt", "--dataset-path",
        str(tmp_path / "sg.json"), "--no-oversample", "--sharegpt-output-len", "5",
        "--num-prompts", "4", "--disable-tqdm",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "sending 2 of the 4 asked for" in proc.stdout  # a fixed length keeps the 2-word reply
    assert "Successful requests:                     2" in proc.stdout


def test_unusable_dataset_contents_exit_1_naming_the_file(tmp_path: Path) -> None:
    write_sharegpt_file(tmp_path / "sg.json", [(2, 9), (6, 2)])  # both fail the length filter
    proc = run_in_process(
        "--mock", "--dataset-name", "sharegpt", "--dataset-path", str(tmp_path / "sg.json"),
        "--num-prompts", "4", "--disable-tqdm",
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --dataset-path {tmp_path / 'sg.json'}: "
        "no ShareGPT entry passes upstream's length filter"
    )
