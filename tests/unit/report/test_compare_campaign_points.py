"""Campaigns' points matched by load (loadgen/report/compare_campaigns.py), result JSONs told
apart by their keys and compared by their summary figures (loadgen/report/compare_summaries.py),
and a search's account rebuilt from its JSON (loadgen/session/search_plan.py); no files."""

from __future__ import annotations

import math

import pytest

from loadgen.report.compare_campaigns import axis_words, key_label, match_points
from loadgen.report.compare_summaries import (
    LOADGEN,
    VLLM,
    not_a_result,
    result_format,
    summary_rows,
    summary_side,
)
from loadgen.session.search_plan import account_lines

INF = math.inf


def test_points_of_equal_load_pair_and_the_others_are_named() -> None:
    base = [(2, INF), (4, INF), (8, INF)]
    other = [(16, INF), (4, INF), (2, INF)]
    matching = match_points(base, other)
    assert matching.pairs == [(0, 2), (1, 1)]  # in the base's order
    assert matching.only_base == [2] and matching.only_other == [0]


def test_a_rate_sweep_pairs_by_rate_and_a_cap_must_match_too() -> None:
    base = [(8, 10.0), (8, 20.0), (8, INF)]
    assert match_points(base, [(8, 20.0), (8, INF)]).pairs == [(1, 0), (2, 1)]
    # The same rates under another cap are other loads: nothing pairs.
    unpaired = match_points(base, [(16, 10.0), (16, 20.0)])
    assert unpaired.pairs == [] and unpaired.only_base == [0, 1, 2]
    assert unpaired.only_other == [0, 1]


def test_a_campaign_with_no_points_in_common_pairs_none() -> None:
    assert match_points([], [(1, INF)]).only_other == [0]
    assert match_points([(1, INF)], []).only_base == [0]


@pytest.mark.parametrize(
    ("keys", "words", "label"),
    [
        ([(2, INF), (4, INF)], "concurrency", "c=2"),
        ([(None, 10.0), (None, 20.0)], "rate", "r=10/s"),
        ([(2, 10.0), (4, 20.0)], "concurrency and rate", "c=2 r=10/s"),
        ([(2, INF)], "concurrency", "c=2"),  # one point: named by what it was given
    ],
)
def test_what_the_points_are_matched_by_and_named(
    keys: list[tuple[int | None, float]], words: str, label: str
) -> None:
    assert axis_words(keys) == words
    assert key_label(keys[0], keys) == label


# A `vllm bench serve` result, with the keys the reference lists (docs: section 4.1), no E2EL
# (upstream reports it only when asked) and its rate as the string "inf".
VLLM_RESULT = {
    "date": "20261205-120000", "endpoint_type": "vllm", "backend": "vllm", "label": None,
    "model_id": "m", "tokenizer_id": "m", "num_prompts": 100, "request_rate": "inf",
    "burstiness": 1.0, "max_concurrency": 8, "duration": 10.0, "completed": 98, "failed": 2,
    "total_input_tokens": 1000, "total_output_tokens": 6000, "request_throughput": 9.8,
    "request_goodput": None, "output_throughput": 600.0, "total_token_throughput": 700.0,
    "latencies": [], "queue_times": [], "max_output_tokens_per_s": 700.0,
    "max_concurrent_requests": 8, "rtfx": 0.0,
    "mean_ttft_ms": 50.0, "median_ttft_ms": 45.0, "std_ttft_ms": 5.0, "p99_ttft_ms": 90.0,
    "mean_tpot_ms": 10.0, "median_tpot_ms": 10.0, "std_tpot_ms": 1.0, "p99_tpot_ms": 12.0,
    "mean_itl_ms": 10.0, "median_itl_ms": 9.5, "std_itl_ms": 1.0, "p99_itl_ms": 20.0,
}  # fmt: skip


def test_a_result_is_told_by_its_keys() -> None:
    assert result_format(VLLM_RESULT) == VLLM
    assert result_format({**VLLM_RESULT, "loadgen": {"errors": {}}}) == LOADGEN
    assert result_format({"completed": 1}) is None
    assert result_format([VLLM_RESULT]) is None
    assert not_a_result("x.json") == (
        "x.json: neither a loadgen nor a `vllm bench serve` result JSON (it lacks completed, "
        "duration, request_throughput)"
    )


def test_summary_figures_are_compared_without_intervals() -> None:
    ours = {**VLLM_RESULT, "median_ttft_ms": 40.0, "p99_e2el_ms": 700.0, "failed": 1,
            "loadgen": {"errors": {"failed": 1, "cancelled": 3, "not_sent": 4}}}  # fmt: skip
    base, other = summary_side("vllm", VLLM_RESULT), summary_side("ours", ours)
    assert (base.source, other.source) == (VLLM, LOADGEN)
    rows = {row.metric: row for row in summary_rows(base, other)}
    assert rows["median ttft (ms)"].delta == -5.0
    assert rows["request throughput (req/s)"].base == 9.8
    assert math.isnan(rows["p99 e2el (ms)"].base)  # upstream wrote none
    assert rows["p99 e2el (ms)"].other == 700.0
    assert (rows["failed"].base, rows["failed"].other) == (2, 1)
    assert math.isnan(rows["cancelled"].base) and rows["cancelled"].other == 3
    assert rows["not sent"].other == 4 and rows["not sent"].count
    assert all(math.isnan(row.low) and not row.flagged for row in rows.values())


def test_a_searchs_account_is_rebuilt_from_its_json() -> None:
    estimate = {"value": 41.2, "low": 39.0, "high": 44.8}
    probe = {"probe": 1, "load": 4.0, "point": "max_concurrency=4-request_rate=inf", "run": 0,
             "failed": False, "estimates": {"p99_ttft_ms": estimate}, "load_meets": True,
             "load_near_line": False, "load_runs": 1,
             "load_estimates": {"p99_ttft_ms": estimate}}  # fmt: skip
    failed = {**probe, "probe": 2, "load": 8.0, "failed": True, "estimates": {},
              "load_meets": False, "load_estimates": {"p99_ttft_ms": {"value": None,
              "low": None, "high": None}}}  # fmt: skip
    search = {"kind": "concurrency", "best": 4.0, "stopped": "bracket [4, 8] within 10 %",
              "probes": [probe, failed]}  # fmt: skip
    assert account_lines(search, ["p99_ttft_ms<=100"]) == [
        "Search for the highest concurrency within the SLO (p99_ttft_ms<=100):",
        "  probe 1: concurrency 4 run=0: meets the SLO (1 run(s)): "
        "p99_ttft_ms 41.200 [39, 44.800] meets <=100",
        "  probe 2: concurrency 8 run=0: misses the SLO (1 run(s)): p99_ttft_ms nan misses <=100",
        "Highest concurrency within the SLO: 4 (bracket [4, 8] within 10 %)",
    ]
    rate = {**search, "kind": "rate", "best": None, "stopped": "the start failed", "probes": []}
    assert account_lines(rate, ["p99_ttft_ms<=100"])[-1] == "No rate met the SLO (the start failed)"
