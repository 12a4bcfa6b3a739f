"""The pre-baked SSE streams client_ceiling.py's nginx serves: one per way servers stream.

Every stream carries the same 128 output tokens (" the" each, one token in the embedded
tokenizer), so every shape's output token count is 128 per request under upstream's rule,
whichever way the count is reached:

- ``vllm``: vLLM's completions stream: compact JSON, one token per chunk, then a usage-only
  chunk (``"choices":[]``) and ``[DONE]``. Upstream reads the count from the usage chunk.
- ``usage-on-choices``: llama.cpp's completions stream: ``usage`` rides on the last chunk that
  still has choices, and no usage-only chunk comes. Upstream's ``elif`` never reads that usage,
  so it re-tokenises the generated text, and so must loadgen.
- ``spaced``: vLLM's events written with spaces after ``:`` and ``,`` (Python's ``json.dumps``
  defaults, as some gateways and Python servers write them): the byte patterns of compact JSON
  do not match.
- ``chat``: vLLM's /v1/chat/completions stream: a role chunk, 128 content deltas, a finish
  chunk with an empty delta, the usage-only chunk and ``[DONE]``.
"""

from __future__ import annotations

import json
import time
from typing import Any

SHAPES = ("vllm", "usage-on-choices", "spaced", "chat")
MODEL = "loadgen-mock"
TOKEN = " the"


def endpoint(shape: str) -> str:
    """The API path a client posts to for this shape."""
    return "/v1/chat/completions" if shape == "chat" else "/v1/completions"


def backend(shape: str) -> str:
    """The `--backend` both clients use for this shape."""
    return "openai-chat" if shape == "chat" else "vllm"


def stream(shape: str, events: int, prompt_tokens: int) -> bytes:
    """The whole SSE body of one response of ``shape``: ``events`` output tokens."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + events,
        "completion_tokens": events,
    }
    head: dict[str, Any] = {"id": "cmpl-" + "0123456789abcdef" * 2, "created": int(time.time())}
    if shape == "chat":
        head |= {"object": "chat.completion.chunk", "model": MODEL}
        chunks = [head | {"choices": [_delta({"role": "assistant", "content": ""})]}]
        chunks += [head | {"choices": [_delta({"content": TOKEN})]}] * events
        chunks += [head | {"choices": [_delta({}, "length")]}]
        chunks += [head | {"choices": [], "usage": usage}]
    else:
        head |= {"object": "text_completion", "model": MODEL}
        chunks = []
        for i in range(events):
            choice = {"index": 0, "text": TOKEN, "logprobs": None}
            choice |= {"finish_reason": "length" if i == events - 1 else None}
            chunks.append(head | {"choices": [choice | {"stop_reason": None}]})
        if shape == "usage-on-choices":
            chunks[-1] = chunks[-1] | {"usage": usage}
        else:
            chunks.append(head | {"choices": [], "usage": usage})
    separators = (", ", ": ") if shape == "spaced" else (",", ":")
    body = "".join(f"data: {json.dumps(c, separators=separators)}\n\n" for c in chunks)
    return (body + "data: [DONE]\n\n").encode()


def _delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


def models_json() -> bytes:
    """A static /v1/models reply listing the one model."""
    model = {"id": MODEL, "object": "model", "created": int(time.time()), "owned_by": "loadgen"}
    return json.dumps({"object": "list", "data": [model | {"root": MODEL}]}).encode()
