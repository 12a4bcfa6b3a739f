"""Request bodies and URL checks of every supported backend, against upstream's (reference §2.1)."""

from __future__ import annotations

import pytest

from loadgen.backends import BACKENDS, POOLING_BACKENDS, check_endpoint, input_sequences
from loadgen.payloads import build_body

CHAT_CONTENT = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (
            "openai-embeddings",
            {"model": "m", "input": "hi", "truncate_prompt_tokens": -1},
        ),
        *(
            (b, {"model": "m", "messages": CHAT_CONTENT, "truncate_prompt_tokens": -1})
            for b in (
                "openai-embeddings-chat",
                "openai-embeddings-clip",
                "openai-embeddings-vlm2vec",
            )
        ),
        ("infinity-embeddings", {"model": "m", "input": "hi"}),
        ("infinity-embeddings-clip", {"model": "m", "input": "hi"}),
        ("vllm-pooling", {"model": "m", "truncate_prompt_tokens": -1, "input": "hi"}),
    ],
)
def test_pooling_bodies_have_upstreams_keys_in_order(backend: str, expected: dict) -> None:
    body = build_body(backend, "m", "hi", 16, logprobs=3, ignore_eos=False, extra_body=None)
    assert list(body.items()) == list(expected.items())  # no stream, max_tokens or logprobs
    with_extras = build_body(
        backend, "m", "hi", 16, logprobs=None, ignore_eos=True, extra_body={"dimensions": 8}
    )
    assert list(with_extras)[-2:] == ["ignore_eos", "dimensions"]  # as _update_payload_common


def test_every_supported_pooling_backend_has_a_body_and_an_endpoint() -> None:
    for backend in set(BACKENDS) & set(POOLING_BACKENDS) - {"vllm-rerank"}:
        build_body(backend, "m", "x", 1, logprobs=None, ignore_eos=False, extra_body=None)
        check_endpoint(
            backend, "http://h/pooling" if backend == "vllm-pooling" else "http://h/v1/embeddings"
        )


@pytest.mark.parametrize(
    ("backend", "url", "message"),
    [
        (
            "openai-embeddings",
            "http://h/v1/completions",
            "OpenAI Embeddings API URL must end with 'embeddings', got http://h/v1/completions "
            "(use --endpoint /v1/embeddings)",
        ),
        (
            "vllm-pooling",
            "http://h/v1/embeddings",
            "vLLM Pooling API URL must end with 'pooling', got http://h/v1/embeddings "
            "(use --endpoint /pooling)",
        ),
        (
            "infinity-embeddings",
            "http://h/v1/chat/completions",
            "Infinity Embeddings API URL must end with 'embeddings'",
        ),
        (
            "openai-chat",
            "http://h/v1/completions",
            "OpenAI Chat Completions API URL must end with 'chat/completions'",
        ),
    ],
)
def test_a_url_that_does_not_fit_the_backend_is_refused(
    backend: str, url: str, message: str
) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        check_endpoint(backend, url)
    check_endpoint(backend, "http://h/start_profile")  # upstream lets profile URLs through


def test_input_sequences_counts_a_batch_except_in_chat_form() -> None:
    assert input_sequences("openai-embeddings", "one text") == 1
    assert input_sequences("openai-embeddings", [1, 2, 3]) == 1  # one prompt of token ids
    assert input_sequences("openai-embeddings", ["a", "b", "c"]) == 3
    assert input_sequences("vllm-pooling", [[1, 2], [3]]) == 2
    assert input_sequences("openai-embeddings-chat", ["a", "b"]) == 1


def test_rerank_body_is_query_and_documents_with_nothing_merged() -> None:
    body = build_body(
        "vllm-rerank",
        "m",
        ["q", "d1", "d2"],
        0,
        logprobs=None,
        ignore_eos=True,
        extra_body={"x": 1},
    )
    assert list(body.items()) == [
        ("model", "m"),
        ("query", "q"),
        ("documents", ["d1", "d2"]),
        ("truncate_prompt_tokens", -1),
    ]
    assert input_sequences("vllm-rerank", ["q", "d1", "d2"]) == 2
    with pytest.raises(ValueError, match="vLLM score API URL must end with 'rerank'"):
        check_endpoint("vllm-rerank", "http://h/v1/embeddings")
    check_endpoint("vllm-rerank", "http://h/v1/rerank")


def test_batched_embeddings_send_the_texts_as_one_input_list() -> None:
    body = build_body(
        "openai-embeddings", "m", ["a", "b"], 0, logprobs=None, ignore_eos=False, extra_body=None
    )
    assert body["input"] == ["a", "b"]
