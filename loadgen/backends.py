"""Every backend loadgen sends to, by its --backend: one `Backend` entry each, beside the
dataset registry (loadgen/datasets/registry.py). Adding a backend is adding an entry.

The rest of loadgen asks the registry rather than keeping lists of names: the URL check
(upstream's API name, the suffix the URL must end with, the --endpoint to suggest), the request
body (``body``), how the workers read the answer (``answer``: a completions or chat SSE stream,
or one pooling JSON body), which backends send images, which take batched inputs, which take a
query and its documents.

The bodies, exactly as upstream's backends build them (`loadgen.payloads.build_body` adds
``ignore_eos``, the extra body and the per-request overrides after them, except for rerank)::

    completions (openai, vllm) ........... {model, prompt, repetition_penalty: 1.0, max_tokens,
                                            logprobs, stream: true,
                                            stream_options: {include_usage: true}}
    chat (openai-chat) ................... {model, messages: [{role: user, content: [{type: text,
                                            text: prompt}]}], max_completion_tokens, stream: true,
                                            stream_options: {include_usage: true}}
    openai-embeddings .................... {model, input: prompt, truncate_prompt_tokens: -1}
    openai-embeddings-chat, -clip, -vlm2vec {model, messages, truncate_prompt_tokens: -1}
    infinity-embeddings (-clip) .......... {model, input: prompt} or, with an image and no
                                            text, {model, input: <image url>, modality: image}
    vllm-pooling ......................... {model, truncate_prompt_tokens: -1, input: prompt}
    vllm-rerank .......................... {model, query: prompt[0], documents: prompt[1:],
                                            truncate_prompt_tokens: -1} (nothing merged)
    openai-audio ......................... no JSON body: a multipart upload (audio_payloads.py)

The -clip and -vlm2vec variants differ from their base backend only for a request with images
(custom_image's ``image_files``), as upstream's ``_preprocess_clip`` and ``_preprocess_vlm2vec``:
-clip empties the text; -vlm2vec puts the images first and asks "Represent the given image."
for even request indices, "Represent the given image with the following question: <text>" for
odd ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

VLM2VEC_IMAGE_ONLY = "Represent the given image."
VLM2VEC_WITH_TEXT = "Represent the given image with the following question: "
ImageText = Literal["kept", "dropped", "vlm2vec"]


@dataclass(frozen=True)
class BodyRequest:
    """What one request's JSON body is built from."""

    backend: str
    model: str
    prompt: Any  # a text, token ids, a batch of either, or a query and its documents
    output_len: int
    logprobs: int | None
    mm_parts: list[dict[str, Any]]  # its images or videos, as chat content parts
    messages: list[dict[str, Any]] | None  # BFCL's, instead of one built from the prompt
    index: int  # its place in the run (-vlm2vec alternates its text by it)


@dataclass(frozen=True)
class Backend:
    """One --backend: its URL check, its request body, and how its answer is read."""

    api: str  # upstream's name for it in its URL check ("OpenAI Completions API")
    suffixes: tuple[str, ...]  # what the URL must end with (or "profile", as upstream)
    # The --endpoint the URL check suggests; None for /v1/completions, the default.
    endpoint: str | None
    # The JSON body of one request; None: not JSON (openai-audio's multipart upload).
    body: Callable[[BodyRequest], dict[str, Any]] | None
    # How the workers read the answer: a completions or a chat SSE stream, or one pooling JSON
    # body (upstream's POOLING_BACKENDS, measured by E2EL alone).
    answer: Literal["completions", "chat", "pooling"]
    images: bool = False  # sends a request's images (chat, and upstream's "embeddings-" ones)
    batches: bool = False  # a prompt may be a batch of inputs, each counted (pooling)
    query_documents: bool = False  # its prompt is a query then documents (random-rerank's)
    merges_extras: bool = True  # ignore_eos, the extra body and overrides join its body

    @property
    def pooling(self) -> bool:
        """Whether its answer is one JSON body: E2EL only, no output tokens."""
        return self.answer == "pooling"

    @property
    def multipart(self) -> bool:
        """Whether its bodies are multipart uploads (openai-audio), not JSON."""
        return self.body is None


def chat_content(
    prompt: Any, mm_parts: list[dict[str, Any]], mm_first: bool = False
) -> list[dict[str, Any]]:
    """A user message's parts: the text (or the prompt's own parts, custom_image's
    ``content`` lines) and the media, after it or (``mm_first``) before it."""
    text = prompt if isinstance(prompt, list) else [{"type": "text", "text": prompt}]
    return [*mm_parts, *text] if mm_first else [*text, *mm_parts]


def image_prompt(
    image_text: ImageText, prompt: Any, mm_parts: list[dict[str, Any]], index: int
) -> Any:
    """The text that goes with request ``index``'s images, as upstream's -clip ("dropped") and
    -vlm2vec request functions rewrite it (unchanged without images)."""
    if not mm_parts or image_text == "kept":
        return prompt
    if image_text == "dropped":
        return ""
    return VLM2VEC_IMAGE_ONLY if index % 2 == 0 else f"{VLM2VEC_WITH_TEXT}{prompt}"


def completions_body(request: BodyRequest) -> dict[str, Any]:
    """openai and vllm: the completions body."""
    return {
        "model": request.model,
        "prompt": request.prompt,
        "repetition_penalty": 1.0,
        "max_tokens": request.output_len,
        "logprobs": request.logprobs,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def chat_body(request: BodyRequest) -> dict[str, Any]:
    """openai-chat: one user message (the text, then the media), or BFCL's messages."""
    content = chat_content(request.prompt, request.mm_parts)
    return {
        "model": request.model,
        "messages": request.messages or [{"role": "user", "content": content}],
        "max_completion_tokens": request.output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def embeddings_body(request: BodyRequest) -> dict[str, Any]:
    """openai-embeddings: the prompt (or a batch) as the input."""
    return {"model": request.model, "input": request.prompt, "truncate_prompt_tokens": -1}


def embeddings_chat_body(request: BodyRequest, image_text: ImageText) -> dict[str, Any]:
    """openai-embeddings-chat, -clip, -vlm2vec: one chat message, its text rewritten as
    ``image_text`` says when the request has images (-vlm2vec puts them first)."""
    prompt = image_prompt(image_text, request.prompt, request.mm_parts, request.index)
    content = chat_content(prompt, request.mm_parts, mm_first=image_text == "vlm2vec")
    messages = [{"role": "user", "content": content}]
    return {"model": request.model, "messages": messages, "truncate_prompt_tokens": -1}


def infinity_body(request: BodyRequest, image_text: ImageText) -> dict[str, Any]:
    """infinity-embeddings (-clip): the text as the input, or an image without text as the
    input with its modality."""
    prompt = image_prompt(image_text, request.prompt, request.mm_parts, request.index)
    mm_parts = request.mm_parts
    if prompt or not mm_parts:
        return {"model": request.model, "input": prompt}
    if len(mm_parts) != 1:  # upstream asserts a single item here
        raise ValueError(
            f"--backend {request.backend} sends one image per request; request "
            f"{request.index} has {len(mm_parts)}"
        )
    kind = mm_parts[0]["type"]
    return {
        "model": request.model,
        "input": mm_parts[0][kind]["url"],
        "modality": kind.split("_")[0],
    }


def pooling_body(request: BodyRequest) -> dict[str, Any]:
    """vllm-pooling: the input after truncate_prompt_tokens, as upstream orders them."""
    return {"model": request.model, "truncate_prompt_tokens": -1, "input": request.prompt}


def rerank_body(request: BodyRequest) -> dict[str, Any]:
    """vllm-rerank: the first text is the query, the others its documents."""
    prompt = request.prompt
    assert isinstance(prompt, list) and len(prompt) > 1  # config.validate() ensures it
    return {
        "model": request.model,
        "query": prompt[0],
        "documents": prompt[1:],
        "truncate_prompt_tokens": -1,
    }


# In the order of upstream's supported lists (generation, audio, pooling): the names of a kind
# (`names`) come out in that order, as upstream's messages list them.
BACKENDS: dict[str, Backend] = {
    "openai": Backend(
        api="OpenAI Completions API",
        suffixes=("completions",),
        endpoint=None,
        body=completions_body,
        answer="completions",
    ),
    "vllm": Backend(
        api="OpenAI Completions API",
        suffixes=("completions",),
        endpoint=None,
        body=completions_body,
        answer="completions",
    ),
    "openai-chat": Backend(
        api="OpenAI Chat Completions API",
        suffixes=("chat/completions",),
        endpoint="/v1/chat/completions",
        body=chat_body,
        answer="chat",
        images=True,
    ),
    "openai-audio": Backend(
        api="OpenAI Audio API",
        suffixes=("transcriptions", "translations"),
        endpoint="/v1/audio/transcriptions",
        body=None,
        answer="chat",  # it streams chat's SSE
    ),
    "openai-embeddings": Backend(
        api="OpenAI Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=embeddings_body,
        answer="pooling",
        batches=True,
    ),
    "openai-embeddings-chat": Backend(
        api="OpenAI Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=partial(embeddings_chat_body, image_text="kept"),
        answer="pooling",
        images=True,
    ),
    "openai-embeddings-clip": Backend(
        api="OpenAI Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=partial(embeddings_chat_body, image_text="dropped"),
        answer="pooling",
        images=True,
    ),
    "openai-embeddings-vlm2vec": Backend(
        api="OpenAI Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=partial(embeddings_chat_body, image_text="vlm2vec"),
        answer="pooling",
        images=True,
    ),
    "infinity-embeddings": Backend(
        api="Infinity Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=partial(infinity_body, image_text="kept"),
        answer="pooling",
        batches=True,
    ),
    "infinity-embeddings-clip": Backend(
        api="Infinity Embeddings API",
        suffixes=("embeddings",),
        endpoint="/v1/embeddings",
        body=partial(infinity_body, image_text="dropped"),
        answer="pooling",
        images=True,
        batches=True,
    ),
    "vllm-pooling": Backend(
        api="vLLM Pooling API",
        suffixes=("pooling",),
        endpoint="/pooling",  # vLLM serves it outside /v1
        body=pooling_body,
        answer="pooling",
        batches=True,
    ),
    "vllm-rerank": Backend(
        api="vLLM score API",
        suffixes=("rerank",),
        endpoint="/v1/rerank",
        body=rerank_body,
        answer="pooling",
        batches=True,
        query_documents=True,
        merges_extras=False,  # upstream merges neither ignore_eos nor the extra body
    ),
}


def names(test: Callable[[Backend], bool] = lambda backend: True) -> tuple[str, ...]:
    """The names of the backends that pass ``test`` (all of them by default), in registry order."""
    return tuple(name for name, backend in BACKENDS.items() if test(backend))


def check_endpoint(backend: str, api_url: str) -> None:
    """Upstream refuses a URL whose suffix does not fit the backend; so do we (ValueError)."""
    entry = BACKENDS[backend]
    if api_url.endswith((*entry.suffixes, "profile")):
        return
    suffixes = " or ".join(f"'{suffix}'" for suffix in entry.suffixes)
    hint = f" (use --endpoint {entry.endpoint})" if entry.endpoint else ""
    raise ValueError(f"{entry.api} URL must end with {suffixes}, got {api_url}{hint}")


def input_sequences(backend: str, prompt: str | list) -> int:
    """How many inputs one pooling request embeds: a batch (list of texts or of token-id lists)
    counts each; a chat-form request counts one; a rerank request its documents, as upstream
    counts them."""
    entry = BACKENDS[backend]
    if entry.query_documents:
        return len(prompt) - 1
    batched = isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], str | list)
    return len(prompt) if batched and entry.batches else 1


# The names of a kind, for the modules that test membership.
COMPLETIONS_BACKENDS = names(lambda backend: backend.answer == "completions")
CHAT_BACKENDS = names(lambda backend: backend.body is chat_body)
POOLING_BACKENDS = names(lambda backend: backend.pooling)  # upstream's POOLING_BACKENDS
GENERATION_BACKENDS = names(lambda backend: not backend.pooling and not backend.multipart)
IMAGE_BACKENDS = names(lambda backend: backend.images)
