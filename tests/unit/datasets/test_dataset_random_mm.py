"""vLLM's ``random-mm`` dataset: random text plus synthetic JPEG images, drawn as upstream."""

from __future__ import annotations

import base64
import io

import numpy as np
import orjson
import pytest
from PIL import Image

from loadgen.datasets.random_mm import (
    item_count_range,
    parse_bucket_config,
    parse_limits,
    request_items,
    sample_random_mm_requests,
    synthetic_image_part,
)
from loadgen.payloads import serialize_bodies

BUCKETS = {(64, 32, 1): 0.5, (16, 16, 1): 0.5}


def decoded(part: dict) -> Image.Image:
    url = part["image_url"]["url"]
    assert part["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_flag_values_parse_as_upstreams() -> None:
    assert parse_bucket_config("{(256, 256, 1): 0.5, '(720, 1280, 1)': 0.5}") == {
        (256, 256, 1): 0.5,
        (720, 1280, 1): 0.5,
    }
    assert parse_limits('{"image": 3, "video": 0}') == {"image": 3, "video": 0}
    with pytest.raises(ValueError, match=r"Invalid bucket key \(1, 2\). Expected tuple"):
        parse_bucket_config("{(1, 2): 1.0}")
    with pytest.raises(ValueError, match="--random-mm-limit-mm-per-prompt: not valid JSON"):
        parse_limits("{image: 3}")


def test_item_count_range_and_its_errors() -> None:
    limits = {"image": 3, "video": 1}
    assert item_count_range(2, 0.5, limits, BUCKETS) == (1, 3, {"image": 3}, BUCKETS)
    assert item_count_range(4, 0.5, limits, BUCKETS)[:2] == (2, 3)  # capped at the image limit
    with pytest.raises(ValueError, match="must be in \\[0, 1\\]"):
        item_count_range(1, 1.5, limits, BUCKETS)
    with pytest.raises(ValueError, match="Modality video is not in limit_mm_per_prompt"):
        item_count_range(1, 0.0, {"image": 1}, {(8, 8, 4): 1.0})
    with pytest.raises(ValueError, match="Bucket config values must be non-zero"):
        item_count_range(1, 0.0, limits, {(8, 8, 1): 0.0})


def test_items_respect_the_limit_and_images_their_size() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert len(list(request_items(rng, 0, 2, BUCKETS, {"image": 2}))) <= 2
    image = decoded(synthetic_image_part(np.random.default_rng(1), width=32, height=64))
    assert (image.format, image.size, image.mode) == ("JPEG", (32, 64), "RGB")


def test_requests_carry_text_then_images_in_the_chat_message(tok) -> None:
    ds = sample_random_mm_requests(tok, 6, 24, 5, 0, (0.0, 0.0), 3, 2, 0.5, {"image": 3}, BUCKETS)
    assert ds.mm_contents is not None and len(ds.mm_contents) == 6
    assert all(1 <= len(parts) <= 3 for parts in ds.mm_contents)
    assert {decoded(p).size for parts in ds.mm_contents for p in parts} <= {(32, 64), (16, 16)}
    assert ds.output_lens.tolist() == [5] * 6
    again = sample_random_mm_requests(
        tok, 6, 24, 5, 0, (0.0, 0.0), 3, 2, 0.5, {"image": 3}, BUCKETS
    )
    assert again.prompts == ds.prompts and again.mm_contents == ds.mm_contents
    body = orjson.loads(
        serialize_bodies(
            "openai-chat", ["m"], ds.prompts[:1], [5], logprobs=None, ignore_eos=True,
            extra_body=None, mm_contents=ds.mm_contents[:1],
        )[0]
    )  # fmt: skip
    [message] = body["messages"]
    assert message["content"] == [{"type": "text", "text": ds.prompts[0]}, *ds.mm_contents[0]]
