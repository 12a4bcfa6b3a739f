"""vLLM's ``custom_image`` dataset: prompts with image references or interleaved content."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from loadgen.datasets.custom_image import (
    content_parts,
    image_part,
    load_custom_image_rows,
    sample_custom_image_requests,
)


def test_references_become_image_url_parts(tmp_path: Path) -> None:
    assert image_part("/data/a.png", False) == {
        "type": "image_url",
        "image_url": {"url": "file:///data/a.png"},
    }
    assert image_part("https://x/y.jpg", False)["image_url"]["url"] == "https://x/y.jpg"
    parts = content_parts(
        [
            {"type": "text", "text": "A "},
            {"type": "image", "image": "/p.png"},
            {"type": "image_url", "image_url": {"url": "/q.png", "detail": "low"}},
        ],
        inline=False,
    )
    assert parts[2] == {"type": "image_url", "image_url": {"url": "file:///q.png", "detail": "low"}}
    with pytest.raises(ValueError, match="content parts are text, image or image_url"):
        content_parts([{"type": "audio"}], inline=False)


def test_inline_images_are_rgb_pngs_with_transparency_over_white(tmp_path: Path) -> None:
    pixels = np.zeros((2, 2, 4), dtype=np.uint8)  # fully transparent black
    Image.fromarray(pixels, "RGBA").save(tmp_path / "t.png")
    url = image_part(str(tmp_path / "t.png"), True)["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert image.mode == "RGB" and image.getpixel((0, 0)) == (255, 255, 255)
    with pytest.raises(ValueError, match=r"Invalid image URL: file:///nowhere\.png"):
        image_part("/nowhere.png", True)


def test_lines_are_shuffled_counted_and_topped_up_like_custom(tok, tmp_path: Path) -> None:
    rows = [{"prompt": f"the {i}", "image_files": ["/a.png"]} for i in range(3)]
    rows.append({"content": [{"type": "text", "text": "a "}, {"type": "text", "text": "the"}]})
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_custom_image_rows(str(tmp_path / "i.jsonl"))
    ds = sample_custom_image_requests(loaded, tok, 6, 16, seed=0)
    assert len(ds.prompts) == 6 and ds.output_lens.tolist() == [16] * 6
    texts = [
        prompt if isinstance(prompt, str) else "".join(p["text"] for p in prompt)
        for prompt in ds.prompts
    ]
    assert all(
        len(mm) == isinstance(p, str) for p, mm in zip(ds.prompts, ds.mm_contents, strict=True)
    )
    assert ds.prompt_lens.tolist() == [len(tok.encode_batch([t])[0]) + 1 for t in texts]
    assert sorted(set(texts)) == ["a the", "the 0", "the 1", "the 2"]
    (tmp_path / "bad.jsonl").write_text('{"prompt": "no images"}\n')
    with pytest.raises(ValueError, match="needs 'prompt' and 'image_files', or 'content'"):
        load_custom_image_rows(str(tmp_path / "bad.jsonl"))
