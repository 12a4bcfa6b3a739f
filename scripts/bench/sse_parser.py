"""Per-event CPU cost of the worker's SSE parser on a vLLM-style 128-event completion stream.

Prints microseconds per token event when the whole body arrives in one read, in 4 KiB reads,
and one event per read (a paced stream). Run: python scripts/bench/sse_parser.py
"""

from __future__ import annotations

import argparse
import time

import orjson

from workers.sse import SSEStream

EVENTS = 128


def stream_events() -> list[bytes]:
    """The events of one completion stream: 128 token chunks, a usage chunk, [DONE]."""
    chunk = {
        "id": "cmpl-0123456789abcdef0123456789abcdef",
        "object": "text_completion",
        "created": 1,
        "model": "loadgen-mock",
        "choices": [
            {
                "index": 0,
                "text": " the",
                "logprobs": None,
                "finish_reason": None,
                "stop_reason": None,
            }
        ],
    }
    usage = {
        "id": chunk["id"],
        "object": "text_completion",
        "created": 1,
        "model": "loadgen-mock",
        "choices": [],
        "usage": {"prompt_tokens": 128, "total_tokens": 256, "completion_tokens": EVENTS},
    }
    events = [b"data: " + orjson.dumps(chunk) + b"\n\n" for _ in range(EVENTS)]
    return [*events, b"data: " + orjson.dumps(usage) + b"\n\n", b"data: [DONE]\n\n"]


def us_per_event(reads: list[bytes], repeat: int) -> float:
    """Median over 5 rounds of the parser's time per token event for this split into reads."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            stream = SSEStream()
            for data in reads:
                stream.feed(data, 1)
            stream.finish(2)
        rounds.append((time.perf_counter() - start) / repeat / EVENTS * 1e6)
        assert len(stream.event_ns) == EVENTS and stream.completion_tokens == EVENTS
    return sorted(rounds)[2]


def main() -> None:
    """Print the cost per event for three ways the bytes can arrive."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="streams parsed per round")
    args = parser.parse_args()
    events = stream_events()
    body = b"".join(events)
    splits = {
        "whole body in one read": [body],
        "4 KiB reads": [body[i : i + 4096] for i in range(0, len(body), 4096)],
        "one event per read": events,
    }
    print(f"SSE parser, {EVENTS}-event stream of {len(body):,} bytes; median of 5 rounds")
    for name, reads in splits.items():
        print(f"  {name:<24} {us_per_event(reads, args.repeat):6.3f} µs per event")


if __name__ == "__main__":
    main()
