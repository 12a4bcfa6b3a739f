"""Spec-decode and diffusion figures from /metrics, as upstream computes and prints them."""

from __future__ import annotations

import pytest

from loadgen.report.decoding import (
    DiffusionCounters,
    SpecDecodeCounters,
    diffusion_stats,
    parse_diffusion,
    parse_spec_decode,
    result_keys,
    spec_decode_stats,
    summary_block,
)

PAGE = """# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 45.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 27.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 12.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 6.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
"""


def test_counters_are_summed_over_label_sets_and_created_samples_ignored() -> None:
    counters = parse_spec_decode(PAGE)
    assert counters == SpecDecodeCounters(
        num_drafts=15, num_draft_tokens=45, num_accepted_tokens=27,
        accepted_per_pos={0: 12, 1: 9, 2: 6},
    )  # fmt: skip
    assert parse_spec_decode("vllm:num_requests_running 1.0\n") is None
    assert parse_spec_decode("not { prometheus") is None
    assert parse_diffusion(PAGE) is None


def test_spec_decode_figures_by_hand() -> None:
    before = SpecDecodeCounters(10, 30, 18, {0: 8, 1: 6, 2: 4})
    after = SpecDecodeCounters(20, 60, 33, {0: 17, 1: 12, 2: 4, 3: 2})
    stats = spec_decode_stats(before, after)
    assert stats == {
        "num_drafts": 10,
        "draft_tokens": 30,
        "accepted_tokens": 15,
        "acceptance_rate": pytest.approx(50.0),  # 15 / 30
        "acceptance_length": pytest.approx(2.5),  # 1 + 15 / 10
        "per_position_acceptance_rates": [0.9, 0.6, 0.0, 0.2],  # a new position counts from 0
    }
    assert spec_decode_stats(before, before) is None  # no draft tokens in the run
    assert spec_decode_stats(None, after) is None
    assert list(result_keys(stats, None)) == [
        "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
        "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
        "spec_decode_per_position_acceptance_rates",
    ]  # fmt: skip
    assert summary_block(stats, None) == [
        "---------------Speculative Decoding---------------",
        "Acceptance rate (%):                     50.00     ",
        "Acceptance length:                       2.50      ",
        "Drafts:                                  10        ",
        "Draft tokens:                            30        ",
        "Accepted tokens:                         15        ",
        "Per-position acceptance (%):",
        "  Position 0:                            90.00     ",
        "  Position 1:                            60.00     ",
        "  Position 2:                            0.00      ",
        "  Position 3:                            20.00     ",
    ]


def test_diffusion_figures_by_hand_and_they_replace_the_spec_block() -> None:
    page = (
        'vllm:diffusion_num_denoising_steps_total{engine="0"} 130\n'
        'vllm:diffusion_num_canvas_positions_total{engine="0"} 4160\n'
        'vllm:diffusion_num_committed_tokens_total{engine="0"} 320\n'
    )
    before = DiffusionCounters()
    after = parse_diffusion(page)
    assert after == DiffusionCounters(130, 4160, 320)
    stats = diffusion_stats(before, after, duration_s=2.0)
    # canvas 4160 / 130 = 32 positions; 320 / 32 = 10 canvases (commit steps); 120 denoising.
    assert stats == {
        "denoising_steps": pytest.approx(120.0),
        "canvas_positions": 4160,
        "committed_tokens": 320,
        "committed_throughput": pytest.approx(160.0),
        "steps_per_canvas": pytest.approx(12.0),
        "committed_per_step": pytest.approx(320 / 120),
    }
    spec = spec_decode_stats(SpecDecodeCounters(), SpecDecodeCounters(1, 2, 1, {}))
    block = summary_block(spec, stats)
    assert block[0] == "----------------Diffusion Decoding----------------"
    assert block[1:] == [
        "Committed throughput (tok/s):            160.00    ",
        "Denoising steps per canvas:              12.00     ",
        "Committed per denoising step:            2.67      ",
        "Committed tokens:                        320       ",
        "Denoising steps:                         120       ",
        "Canvas positions evaluated:              4160      ",
    ]
    assert list(result_keys(None, stats))[-1] == "diffusion_canvas_positions"
    assert diffusion_stats(before, DiffusionCounters(5, 10, 0), 1.0) is None
