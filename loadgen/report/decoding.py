"""Speculative-decoding and diffusion figures from the server's Prometheus ``/metrics``.

As upstream: the ``vllm:spec_decode*_total`` and ``vllm:diffusion*_total`` counters are read
before and after the timed run, summed over their label sets, and their differences give the
acceptance rate and length, the per-position acceptance rates, and the diffusion committed
throughput and steps. A server without them (or without ``/metrics``) gives no figures.
``loadgen.server.metrics.metrics_page`` fetches the page; these are pure functions of its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from loadgen.report.rows import Block, Row, block_lines


@dataclass
class SpecDecodeCounters:
    """The speculative-decoding counters at one instant."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: dict[int, int] = field(default_factory=dict)


@dataclass
class DiffusionCounters:
    """The diffusion (dLLM) decoding counters at one instant."""

    num_denoising_steps: int = 0
    num_canvas_positions: int = 0
    num_committed_tokens: int = 0


def _total_samples(text: str, prefix: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every ``*_total`` sample whose name starts with ``prefix``."""
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith(prefix) and sample.name.endswith("_total"):
                    samples.append((sample.name, sample.labels, sample.value))
    except ValueError:  # not Prometheus text: no figures, as a missing endpoint
        return []
    return samples


def parse_spec_decode(text: str) -> SpecDecodeCounters | None:
    """The spec-decode counters in a /metrics page, or None when it has none."""
    samples = _total_samples(text, "vllm:spec_decode")
    if not samples:
        return None
    counters = SpecDecodeCounters()
    for name, labels, value in samples:
        # Upstream's order of substring tests: per_pos before the plain accepted count.
        if "num_drafts" in name:
            counters.num_drafts += int(value)
        elif "num_draft_tokens" in name:
            counters.num_draft_tokens += int(value)
        elif "num_accepted_tokens_per_pos" in name:
            if "position" in labels:
                pos = int(labels["position"])
                counters.accepted_per_pos[pos] = counters.accepted_per_pos.get(pos, 0) + int(value)
        elif "num_accepted_tokens" in name:
            counters.num_accepted_tokens += int(value)
    return counters


def parse_diffusion(text: str) -> DiffusionCounters | None:
    """The diffusion counters in a /metrics page, or None when it has none."""
    samples = _total_samples(text, "vllm:diffusion")
    if not samples:
        return None
    counters = DiffusionCounters()
    for name, _, value in samples:
        if "num_denoising_steps" in name:
            counters.num_denoising_steps += int(value)
        elif "num_canvas_positions" in name:
            counters.num_canvas_positions += int(value)
        elif "num_committed_tokens" in name:
            counters.num_committed_tokens += int(value)
    return counters


def spec_decode_stats(
    before: SpecDecodeCounters | None, after: SpecDecodeCounters | None
) -> dict[str, Any] | None:
    """Upstream's spec-decode figures of the run; None unless draft tokens were counted."""
    if before is None or after is None:
        return None
    drafts = after.num_drafts - before.num_drafts
    draft_tokens = after.num_draft_tokens - before.num_draft_tokens
    accepted = after.num_accepted_tokens - before.num_accepted_tokens
    per_position: list[float] = []
    if drafts > 0:
        for pos in sorted(before.accepted_per_pos.keys() | after.accepted_per_pos.keys()):
            start = before.accepted_per_pos.get(pos, 0)
            per_position.append((after.accepted_per_pos.get(pos, start) - start) / drafts)
    if draft_tokens <= 0:
        return None
    return {
        "num_drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / draft_tokens * 100,
        "acceptance_length": 1 + accepted / drafts if drafts > 0 else 0.0,
        "per_position_acceptance_rates": per_position,
    }


def diffusion_stats(
    before: DiffusionCounters | None, after: DiffusionCounters | None, duration_s: float
) -> dict[str, Any] | None:
    """Upstream's diffusion figures of the run; None unless steps and tokens were counted."""
    if before is None or after is None:
        return None
    steps = after.num_denoising_steps - before.num_denoising_steps
    positions = after.num_canvas_positions - before.num_canvas_positions
    committed = after.num_committed_tokens - before.num_committed_tokens
    if steps <= 0 or committed <= 0:
        return None
    block_size = positions / steps  # the canvas length
    canvases = committed / block_size  # one commit step per canvas
    denoising = steps - canvases
    return {
        "denoising_steps": denoising,
        "canvas_positions": positions,
        "committed_tokens": committed,
        "committed_throughput": committed / duration_s,
        "steps_per_canvas": denoising / canvases,
        "committed_per_step": committed / denoising,
    }


def result_keys(spec: dict[str, Any] | None, diffusion: dict[str, Any] | None) -> dict[str, Any]:
    """The ``spec_decode_*`` and ``diffusion_*`` keys of the result JSON, in upstream's order."""
    keys: dict[str, Any] = {}
    if spec is not None:
        keys |= {
            "spec_decode_acceptance_rate": spec["acceptance_rate"],
            "spec_decode_acceptance_length": spec["acceptance_length"],
            "spec_decode_num_drafts": int(spec["num_drafts"]),
            "spec_decode_draft_tokens": int(spec["draft_tokens"]),
            "spec_decode_accepted_tokens": int(spec["accepted_tokens"]),
            "spec_decode_per_position_acceptance_rates": spec["per_position_acceptance_rates"],
        }
    if diffusion is not None:
        keys |= {
            "diffusion_committed_throughput": diffusion["committed_throughput"],
            "diffusion_steps_per_canvas": diffusion["steps_per_canvas"],
            "diffusion_committed_per_step": diffusion["committed_per_step"],
            "diffusion_committed_tokens": int(diffusion["committed_tokens"]),
            "diffusion_denoising_steps": int(diffusion["denoising_steps"]),
            "diffusion_canvas_positions": int(diffusion["canvas_positions"]),
        }
    return keys


def decoding_blocks(spec: dict[str, Any] | None, diffusion: dict[str, Any] | None) -> list[Block]:
    """Upstream's "Diffusion Decoding" block, or else its "Speculative Decoding" block (none
    without either)."""
    if diffusion is not None:
        rows = tuple(
            (label, int(diffusion[key]) if fmt == "d" else diffusion[key], fmt)
            for label, key, fmt in (
                ("Committed throughput (tok/s):", "committed_throughput", ".2f"),
                ("Denoising steps per canvas:", "steps_per_canvas", ".2f"),
                ("Committed per denoising step:", "committed_per_step", ".2f"),
                ("Committed tokens:", "committed_tokens", "d"),
                ("Denoising steps:", "denoising_steps", "d"),
                ("Canvas positions evaluated:", "canvas_positions", "d"),
            )
        )
        return [Block("Diffusion Decoding", rows)]
    if spec is None:
        return []
    items: list[Row | str] = [
        ("Acceptance rate (%):", spec["acceptance_rate"], ".2f"),
        ("Acceptance length:", spec["acceptance_length"], ".2f"),
        ("Drafts:", int(spec["num_drafts"]), ""),
        ("Draft tokens:", int(spec["draft_tokens"]), ""),
        ("Accepted tokens:", int(spec["accepted_tokens"]), ""),
    ]
    if spec["per_position_acceptance_rates"]:
        items.append("Per-position acceptance (%):")
        for i, rate in enumerate(spec["per_position_acceptance_rates"]):
            items.append((f"  Position {i}:", rate * 100, ".2f"))
    return [Block("Speculative Decoding", tuple(items))]


def summary_block(spec: dict[str, Any] | None, diffusion: dict[str, Any] | None) -> list[str]:
    """Upstream's "Diffusion Decoding" block, or else its "Speculative Decoding" block, line
    for line."""
    return [line for block in decoding_blocks(spec, diffusion) for line in block_lines(block)]
