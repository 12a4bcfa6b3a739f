"""Request bodies, serialized once in the coordinator, exactly as upstream's backends build them.

Completions (``openai``, ``vllm``)::

    {model, prompt, repetition_penalty: 1.0, max_tokens, logprobs, stream: true,
     stream_options: {include_usage: true}} + {ignore_eos: true}? + extra_body

Chat (``openai-chat``)::

    {model, messages: [{role: user, content: [{type: text, text: prompt}]}],
     max_completion_tokens, stream: true, stream_options: {include_usage: true}}
     + {ignore_eos: true}? + extra_body

Pooling (not streamed; one JSON answer whose ``usage.prompt_tokens`` is read)::

    openai-embeddings .................... {model, input: prompt, truncate_prompt_tokens: -1}
    openai-embeddings-chat, -clip, -vlm2vec {model, messages, truncate_prompt_tokens: -1}
    infinity-embeddings (-clip) ........... {model, input: prompt} or, with an image and no
                                            text, {model, input: <image url>, modality: image}
    vllm-pooling .......................... {model, truncate_prompt_tokens: -1, input: prompt}
    (each + {ignore_eos: true}? + extra_body)
    vllm-rerank ........................... {model, query: prompt[0], documents: prompt[1:],
                                             truncate_prompt_tokens: -1} (nothing merged)

The -clip and -vlm2vec variants differ from their base backend only for a request with images
(custom_image's ``image_files``), as upstream's ``_preprocess_clip`` and ``_preprocess_vlm2vec``:
-clip empties the text; -vlm2vec puts the images first and asks "Represent the given image."
for even request indices, "Represent the given image with the following question: <text>" for
odd ones.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from loadgen.audio_payloads import AUDIO_BACKEND, check_audio_endpoint
from workers.conversations import END_TEXT, HISTORY_TEXT

COMPLETIONS_BACKENDS = ("openai", "vllm")
CHAT_BACKENDS = ("openai-chat",)
GENERATION_BACKENDS = COMPLETIONS_BACKENDS + CHAT_BACKENDS  # upstream's OPENAI_COMPATIBLE
EMBEDDINGS_INPUT_BACKENDS = ("openai-embeddings",)
EMBEDDINGS_CHAT_BACKENDS = (
    "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
)  # fmt: skip
INFINITY_BACKENDS = ("infinity-embeddings", "infinity-embeddings-clip")
# The backends that send a request's images: chat, and upstream's "embeddings-" ones.
IMAGE_BACKENDS = (*CHAT_BACKENDS, *EMBEDDINGS_CHAT_BACKENDS, "infinity-embeddings-clip")
VLM2VEC_IMAGE_ONLY = "Represent the given image."
VLM2VEC_WITH_TEXT = "Represent the given image with the following question: "
# Upstream's POOLING_BACKENDS: answered with one JSON body, measured by E2EL alone.
POOLING_BACKENDS = (
    *EMBEDDINGS_INPUT_BACKENDS, *EMBEDDINGS_CHAT_BACKENDS, *INFINITY_BACKENDS,
    "vllm-pooling", "vllm-rerank",
)  # fmt: skip
SUPPORTED_BACKENDS = (*GENERATION_BACKENDS, AUDIO_BACKEND, *POOLING_BACKENDS)
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
    **dict.fromkeys(EMBEDDINGS_INPUT_BACKENDS + EMBEDDINGS_CHAT_BACKENDS, "embeddings"),
    **dict.fromkeys(INFINITY_BACKENDS, "embeddings"),
    "vllm-pooling": "pooling",
    "vllm-rerank": "rerank",
}
# The API names upstream's request functions use in their URL check.
API_NAMES = {
    **dict.fromkeys(COMPLETIONS_BACKENDS, "OpenAI Completions API"),
    **dict.fromkeys(CHAT_BACKENDS, "OpenAI Chat Completions API"),
    **dict.fromkeys(EMBEDDINGS_INPUT_BACKENDS + EMBEDDINGS_CHAT_BACKENDS, "OpenAI Embeddings API"),
    **dict.fromkeys(INFINITY_BACKENDS, "Infinity Embeddings API"),
    "vllm-pooling": "vLLM Pooling API",
    "vllm-rerank": "vLLM score API",
}
ENDPOINT_HINT = {
    "chat/completions": "/v1/chat/completions",
    "embeddings": "/v1/embeddings",
    "pooling": "/pooling",  # vLLM serves it outside /v1
    "rerank": "/v1/rerank",
}


def check_endpoint(backend: str, api_url: str) -> None:
    """Upstream refuses a URL whose suffix does not fit the backend; so do we."""
    if backend == AUDIO_BACKEND:
        return check_audio_endpoint(api_url)
    suffix = ENDPOINT_SUFFIX[backend]
    if api_url.endswith((suffix, "profile")):
        return
    hint = f" (use --endpoint {ENDPOINT_HINT[suffix]})" if suffix in ENDPOINT_HINT else ""
    raise ValueError(f"{API_NAMES[backend]} URL must end with '{suffix}', got {api_url}{hint}")


def build_body(
    backend: str,
    model: str,
    prompt: str | list[int] | list[str],
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
    win over the extra body, as upstream merges them."""
    body: dict[str, Any]
    if backend == "vllm-rerank":  # upstream merges neither ignore_eos nor the extra body
        assert isinstance(prompt, list) and len(prompt) > 1  # config.validate() ensures it
        return {
            "model": model,
            "query": prompt[0],
            "documents": prompt[1:],
            "truncate_prompt_tokens": -1,
        }
    if backend in POOLING_BACKENDS:
        body = _pooling_body(backend, model, prompt, mm_parts or [], index)
    elif backend in CHAT_BACKENDS:
        content = chat_content(prompt, mm_parts or [])
        body = {
            "model": model,
            "messages": messages or [{"role": "user", "content": content}],
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
    if overrides:
        body.update(overrides)
    return body


def input_sequences(backend: str, prompt: str | list) -> int:
    """How many inputs one pooling request embeds: a batch (list of texts or of token-id lists)
    counts each; a chat-form request counts one; a rerank request its documents, as upstream
    counts them."""
    if backend == "vllm-rerank":
        return len(prompt) - 1
    batched = isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], str | list)
    return len(prompt) if batched and backend not in EMBEDDINGS_CHAT_BACKENDS else 1


def chat_content(
    prompt: Any, mm_parts: list[dict[str, Any]], mm_first: bool = False
) -> list[dict[str, Any]]:
    """A user message's parts: the text (or the prompt's own parts, custom_image's
    ``content`` lines) and the media, after it or (``mm_first``) before it."""
    text = prompt if isinstance(prompt, list) else [{"type": "text", "text": prompt}]
    return [*mm_parts, *text] if mm_first else [*text, *mm_parts]


def image_prompt(backend: str, prompt: Any, mm_parts: list[dict[str, Any]], index: int) -> Any:
    """The text that goes with request ``index``'s images, as upstream's -clip and -vlm2vec
    request functions rewrite it (unchanged without images)."""
    if not mm_parts:
        return prompt
    if backend.endswith("-clip"):
        return ""
    if backend.endswith("-vlm2vec"):
        return VLM2VEC_IMAGE_ONLY if index % 2 == 0 else f"{VLM2VEC_WITH_TEXT}{prompt}"
    return prompt


def _pooling_body(
    backend: str, model: str, prompt: Any, mm_parts: list[dict[str, Any]], index: int
) -> dict[str, Any]:
    prompt = image_prompt(backend, prompt, mm_parts, index)
    if backend in EMBEDDINGS_CHAT_BACKENDS:
        content = chat_content(prompt, mm_parts, mm_first=backend.endswith("-vlm2vec"))
        messages = [{"role": "user", "content": content}]
        return {"model": model, "messages": messages, "truncate_prompt_tokens": -1}
    if backend in INFINITY_BACKENDS:
        if prompt or not mm_parts:
            return {"model": model, "input": prompt}
        if len(mm_parts) != 1:  # upstream asserts a single item here
            raise ValueError(
                f"--backend {backend} sends one image per request; request {index} has "
                f"{len(mm_parts)}"
            )
        kind = mm_parts[0]["type"]
        return {"model": model, "input": mm_parts[0][kind]["url"], "modality": kind.split("_")[0]}
    if backend == "vllm-pooling":
        return {"model": model, "truncate_prompt_tokens": -1, "input": prompt}
    return {"model": model, "input": prompt, "truncate_prompt_tokens": -1}


def serialize_bodies(
    backend: str,
    models: list[str],
    prompts: list[str] | list[list[str]],
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
    parts = mm_contents or [None] * len(prompts)
    messages = chat_messages or [None] * len(prompts)
    overrides = request_overrides or [None] * len(prompts)
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
