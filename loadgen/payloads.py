"""Request bodies, serialized once in the coordinator, exactly as upstream's backends build them.

Completions (``openai``, ``vllm``)::

    {model, prompt, repetition_penalty: 1.0, max_tokens, logprobs, stream: true,
     stream_options: {include_usage: true}} + {ignore_eos: true}? + extra_body

Chat (``openai-chat``)::

    {model, messages: [{role: user, content: [{type: text, text: prompt}]}],
     max_completion_tokens, stream: true, stream_options: {include_usage: true}}
     + {ignore_eos: true}? + extra_body
"""

from __future__ import annotations

import random
from typing import Any

import orjson

COMPLETIONS_BACKENDS = ("openai", "vllm")
CHAT_BACKENDS = ("openai-chat",)
SUPPORTED_BACKENDS = COMPLETIONS_BACKENDS + CHAT_BACKENDS
# Every backend upstream accepts; those not in SUPPORTED_BACKENDS are refused as not supported yet.
UPSTREAM_BACKENDS = (
    "vllm", "openai", "openai-chat", "openai-audio", "openai-embeddings",
    "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
    "infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank",
)  # fmt: skip
ENDPOINT_SUFFIX = {
    "openai": "completions",
    "vllm": "completions",
    "openai-chat": "chat/completions",
}


def check_endpoint(backend: str, api_url: str) -> None:
    """Upstream refuses a URL whose suffix does not fit the backend; so do we."""
    suffix = ENDPOINT_SUFFIX[backend]
    if not api_url.endswith((suffix, "profile")):
        api = (
            "OpenAI Chat Completions API" if backend in CHAT_BACKENDS else "OpenAI Completions API"
        )
        hint = " (use --endpoint /v1/chat/completions)" if backend in CHAT_BACKENDS else ""
        raise ValueError(f"{api} URL must end with '{suffix}', got {api_url}{hint}")


def build_body(
    backend: str,
    model: str,
    prompt: str | list[int],
    output_len: int,
    *,
    logprobs: int | None,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
) -> dict[str, Any]:
    """The JSON object of one request, with upstream's keys in upstream's order."""
    if backend in CHAT_BACKENDS:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            "max_completion_tokens": output_len,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    else:
        body = {
            "model": model,
            "prompt": prompt,
            "repetition_penalty": 1.0,
            "max_tokens": output_len,
            "logprobs": logprobs,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    if ignore_eos:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    return body


def serialize_bodies(
    backend: str,
    models: list[str],
    prompts: list[str],
    output_lens: list[int],
    *,
    logprobs: int | None,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
) -> list[bytes]:
    """Every request body as the bytes a worker will send (request i names ``models[i]``)."""
    return [
        orjson.dumps(
            build_body(
                backend,
                model,
                prompt,
                int(out),
                logprobs=logprobs,
                ignore_eos=ignore_eos,
                extra_body=extra_body,
            )
        )
        for model, prompt, out in zip(models, prompts, output_lens, strict=True)
    ]


def lora_assignment(modules: list[str], num_requests: int, strategy: str, seed: int) -> list[str]:
    """The LoRA adapter each request names (``--lora-modules``): round-robin over the list, or
    ``random.choice`` per request from ``random.Random(seed)``, as upstream draws from its
    ``random.seed(seed)`` global generator."""
    if strategy == "round-robin":
        return [modules[i % len(modules)] for i in range(num_requests)]
    rng = random.Random(seed)
    return [rng.choice(modules) for _ in range(num_requests)]
