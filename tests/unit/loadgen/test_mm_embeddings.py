"""Image inputs for the -clip and -vlm2vec embedding backends, as upstream's request functions
rewrite them, and custom_image's lines as upstream's ``SampleRequest`` carries them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.datasets.custom_image import load_custom_image_rows, sample_custom_image_requests
from loadgen.payloads import build_body, serialize_bodies

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
OTHER = {"type": "image_url", "image_url": {"url": "file:///b.png"}}
FLAGS = {"logprobs": None, "ignore_eos": False, "extra_body": None}


def body(backend: str, prompt, mm: list | None, index: int = 0) -> dict:
    return build_body(backend, "m", prompt, 8, mm_parts=mm, index=index, **FLAGS)


def content(backend: str, prompt, mm: list | None, index: int = 0) -> list:
    [message] = body(backend, prompt, mm, index)["messages"]
    return message["content"]


def test_clip_empties_the_text_of_a_request_with_an_image() -> None:
    assert content("openai-embeddings-clip", "a cat", [IMAGE]) == [
        {"type": "text", "text": ""},
        IMAGE,
    ]
    assert content("openai-embeddings-clip", "a cat", []) == [{"type": "text", "text": "a cat"}]
    # The chat embeddings backend keeps the text, images after it.
    assert content("openai-embeddings-chat", "a cat", [IMAGE]) == [
        {"type": "text", "text": "a cat"},
        IMAGE,
    ]


def test_vlm2vec_puts_images_first_and_alternates_image_only_prompts() -> None:
    assert content("openai-embeddings-vlm2vec", "a cat?", [IMAGE], index=4) == [
        IMAGE,
        {"type": "text", "text": "Represent the given image."},
    ]
    assert content("openai-embeddings-vlm2vec", "a cat?", [IMAGE], index=7) == [
        IMAGE,
        {"type": "text", "text": "Represent the given image with the following question: a cat?"},
    ]
    assert content("openai-embeddings-vlm2vec", "a cat?", [], index=0) == [
        {"type": "text", "text": "a cat?"}
    ]
    bodies = serialize_bodies(
        "openai-embeddings-vlm2vec", ["m"] * 3, ["q"] * 3, [8] * 3, mm_contents=[[IMAGE]] * 3,
        **FLAGS,
    )  # fmt: skip
    texts = [orjson.loads(b)["messages"][0]["content"][1]["text"] for b in bodies]
    assert texts == [
        "Represent the given image.",
        "Represent the given image with the following question: q",
        "Represent the given image.",
    ]


def test_infinity_clip_sends_the_image_url_and_its_modality() -> None:
    assert body("infinity-embeddings-clip", "a cat", [IMAGE]) == {
        "model": "m",
        "input": "data:image/png;base64,AAAA",
        "modality": "image",
    }
    assert body("infinity-embeddings-clip", "a cat", []) == {"model": "m", "input": "a cat"}
    assert body("infinity-embeddings", "a cat", [IMAGE]) == {"model": "m", "input": "a cat"}
    with pytest.raises(ValueError, match="sends one image per request; request 3 has 2"):
        body("infinity-embeddings-clip", "a cat", [IMAGE, OTHER], index=3)


def test_content_lines_go_as_their_parts_whatever_the_backend() -> None:
    parts = [{"type": "text", "text": "compare "}, IMAGE]
    for backend in ("openai-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec"):
        assert content(backend, parts, []) == parts


def test_custom_image_lines_keep_text_and_images_apart(tok, tmp_path: Path) -> None:
    rows = [
        {"prompt": "the picture", "image_files": ["/a.png", "https://x/b.jpg"]},
        {"content": [{"type": "text", "text": "see "}, {"type": "image", "image": "/c.png"}]},
    ]
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = sample_custom_image_requests(
        load_custom_image_rows(str(tmp_path / "i.jsonl")), tok, 2, 16, seed=0,
        disable_shuffle=True,
    )  # fmt: skip
    images = [
        {"type": "image_url", "image_url": {"url": "file:///a.png"}},
        {"type": "image_url", "image_url": {"url": "https://x/b.jpg"}},
    ]
    see = [
        {"type": "text", "text": "see "},
        {"type": "image_url", "image_url": {"url": "file:///c.png"}},
    ]
    assert ds.prompts == ["the picture", see]
    assert ds.mm_contents == [images, []]
    chat = [content("openai-chat", p, mm) for p, mm in zip(ds.prompts, ds.mm_contents, strict=True)]
    assert chat == [[{"type": "text", "text": "the picture"}, *images], see]


@pytest.mark.parametrize(
    "backend",
    ["openai-chat", "openai-embeddings-chat", "openai-embeddings-clip",
     "openai-embeddings-vlm2vec", "infinity-embeddings-clip"],
)  # fmt: skip
def test_custom_image_takes_the_backends_that_send_images(backend: str) -> None:
    RunConfig(dataset_name="custom_image", dataset_path="i.jsonl", backend=backend).validate()


@pytest.mark.parametrize("backend", ["openai", "openai-embeddings", "infinity-embeddings"])
def test_custom_image_refuses_backends_that_drop_images(backend: str) -> None:
    config = RunConfig(dataset_name="custom_image", dataset_path="i.jsonl", backend=backend)
    with pytest.raises(ConfigError, match=f"not supported on backend '{backend}'"):
        config.validate()


def test_random_mm_stays_chat_only_as_upstream() -> None:
    with pytest.raises(ConfigError, match="not supported on backend 'openai-embeddings-clip'"):
        RunConfig(dataset_name="random-mm", backend="openai-embeddings-clip").validate()
