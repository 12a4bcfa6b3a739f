"""A run's request bodies, serialized once in the coordinator: each backend's JSON body (its
entry's ``body`` in the backend registry, loadgen/backends.py, exactly as upstream's backends
build it) with upstream's common fields after it::

    body + {ignore_eos: true}? + extra_body + overrides (BFCL's tools)

(vllm-rerank merges none of them), and --multi-turn's chat bodies, and the LoRA adapter each
request names. openai-audio's multipart uploads are audio_payloads.py's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import orjson

from loadgen.backends import BACKENDS, BodyRequest
from loadgen.datasets.sampled_prompts import Prompt
from workers.conversations import END_TEXT, HISTORY_TEXT


def build_body(
    backend: str,
    model: str,
    prompt: Prompt,
    output_len: int,
    *,
    logprobs: int | None,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
    mm_parts: list[dict[str, Any]] | None = None,
    messages: list[dict[str, Any]] | None = None,
    overrides: dict[str, Any] | None = None,
    index: int = 0,
) -> dict[str, Any]:
    """The JSON object of request ``index``, with upstream's keys in upstream's order;
    ``mm_parts`` (its images or videos) follow the text in a chat message; ``messages``
    (BFCL's) replace the chat message built from the prompt, and ``overrides`` (BFCL's tools)
    win over the extra body, as upstream merges them. ValueError for a backend that sends no
    JSON (openai-audio)."""
    entry = BACKENDS[backend]
    if entry.body is None:
        raise ValueError(f"--backend {backend} sends multipart uploads, not JSON bodies")
    request = BodyRequest(
        backend, model, prompt, output_len, logprobs, mm_parts or [], messages, index
    )
    body = entry.body(request)
    if not entry.merges_extras:
        return body
    if ignore_eos:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    if overrides:
        body.update(overrides)
    return body


def serialize_bodies(
    backend: str,
    models: list[str],
    prompts: Sequence[Prompt],
    output_lens: list[int],
    *,
    logprobs: int | None,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
    mm_contents: list[list[dict[str, Any]]] | None = None,
    chat_messages: list[list[dict[str, Any]]] | None = None,
    request_overrides: list[dict[str, Any]] | None = None,
) -> list[bytes]:
    """Every request body as the bytes a worker will send (request i names ``models[i]``);
    request i's ``chat_messages`` and ``request_overrides`` as ``build_body`` takes them.

    Each is copied to its own size: orjson (3.12 on) returns bytes in a buffer of at least
    4 KiB that it never shrinks, and the bodies live for the whole run (20,000 bodies of a
    32-token prompt held 78 MB in the coordinator, 5 MB copied).
    """
    nones: list[None] = [None] * len(prompts)
    parts: Sequence[list[dict[str, Any]] | None] = mm_contents or nones
    messages: Sequence[list[dict[str, Any]] | None] = chat_messages or nones
    overrides: Sequence[dict[str, Any] | None] = request_overrides or nones
    return [
        bytes(
            memoryview(
                orjson.dumps(
                    build_body(
                        backend,
                        model,
                        prompt,
                        int(out),
                        logprobs=logprobs,
                        ignore_eos=ignore_eos,
                        extra_body=extra_body,
                        mm_parts=mm,
                        messages=chat,
                        overrides=fields,
                        index=i,
                    )
                )
            )
        )
        for i, (model, prompt, out, mm, chat, fields) in enumerate(
            zip(models, prompts, output_lens, parts, messages, overrides, strict=True)
        )
    ]


def turn_bodies(
    models: list[str],
    prompts: list[str],
    output_lens: list[int],
    *,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
    min_tokens: bool,
) -> list[bytes]:
    """--multi-turn's chat bodies: each turn's user message between the markers a worker
    splices the conversation's history at (workers/conversations.py); with ``min_tokens``, each
    asks for at least its output length, as the Rust client does for random conversations
    (unless --ignore-eos, or --extra-body sets min_tokens)."""
    bodies = []
    for model, prompt, out in zip(models, prompts, output_lens, strict=True):
        body = build_body(
            "openai-chat", model, prompt, int(out), logprobs=None, ignore_eos=ignore_eos,
            extra_body=extra_body,
        )  # fmt: skip
        body["messages"] = [HISTORY_TEXT, *body["messages"], END_TEXT]
        if min_tokens and not ignore_eos and "min_tokens" not in (extra_body or {}):
            body["min_tokens"] = int(out)
        bodies.append(bytes(memoryview(orjson.dumps(body))))
    return bodies


def lora_assignment(modules: list[str], num_requests: int, strategy: str, seed: int) -> list[str]:
    """The LoRA adapter each request names (``--lora-modules``): round-robin over the list, or
    ``random.choice`` per request from ``random.Random(seed)``, as upstream draws from its
    ``random.seed(seed)`` global generator."""
    if strategy == "round-robin":
        return [modules[i % len(modules)] for i in range(num_requests)]
    rng = random.Random(seed)
    return [rng.choice(modules) for _ in range(num_requests)]
