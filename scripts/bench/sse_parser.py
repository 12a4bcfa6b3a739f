"""Per-event CPU cost of the worker's SSE parser, for completions and for chat streams.

Each stream has 128 token chunks, a usage chunk and [DONE]; a chat stream opens with a role
chunk and has an empty finish chunk, as vLLM and llama.cpp send them. Shapes: vLLM
completions (the floor: one C-level count per read), vLLM chat (content first in the delta:
two more counts), SGLang chat (every delta key written, role first: a regex scan), and tool-call
deltas (no content: every chunk JSON-parsed, the slow path). Prints microseconds per token event
when the whole body arrives in one read, in 4 KiB reads, and one event per read (a paced
stream); each stream's cost includes the check of the whole body at its end (workers/sse.py).

Then one huge event (5, 10 and 20 MB of text in one completions chunk) fed in 4 KiB reads,
beside the same bytes in one read (the floor): milliseconds, which grow linearly with the size
(before issue 14, the held bytes were concatenated and parsed again on every read: 3.4 s for a
4 MB event, 20 MB out of reach). These parsers hold events of any size; the worker's stops at
``MAX_EVENT_BYTES`` (16 MiB), and the last line times how soon a 100 MB line fails there.
Run: python scripts/bench/sse_parser.py

``--baseline REF`` also times the parser as it was at git commit REF (its workers/sse.py, loaded
from git) on the same streams, in paired rounds (tree, then REF, 9 times), and prints REF's
medians and the median of the rounds' tree/REF ratios: on a machine shared with other work,
a ratio of paired rounds holds where two medians taken minutes apart do not.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from workers.sse import EventTooLarge, SSEStream

EVENTS = 128
USAGE = {"prompt_tokens": 128, "total_tokens": 256, "completion_tokens": EVENTS}


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-0123456789abcdef",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "loadgen-mock",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def stream_events(shape: str) -> list[bytes]:
    """The events of one stream of the given shape."""
    tail = [b"data: [DONE]\n\n"]
    if shape == "vLLM completions":
        chunk = {
            "id": "cmpl-0123456789abcdef0123456789abcdef",
            "object": "text_completion",
            "created": 1,
            "model": "loadgen-mock",
            "choices": [{"index": 0, "text": " the", "logprobs": None, "finish_reason": None}],
        }
        usage = {**chunk, "choices": [], "usage": USAGE}
        return [_event(chunk)] * EVENTS + [_event(usage), *tail]
    if shape == "vLLM chat":
        role, token = {"role": "assistant", "content": ""}, {"content": " the"}
    elif shape == "SGLang chat":
        nulls = {"reasoning_content": None, "tool_calls": None}
        role = {"role": "assistant", "content": "", **nulls}
        token = {"role": None, "content": " the", **nulls}
    else:  # tool-call deltas
        role = {"role": "assistant", "content": None}
        token = {"tool_calls": [{"index": 0, "function": {"arguments": "ab"}}]}
    usage = {**_chat({}), "choices": [], "usage": USAGE}
    body = [_event(_chat(role)), *[_event(_chat(token))] * EVENTS]
    return [*body, _event(_chat({}, "length")), _event(usage), *tail]


def us_per_event(
    reads: list[bytes], chat: bool, repeat: int, parser: type = SSEStream, rounds: int = 5
) -> float:
    """Median over ``rounds`` rounds of the parser's time per token event for this split."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            stream = parser(chat)
            for data in reads:
                stream.feed(data, 1)
            stream.finish(2)
        times.append((time.perf_counter() - start) / repeat / EVENTS * 1e6)
        assert len(stream.event_ns) == EVENTS and stream.completion_tokens == EVENTS
    return sorted(times)[rounds // 2]


def paired(reads: list[bytes], chat: bool, repeat: int, baseline: type) -> tuple[float, float]:
    """REF's median time per token event and the median tree/REF ratio over 9 paired rounds."""
    then, ratios = [], []
    for _ in range(9):
        tree = us_per_event(reads, chat, repeat, rounds=1)
        then.append(us_per_event(reads, chat, repeat, baseline, rounds=1))
        ratios.append(tree / then[-1])
    return sorted(then)[4], sorted(ratios)[4]


def parser_at(ref: str) -> type:
    """``SSEStream`` as workers/sse.py was at git commit ``ref``."""
    repo = Path(__file__).resolve().parents[2]
    show = ["git", "-C", str(repo), "show", f"{ref}:workers/sse.py"]
    found = subprocess.run(show, capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"--baseline {ref}: {found.stderr.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sse_baseline.py"
        path.write_text(found.stdout)
        spec = importlib.util.spec_from_file_location("sse_baseline", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["sse_baseline"] = module  # dataclasses and the like look modules up
        spec.loader.exec_module(module)
    return module.SSEStream


def huge_event(megabytes: int) -> bytes:
    """One completions chunk whose text is ``megabytes`` MB, with its separator, then [DONE]."""
    text = "x" * (megabytes * 2**20)
    chunk = {"id": "cmpl-0", "object": "text_completion", "choices": [{"index": 0, "text": text}]}
    return _event(chunk) + b"data: [DONE]\n\n"


def ms_to_parse(reads: list[bytes]) -> float:
    """Median over 3 rounds of the time to parse one response that arrives in ``reads``."""
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        stream = SSEStream(False, max_event_bytes=2**40)
        for data in reads:
            stream.feed(data, 1)
        stream.finish(2)
        rounds.append((time.perf_counter() - start) * 1e3)
        assert len(stream.event_ns) == 1 and stream.done and stream.failure is None
    return sorted(rounds)[1]


def main() -> None:
    """Print the cost per event for each shape and three ways the bytes can arrive, then the
    cost of one huge event in small reads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1000, help="streams parsed per round")
    parser.add_argument(
        "--huge-mb", type=int, nargs="*", default=[5, 10, 20], help="sizes of the huge event"
    )
    parser.add_argument("--baseline", metavar="REF", help="also time the parser at commit REF")
    args = parser.parse_args()
    baseline = parser_at(args.baseline) if args.baseline else None
    shapes = ("vLLM completions", "vLLM chat", "SGLang chat", "tool-call deltas")
    print(f"SSE parser, {EVENTS}-token streams; µs per token event, median of 5 rounds")
    print(f"  {'shape':<18} {'one read':>9} {'4 KiB reads':>12} {'event/read':>11}  vs floor")
    floor = None
    for shape in shapes:
        events = stream_events(shape)
        body = b"".join(events)
        splits = ([body], [body[i : i + 4096] for i in range(0, len(body), 4096)], events)
        costs = [us_per_event(reads, shape != "vLLM completions", args.repeat) for reads in splits]
        floor = floor or costs
        ratio = "/".join(f"{c / f:.1f}" for c, f in zip(costs, floor, strict=True))
        print(f"  {shape:<18} {costs[0]:9.3f} {costs[1]:12.3f} {costs[2]:11.3f}  {ratio}×")
        if baseline is not None:
            chat = shape != "vLLM completions"
            then, ratios = zip(
                *(paired(reads, chat, args.repeat, baseline) for reads in splits), strict=True
            )
            label = f"  at {args.baseline}"
            print(f"{label:<20} {then[0]:9.3f} {then[1]:12.3f} {then[2]:11.3f}", end="")
            print(f"  tree/{args.baseline} " + "/".join(f"{r:.2f}" for r in ratios))
    if args.huge_mb:
        print("One huge event; ms, median of 3")
        print(f"  {'size':>6} {'one read':>9} {'4 KiB reads':>12}  {'per MB':>7}  vs floor")
    for megabytes in args.huge_mb:
        body = huge_event(megabytes)
        floor = ms_to_parse([body])
        small = ms_to_parse([body[i : i + 4096] for i in range(0, len(body), 4096)])
        print(
            f"  {megabytes:>3} MB {floor:9.1f} {small:12.1f}  {small / megabytes:7.2f}"
            f"  {small / floor:.1f}×"
        )
    if args.huge_mb:
        line = b'data: {"choices":[{"text":"' + b"x" * (100 * 2**20)
        start = time.perf_counter()
        try:
            stream = SSEStream(False)
            for at in range(0, len(line), 4096):
                stream.feed(line[at : at + 4096], 1)
        except EventTooLarge:
            held = sum(map(len, stream.chunks))
            print(
                f"  a 100 MB line in 4 KiB reads fails at MAX_EVENT_BYTES after "
                f"{(time.perf_counter() - start) * 1e3:.0f} ms, {held} bytes held after"
            )


if __name__ == "__main__":
    main()
