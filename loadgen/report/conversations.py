"""The report of a ``--multi-turn`` run: each turn index's figures and each conversation's.

TTFT by turn shows what a server's prefix cache does for a conversation: a later turn's prompt
holds the whole conversation so far, and a cache that keeps it answers that turn faster than
its length alone would. Input tokens are the server's ``prompt_tokens`` (the history
included), where it reported them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.records.model import RunRecords, per_request
from loadgen.report.failures import CANCELLED, FAILED, NOT_SENT, outcomes
from loadgen.report.metrics import Timings
from loadgen.report.rows import RULE, Block, Row, block_lines


def _stats_ms(values_s: np.ndarray) -> dict[str, float | None]:
    if not len(values_s):
        return {"mean": None, "p50": None, "p99": None}
    ms = values_s * 1e3
    return {
        "mean": float(ms.mean()),
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
    }


def conversation_figures(run: RunRecords, timings: Timings) -> dict[str, Any] | None:
    """Per turn index: turns completed, failed, cancelled and not sent (counted apart as the
    run's are: failures.py), TTFT and E2EL (ms), mean input tokens; per
    conversation: how many completed every turn, turns completed on average, and the time
    from a conversation's first send to its last end. None for a run without conversations."""
    if run.turn is None or run.conversation is None:
        return None
    records = run.records
    turn, conversation = run.turn, run.conversation
    ok = records["success"].astype(bool)
    sent = records["sent_ns"] >= 0
    outcome = outcomes(ok, per_request(run.errors, len(ok)))
    prompt_tokens = records["prompt_tokens"]
    per_turn = []
    for t in range(int(turn.max()) + 1):
        at = turn == t
        done = at & ok
        reported = done & (prompt_tokens >= 0)
        per_turn.append(
            {
                "turn": t,
                "completed": int(done.sum()),
                # apart, as the run's own counts (failures.py)
                "failed": int((at & (outcome == FAILED)).sum()),
                "cancelled": int((at & (outcome == CANCELLED)).sum()),
                "not_sent": int((at & (outcome == NOT_SENT)).sum()),
                "ttft_ms": _stats_ms(timings.ttft_s[done]),
                "e2el_ms": _stats_ms(timings.latency_s[done]),
                "mean_input_tokens": float(prompt_tokens[reported].mean())
                if reported.any()
                else None,
            }
        )
    count = int(conversation.max()) + 1
    turns_of = np.bincount(conversation, minlength=count)
    completed_turns = np.bincount(conversation[ok], minlength=count)
    whole = completed_turns == turns_of
    first_send = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(first_send, conversation[sent], records["sent_ns"][sent])
    last_end = np.zeros(count, dtype=np.int64)
    np.maximum.at(last_end, conversation, records["end_ns"])
    durations_s = (last_end[whole] - first_send[whole]) / 1e9
    return {
        "conversations": count,
        "completed": int(whole.sum()),
        "failed": int(count - whole.sum()),
        "mean_turns_completed": float(completed_turns.mean()),
        "duration_s": {
            k: (v / 1e3 if v is not None else None) for k, v in _stats_ms(durations_s).items()
        },
        "per_turn": per_turn,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def conversation_block(figures: dict[str, Any]) -> Block:
    """The block of a run's conversations: its figures, then a table's lines, one per turn."""
    duration = figures["duration_s"]
    items: list[Row | str] = [
        (
            "Conversations completed/total:",
            f"{figures['completed']}/{figures['conversations']}",
            "",
        ),
        ("Mean turns completed:", figures["mean_turns_completed"], ".2f"),
        (
            "Conversation duration p50/p99 (s):",
            "-" if duration["p50"] is None else f"{duration['p50']:.2f}/{duration['p99']:.2f}",
            "",
        ),
        f"{'turn':>4} {'ok':>6} {'failed':>6} {'cancelled':>9} {'not sent':>8} {'TTFT mean':>10} "
        f"{'p50':>8} {'p99':>8} {'E2EL p50':>9} {'p99':>8} {'input tok':>10}",
    ]
    for row in figures["per_turn"]:
        ttft, e2el = row["ttft_ms"], row["e2el_ms"]
        tokens = row["mean_input_tokens"]
        items.append(
            f"{row['turn']:>4} {row['completed']:>6} {row['failed']:>6} {row['cancelled']:>9} "
            f"{row['not_sent']:>8} {_ms(ttft['mean']):>10} {_ms(ttft['p50']):>8} "
            f"{_ms(ttft['p99']):>8} {_ms(e2el['p50']):>9} "
            f"{_ms(e2el['p99']):>8} {'-' if tokens is None else f'{tokens:.0f}':>10}"
        )
    return Block(" Multi-turn conversations ", tuple(items), "=")


def conversation_lines(figures: dict[str, Any] | None) -> list[str]:
    """The console block of a run's conversations, closed (nothing without them)."""
    if figures is None:
        return []
    return [*block_lines(conversation_block(figures)), RULE]
