"""vLLM's ``custom_image`` dataset: a JSONL file of prompts with images, for chat.

Upstream's ``CustomImageDataset``: each line is ``{"prompt": text, "image_files": [paths or
URLs]}`` (the text, then the images, in one user message) or ``{"content": [parts]}`` with
``text``, ``image`` and ``image_url`` parts in their own order. An image reference becomes an
``image_url`` part: a URL as given, a path as ``file://path`` (for a server that reads local
files); with ``--custom-ensure-client-side-data`` local and HTTP(S) images are read by the client
and sent inline as PNG data URLs, as vLLM's ``fetch_image`` and ``encode_image_url`` make them
(RGB, transparency over white). Lines are shuffled and topped up as ``custom``'s are;
``prompt_len`` counts the text with special tokens; every request asks for --custom-output-len.
As upstream's ``SampleRequest``, a ``prompt``/``image_files`` line is its text with the images
beside it (``mm_contents``: what the -clip and -vlm2vec backends rewrite around), a ``content``
line its parts as the prompt with no images beside it.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import io
import urllib.request
from typing import Any

from loadgen.backends import IMAGE_BACKENDS
from loadgen.datasets.errors import file_errors
from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.media import media_url, rgb_image
from loadgen.datasets.sampled_prompts import SampledPrompts, chosen_rows, top_up
from loadgen.text.tokenizer import TokenCodec

Part = dict[str, Any]


def load_custom_image_rows(path: str) -> list[dict[str, Any]]:
    """The lines of the file, each with ``prompt`` and ``image_files`` or with ``content``."""
    if not path.endswith(".jsonl"):
        raise ValueError(f"--dataset-path {path}: --dataset-name custom_image reads .jsonl files")
    rows = []
    for number, row in json_lines(path):
        legacy = isinstance(row, dict) and "prompt" in row and "image_files" in row
        if not legacy and not (isinstance(row, dict) and "content" in row):
            raise ValueError(
                f"{path}:{number}: each line needs 'prompt' and 'image_files', or 'content'"
            )
        rows.append(row)
    if not rows:
        raise ValueError(f"--dataset-path {path}: the file has no prompts")
    return rows


def image_part(image: Any, inline: bool) -> Part:
    """An image reference as an ``image_url`` part (a data URL with ``inline``)."""
    if not isinstance(image, str):
        raise ValueError(f"an image must be a path or a URL, got {image!r}")
    url = media_url(image)
    if inline and not url.startswith("data:image/"):
        url = png_data_url(url)
    return {"type": "image_url", "image_url": {"url": url}}


def png_data_url(url: str) -> str:
    """The image at a file:// or HTTP(S) URL as vLLM's client encodes it: RGB PNG, base64."""
    from PIL import Image  # the [mm] extra

    try:
        if url.startswith("file://"):
            with open(url.removeprefix("file://"), "rb") as source:
                data = source.read()
        else:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, ValueError) as exc:
        raise ValueError(f"Invalid image URL: {url} ({exc})") from None
    with io.BytesIO() as png:
        rgb_image(image).save(png, "PNG")
        return "data:image/png;base64," + base64.b64encode(png.getvalue()).decode("utf-8")


def content_parts(content: Any, inline: bool) -> list[Part]:
    """The parts of an interleaved ``content`` line, images made ``image_url`` parts."""
    if not isinstance(content, list) or not content:
        raise ValueError("'content' must be a non-empty list of text and image parts")
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image" and "image" in part:
            parts.append(image_part(part["image"], inline))
        elif kind == "image_url" and isinstance(part.get("image_url"), str):
            parts.append(image_part(part["image_url"], inline))
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            given = part["image_url"]
            made = image_part(given.get("url"), inline)
            made["image_url"] |= {k: v for k, v in given.items() if k != "url"}
            parts.append(made)
        else:
            raise ValueError(f"content parts are text, image or image_url; got {part!r}")
    return parts


def sample_custom_image_requests(
    rows: list[dict[str, Any]],
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int,
    seed: int,
    disable_shuffle: bool = False,
    no_oversample: bool = False,
    inline_images: bool = False,
) -> SampledPrompts:
    """Upstream's custom_image sampling (see the module docstring): each prompt a text with its
    images in ``mm_contents``, or a ``content`` line's parts."""
    prompts: list[tuple[str | list[Part], list[Part]]] = []  # (prompt, images beside it)
    texts: list[str] = []
    for row in chosen_rows(rows, num_requests, seed, disable_shuffle):
        if "content" in row:
            parts = content_parts(row["content"], inline_images)
            texts.append("".join(p["text"] for p in parts if p["type"] == "text"))
            prompts.append((parts, []))
        else:
            files = row["image_files"]
            if not isinstance(row["prompt"], str):
                raise ValueError("'prompt' must be a string")
            if not isinstance(files, list) or not files:
                raise ValueError("'image_files' must be a non-empty list")
            images = [image_part(image, inline_images) for image in files]
            texts.append(row["prompt"])
            prompts.append((row["prompt"], images))
    lens = [len(ids) + tokenizer.num_special_tokens for ids in tokenizer.encode_batch(texts)]
    outputs = [output_len] * len(prompts)
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    sampled = SampledPrompts.of([prompt for prompt, _ in prompts], lens, outputs)
    return dataclasses.replace(sampled, mm_contents=[images for _, images in prompts])


def sample_custom_image(
    rows: list[dict[str, Any]],
    path: str,
    tokenizer: TokenCodec,
    num_prompts: int,
    custom_output_len: int,
    seed: int,
    disable_shuffle: bool,
    no_oversample: bool,
    custom_ensure_client_side_data: bool,
) -> SampledPrompts:
    """The ``custom_image`` dataset from the file's rows and its flags."""
    with file_errors(path):
        return sample_custom_image_requests(
            rows,
            tokenizer,
            num_prompts,
            custom_output_len,
            seed,
            disable_shuffle,
            no_oversample,
            custom_ensure_client_side_data,
        )


def check_custom_image(
    backend: str, custom_output_len: int, custom_ensure_client_side_data: bool
) -> None:
    """Refuse (ValueError) a backend that sends no images, an output length below 1 (none is
    read from the file), and inlined images without pillow."""
    if backend not in IMAGE_BACKENDS:
        raise ValueError(
            f"Multi-modal content is not supported on backend {backend!r}; use one "
            f"of {list(IMAGE_BACKENDS)} (--dataset-name custom_image)"
        )
    if custom_output_len < 1:
        raise ValueError(
            f"--custom-output-len must be >= 1 with custom_image, got {custom_output_len}"
        )
    if custom_ensure_client_side_data and importlib.util.find_spec("PIL") is None:
        raise ValueError("--custom-ensure-client-side-data needs pillow: pip install 'loadgen[mm]'")
