"""Tests for the backend registry: each entry is complete (a body or an upload, a URL check
with upstream's words), and what the rest of loadgen asks of it follows from the entries."""

from __future__ import annotations

import pytest

from loadgen.backends import (
    BACKENDS,
    CHAT_BACKENDS,
    COMPLETIONS_BACKENDS,
    GENERATION_BACKENDS,
    IMAGE_BACKENDS,
    POOLING_BACKENDS,
    check_endpoint,
    names,
)
from loadgen.config import RunConfig
from loadgen.config.upstream import UPSTREAM_BACKENDS
from loadgen.payloads import build_body

PROMPTS = {True: ["query", "document"], False: "hello"}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_backend_takes_a_url_with_its_suffix_and_refuses_another(name: str) -> None:
    entry = BACKENDS[name]
    for suffix in entry.suffixes:
        check_endpoint(name, f"http://h/v1/{suffix}")
    check_endpoint(name, "http://h/start_profile")  # upstream lets profile URLs through
    with pytest.raises(ValueError, match=f"^{entry.api} URL must end with '") as refused:
        check_endpoint(name, "http://h/v1/models")
    hint = f" (use --endpoint {entry.endpoint})" if entry.endpoint else ""
    assert str(refused.value).endswith(f"got http://h/v1/models{hint}")


@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_backend_builds_its_body_or_says_it_uploads(name: str) -> None:
    entry = BACKENDS[name]
    prompt = PROMPTS[entry.query_documents]
    if entry.multipart:
        with pytest.raises(ValueError, match="sends multipart uploads"):
            build_body(name, "m", prompt, 4, logprobs=None, ignore_eos=False, extra_body=None)
        return
    body = build_body(name, "m", prompt, 4, logprobs=None, ignore_eos=True, extra_body={"x": 1})
    assert body["model"] == "m"
    assert ("ignore_eos" in body and body["x"] == 1) is entry.merges_extras
    assert ("stream" in body) is not entry.pooling  # a pooling answer is one JSON body


def test_the_audio_url_check_keeps_upstreams_words() -> None:
    with pytest.raises(ValueError) as refused:
        check_endpoint("openai-audio", "http://h/v1/completions")
    assert str(refused.value) == (
        "OpenAI Audio API URL must end with 'transcriptions' or 'translations', got "
        "http://h/v1/completions (use --endpoint /v1/audio/transcriptions)"
    )


def test_the_kinds_are_upstreams_lists_in_upstreams_order() -> None:
    assert COMPLETIONS_BACKENDS == ("openai", "vllm")
    assert CHAT_BACKENDS == ("openai-chat",)
    assert GENERATION_BACKENDS == ("openai", "vllm", "openai-chat")  # upstream's OPENAI_COMPATIBLE
    assert IMAGE_BACKENDS == (
        "openai-chat", "openai-embeddings-chat", "openai-embeddings-clip",
        "openai-embeddings-vlm2vec", "infinity-embeddings-clip",
    )  # fmt: skip
    assert POOLING_BACKENDS == (
        "openai-embeddings", "openai-embeddings-chat", "openai-embeddings-clip",
        "openai-embeddings-vlm2vec", "infinity-embeddings", "infinity-embeddings-clip",
        "vllm-pooling", "vllm-rerank",
    )  # fmt: skip
    assert set(names()) == set(UPSTREAM_BACKENDS)  # every backend upstream accepts is built


def test_a_backend_without_an_entry_is_not_supported() -> None:
    with pytest.raises(ValueError, match=r"^not supported yet: --backend tgi$"):
        RunConfig(backend="tgi").validate()


def test_probes_are_refused_with_a_backend_that_uploads() -> None:
    config = RunConfig(
        backend="openai-audio",
        dataset_name="custom_audio",
        dataset_path="a.jsonl",
        probe_request_rate=1.0,
    )
    with pytest.raises(ValueError, match=r"^--probe-request-rate sends JSON probes"):
        config.validate()
