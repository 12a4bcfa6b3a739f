"""The Rust client's extras, their pure parts: the --max-model-len filter (vllm-bench's rule,
prompt_len + output_len <= N), random prompts as token ids (--prompt-token-ids), the dry run's
plan lines, and the flags' refusals."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from loadgen.cli import cli
from loadgen.config import ConfigError, RunConfig
from loadgen.datasets.conversations import Turns
from loadgen.datasets.max_model_len import (
    keep_fitting,
    keep_fitting_turns,
    select_requests,
    shortest_need,
    turns_fit,
)
from loadgen.datasets.random import allowed_ids, sample_random
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.payloads import serialize_bodies
from loadgen.schedule import schedule_hash
from loadgen.session.dry_run import dataset_lines, schedule_lines, spread, worker_lines
from loadgen.session.prepare import Prepared


def sampled(prompt_lens: list[int], output_lens: list[int]) -> SampledPrompts:
    return SampledPrompts.of([f"p{i}" for i in range(len(prompt_lens))], prompt_lens, output_lens)


def test_max_model_len_keeps_the_boundary_as_the_rust_client() -> None:
    # vllm-bench's own test: (80, 20) fits 100, (81, 20) does not.
    kept, dropped = keep_fitting(sampled([80, 81, 30], [20, 20, 10]), 100)
    assert dropped == 1
    assert kept.prompts == ["p0", "p2"]
    assert kept.prompt_lens.tolist() == [80, 30] and kept.output_lens.tolist() == [20, 10]


def test_max_model_len_that_drops_nothing_returns_the_dataset_itself() -> None:
    dataset = sampled([10, 20], [5, 5])
    assert keep_fitting(dataset, 25) == (dataset, 0)


def test_every_per_request_field_is_cut_with_the_prompts() -> None:
    dataset = SampledPrompts(
        prompts=["a", "b", "c"],
        prompt_lens=np.array([1, 50, 2]),
        output_lens=np.array([1, 1, 1]),
        length_mismatches=3,  # a count, not a per-request field: kept as it is
        trace_offsets_s=np.array([0.0, 0.5, 1.0]),
        mm_contents=[[{"i": 0}], [{"i": 1}], [{"i": 2}]],
        chat_messages=[[{"role": "user", "content": c}] for c in "abc"],
        request_overrides=[{"n": 0}, {"n": 1}, {"n": 2}],
    )
    kept, dropped = keep_fitting(dataset, 10)
    assert dropped == 1
    assert kept.prompts == ["a", "c"]
    assert kept.trace_offsets_s.tolist() == [0.0, 1.0]
    assert kept.mm_contents == [[{"i": 0}], [{"i": 2}]]
    assert [m[0]["content"] for m in kept.chat_messages] == ["a", "c"]
    assert kept.request_overrides == [{"n": 0}, {"n": 2}]
    assert kept.length_mismatches == 3
    assert select_requests(dataset, np.array([1])).prompts == ["b"]
    assert shortest_need(dataset) == 2


def test_a_turn_fits_with_the_conversation_before_it_as_the_rust_client() -> None:
    # vllm-bench's own cases: (40, 10) then (45, 10) need 105 by the second turn.
    one = np.array([0, 0])
    assert turns_fit(np.array([40, 45]), np.array([10, 10]), one, 105).tolist() == [True, True]
    assert turns_fit(np.array([40, 45]), np.array([10, 10]), one, 104).tolist() == [True, False]
    dataset = sampled([40, 45, 1, 100, 1, 5], [10, 10, 1, 10, 1, 5])
    turns = Turns.of([3, 2, 1], np.full(6, 7, dtype=np.int64))
    kept, cut, dropped, whole = keep_fitting_turns(dataset, turns, 105)
    assert (dropped, whole) == (3, 1)  # conversation 0 loses its last turn, 1 goes whole
    assert kept.prompts == ["p0", "p1", "p5"]
    assert cut.conversation.tolist() == [0, 0, 1] and cut.turn.tolist() == [0, 1, 0]
    assert cut.think_ns.tolist() == [0, 7, 0]


def test_random_token_ids_are_the_prompts_token_lists_with_exact_lengths(tok) -> None:
    args = dict(
        tokenizer=tok,
        num_prompts=12,
        random_input_len=40,
        random_output_len=7,
        random_prefix_len=5,
        random_range_ratio="0.5",
        random_batch_size=1,
        seed=3,
    )
    ids = sample_random(**args, prompt_token_ids=True)
    text = sample_random(**args)
    assert all(isinstance(p, list) and all(type(t) is int for t in p) for p in ids.prompts)
    assert [len(p) for p in ids.prompts] == ids.prompt_lens.tolist()
    assert ids.length_mismatches == 0
    # The same draws as the text prompts: output lengths and the targets the text aimed at.
    assert ids.output_lens.tolist() == text.output_lens.tolist()
    num_special = tok.num_special_tokens
    low, high = (
        5 + int(np.floor((40 - num_special) * 0.5)),
        5 + int(np.ceil((40 - num_special) * 1.5)),
    )
    assert all(low <= n <= high for n in ids.prompt_lens.tolist())
    allowed = set(allowed_ids(tok).tolist())
    assert all(t in allowed for p in ids.prompts for t in p[5:])  # the prefix is re-encoded text
    assert len({tuple(p[:5]) for p in ids.prompts}) == 1  # one shared prefix


def test_a_completions_body_carries_token_ids_as_its_prompt() -> None:
    (body,) = serialize_bodies(
        "openai", ["m"], [[5, 6, 7]], [4], logprobs=None, ignore_eos=True, extra_body={}
    )
    sent = orjson.loads(body)
    assert sent["prompt"] == [5, 6, 7] and sent["max_tokens"] == 4


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(prompt_token_ids=True, backend="openai-chat"), "--prompt-token-ids sends each"),
        (dict(dry_run=True, quiet=True), "--dry-run prints a plan"),
    ],
)
def test_the_extras_refuse_what_they_cannot_do_in_one_line(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        RunConfig(**fields).validate()
    assert "\n" not in str(caught.value)


def test_prompt_token_ids_with_another_dataset_warns_it_has_no_effect() -> None:
    config = RunConfig(
        prompt_token_ids=True, dataset_name="sharegpt", given=frozenset({"--prompt-token-ids"})
    )
    assert config.ignored_flag_warnings() == [
        "--prompt-token-ids has no effect with --dataset-name sharegpt"
    ]


def test_the_dry_runs_dataset_lines_start_with_the_rust_clients_stats() -> None:
    lines = dataset_lines(np.array([10, 20, 30]), np.array([4, 4, 5]), 5)
    assert lines[:6] == [
        "Dry run stats:",
        "  Total prompts: 3 (--num-prompts 5)",
        "  Total input tokens: 60",
        "  Total expected output tokens: 13",
        "  Avg input tokens: 20.0",
        "  Avg output tokens: 4.3",
    ]
    assert lines[6] == "  Input tokens:  min 10, mean 20.0, p50 20, p99 29.8, max 30"
    assert spread(np.array([7])) == "min 7, mean 7.0, p50 7, p99 7, max 7"


def test_the_dry_runs_schedule_lines_give_the_result_jsons_hash() -> None:
    scheduled = np.array([0, 250_000_000, 1_500_000_000], dtype=np.int64)
    config = RunConfig(request_rate=2.0, burstiness=0.5, max_concurrency=4)
    lines = schedule_lines(config, scheduled, multi_turn=False)
    assert "  Arrivals: request rate 2 req/s, burstiness 0.5 (Gamma distribution)" in lines
    assert "  Duration: the last of the requests is due 1.500 s after t0" in lines
    assert "  Max concurrency: 4" in lines
    assert lines[-1] == f"  schedule_sha256: {schedule_hash(scheduled)}"
    ramp = RunConfig(ramp_up_strategy="linear", ramp_up_start_rps=1, ramp_up_end_rps=9)
    assert "  Arrivals: linear ramp-up from 1 to 9 req/s, burstiness 1" in schedule_lines(
        ramp, scheduled, multi_turn=False
    )


def prepared_of(num_requests: int) -> Prepared:
    return Prepared(
        model_id="m",
        model_name="m",
        tokenizer_id="m",
        tokenizer=None,  # type: ignore[arg-type]  # the plan never tokenizes
        dataset=sampled([1] * num_requests, [1] * num_requests),
        models=["m"] * num_requests,
        bodies=[b"{}"] * num_requests,
        scheduled_ns=np.zeros(num_requests, dtype=np.int64),
    )


def test_the_dry_runs_worker_shares_add_up_to_the_requests_and_the_cap() -> None:
    config = RunConfig(max_concurrency=5, workers=2)
    lines = worker_lines(config, prepared_of(11), 2)
    assert lines == [
        "Workers: 2 (2 local processes), none started",
        "  worker 0: 7 requests, 3 of the 5 credits at the start",
        "  worker 1: 4 requests, 2 of the 5 credits at the start",
    ]


def test_the_dry_run_says_remote_workers_are_not_contacted() -> None:
    config = RunConfig(workers=1, remote_workers=2, listen=("127.0.0.1", 0), key="k")
    lines = worker_lines(config, prepared_of(6), 3)
    assert lines[0] == "Workers: 3 (1 local processes, 2 joining at --listen), none started"
    assert lines[1] == "  worker 0: 2 requests"
    assert lines[3].endswith("joining at --listen in the order they come: not contacted)")


@pytest.mark.parametrize(
    "args",
    [
        ["--max-concurrency", "1,2"],
        ["--request-rate", "1,2"],
        ["--num-runs", "2"],
        ["--steady-state"],
    ],
)
def test_a_dry_run_of_a_campaign_exits_2_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    import loadgen.cli.run as run_cli

    ran: list[object] = []
    monkeypatch.setattr(run_cli, "run", ran.append)
    monkeypatch.setattr(run_cli, "run_campaign", ran.append)
    result = CliRunner().invoke(cli, ["run", "--dry-run", *args])
    assert result.exit_code == 2 and not ran
    assert "--dry-run plans one run" in result.output
