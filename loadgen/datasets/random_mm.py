"""vLLM's ``random-mm`` dataset: ``random`` text prompts with synthetic images, for chat.

Upstream's ``RandomMultiModalDataset``, drawn from one ``default_rng(seed)`` in its order: the
text lengths and offsets as for ``random``, the prefix, then per request its text (the
decode -> encode loop) and its images. A request has ``U[floor(n(1-r)), ceil(n(1+r))]`` items
(n = --random-mm-base-items-per-request, r = --random-mm-num-mm-items-range-ratio, the top
capped by the per-modality limits); each item's (height, width, frames) bucket is drawn with
the normalized probabilities of --random-mm-bucket-config, a modality at its limit
(--random-mm-limit-mm-per-prompt) dropping out. An image is ``height × width × 3`` random bytes,
saved as JPEG and sent as a base64 ``image_url`` part after the text; a video is ``frames ×
height × width × 3`` random bytes, encoded as MP4 (mp4v, 30 fps) by OpenCV as upstream does, and
sent as a base64 ``video_url`` part. Unlike ``random``, prompts are settled one at a time, as
upstream's are, since the pixels come from the same generator after each prompt's padding draws.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import importlib.util
import io
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.datasets.errors import flag_errors
from loadgen.datasets.random import parse_range_ratio, plan_random_text
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.datasets.to_target import decode_encode_to_target
from loadgen.text.tokenizer import TokenCodec

Bucket = tuple[int, int, int]  # (height, width, frames)


def parse_bucket_config(value: str) -> dict[Bucket, float]:
    """--random-mm-bucket-config: a Python dict literal ``{(h, w, frames): probability}``."""
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"--random-mm-bucket-config: not a dict literal ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError("--random-mm-bucket-config: Bucket config must parse to a dict.")
    buckets = {}
    for key, probability in parsed.items():
        if isinstance(key, str):
            with contextlib.suppress(ValueError, SyntaxError):
                key = ast.literal_eval(key)
        if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(x, int) for x in key)):
            raise ValueError(
                f"--random-mm-bucket-config: Invalid bucket key {key!r}. Expected tuple (H, W, T)."
            )
        buckets[key] = float(probability)
    return buckets


def parse_limits(value: str) -> dict[str, int]:
    """--random-mm-limit-mm-per-prompt: a JSON object ``{"image": n, "video": m}``."""
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"--random-mm-limit-mm-per-prompt: not valid JSON ({exc})") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, int) for v in parsed.values()):
        raise ValueError("--random-mm-limit-mm-per-prompt: a JSON object of integers")
    return parsed


def modality(bucket: Bucket) -> str:
    """``image`` for one frame, ``video`` for more."""
    if bucket[-1] == 1:
        return "image"
    if bucket[-1] > 1:
        return "video"
    raise ValueError(f"--random-mm-bucket-config: Invalid multimodal item configuration: {bucket}")


def normalized(buckets: dict[Bucket, float]) -> dict[Bucket, float]:
    """Zero-probability buckets dropped, the rest scaled to sum to 1 (upstream's errors)."""
    if any(p < 0 for p in buckets.values()):
        raise ValueError("--random-mm-bucket-config: Bucket config values must be non-negative.")
    kept = {k: p for k, p in buckets.items() if p > 0}
    if not kept:
        raise ValueError(
            "--random-mm-bucket-config: Got invalid bucket config. Bucket config values must "
            "be non-zero."
        )
    total = sum(kept.values())
    return {k: p / total for k, p in kept.items()}


def item_count_range(
    base: int, ratio: float, limits: dict[str, int], buckets: dict[Bucket, float]
) -> tuple[int, int, dict[str, int], dict[Bucket, float]]:
    """Upstream's ``get_mm_item_sampling_params``: (min items, max items, the limits of the
    modalities in play, the normalized buckets)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError("--random-mm-num-mm-items-range-ratio must be in [0, 1].")
    for bucket in buckets:
        if modality(bucket) not in limits:
            raise ValueError(
                f"--random-mm-limit-mm-per-prompt: Modality {modality(bucket)} is not in "
                f"limit_mm_per_prompt: {list(limits)}"
            )
    buckets = normalized(buckets)
    in_play = {modality(b) for b in buckets}
    limits = {k: v for k, v in limits.items() if k in in_play}
    if not limits:
        raise ValueError("No valid limits for modalities present in bucket_config.")
    most = min(sum(limits.values()), math.ceil(base * (1 + ratio)))
    least = max(0, math.floor(base * (1 - ratio)))
    if least > most:
        raise ValueError(f"Min num mm items is greater than max mm items: {least} > {most}")
    return least, most, limits, buckets


def request_items(
    rng: np.random.Generator,
    least: int,
    most: int,
    buckets: dict[Bucket, float],
    limits: dict[str, int],
) -> Iterator[Bucket]:
    """One request's item buckets, drawn as upstream's ``get_mm_item_iterator`` draws them:
    lazily, so each item's pixels are drawn before the next item's bucket."""
    wanted = int(rng.integers(least, most + 1))
    if wanted == 0:
        return
    counts = {modality(b): 0 for b in buckets}
    left = dict(buckets)
    while sum(counts.values()) < wanted:
        keys = list(left)
        bucket = keys[rng.choice(len(keys), p=list(left.values()))]
        kind = modality(bucket)
        if counts[kind] < limits[kind]:
            counts[kind] += 1
            yield bucket
            continue
        left = {k: (0.0 if modality(k) == kind else p) for k, p in left.items()}
        if all(p == 0 for p in left.values()):
            break
        left = normalized(left)


def synthetic_image_part(rng: np.random.Generator, width: int, height: int) -> dict[str, Any]:
    """A random RGB image as upstream sends it: JPEG, base64, in an ``image_url`` part."""
    from PIL import Image  # the [mm] extra

    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    with io.BytesIO() as jpeg:
        Image.fromarray(pixels).convert("RGB").save(jpeg, format="JPEG")
        data = base64.b64encode(jpeg.getvalue()).decode("utf-8")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}


def synthetic_video_part(
    rng: np.random.Generator, width: int, height: int, frames: int
) -> dict[str, Any]:
    """A video of random frames as upstream sends it: MP4 (mp4v, 30 fps), base64, in a
    ``video_url`` part."""
    import cv2  # the [mm] extra (opencv-python-headless)

    pixels = rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "video.mp4"  # OpenCV's writer only writes files
        writer = cv2.VideoWriter(
            str(path), fourcc=cv2.VideoWriter.fourcc(*"mp4v"), fps=30, frameSize=(width, height)
        )
        try:
            if not writer.isOpened():
                raise ValueError("--random-mm-bucket-config: OpenCV could not open an MP4 writer")
            for frame in pixels:
                writer.write(frame)
        finally:
            writer.release()
        data = base64.b64encode(path.read_bytes()).decode("utf-8")
    return {"type": "video_url", "video_url": {"url": f"data:video/mp4;base64,{data}"}}


def synthetic_part(rng: np.random.Generator, bucket: Bucket) -> dict[str, Any]:
    """One item of a bucket: an image for one frame, a video for more."""
    height, width, frames = bucket
    if modality(bucket) == "image":
        return synthetic_image_part(rng, width, height)
    return synthetic_video_part(rng, width, height, frames)


def sample_random_mm_requests(
    tokenizer: TokenCodec,
    num_requests: int,
    input_len: int,
    output_len: int,
    prefix_len: int,
    range_ratio: tuple[float, float],
    seed: int,
    base_items: int,
    items_ratio: float,
    limits: dict[str, int],
    buckets: dict[Bucket, float],
) -> SampledPrompts:
    """Build upstream's ``random-mm`` dataset (see the module docstring)."""
    rng = np.random.default_rng(seed)
    plan = plan_random_text(
        tokenizer, num_requests, input_len, output_len, prefix_len, range_ratio, rng
    )
    input_lens, output_lens, offsets, allowed, prefix = plan
    least, most, limits, buckets = item_count_range(base_items, items_ratio, limits, buckets)
    prompts, prompt_lens, contents = [], [], []
    for i in range(num_requests):
        # Prompt i alone: its padding draws come before its images', as upstream's.
        inner = allowed[(offsets[i] + i + np.arange(input_lens[i])) % len(allowed)]
        text, length = decode_encode_to_target(
            tokenizer,
            [np.concatenate((prefix, inner))],
            np.array([prefix_len + input_lens[i]]),
            rng,
        )
        prompts.append(text[0])
        prompt_lens.append(int(length[0]))
        items = request_items(rng, least, most, buckets, limits)  # drawn as the pixels are
        contents.append([synthetic_part(rng, bucket) for bucket in items])
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=np.array(prompt_lens, dtype=np.int64),
        output_lens=output_lens.astype(np.int64),
        mm_contents=contents,
    )


def sample_random_mm(
    tokenizer: TokenCodec,
    num_prompts: int,
    random_input_len: int,
    random_output_len: int,
    random_prefix_len: int,
    random_range_ratio: str,
    random_mm_base_items_per_request: int,
    random_mm_num_mm_items_range_ratio: float,
    random_mm_limit_mm_per_prompt: str,
    random_mm_bucket_config: str,
    seed: int,
) -> SampledPrompts:
    """The ``random-mm`` dataset from its flags."""
    with flag_errors():
        return sample_random_mm_requests(
            tokenizer,
            num_prompts,
            random_input_len,
            random_output_len,
            random_prefix_len,
            parse_range_ratio(random_range_ratio),
            seed,
            random_mm_base_items_per_request,
            random_mm_num_mm_items_range_ratio,
            parse_limits(random_mm_limit_mm_per_prompt),
            parse_bucket_config(random_mm_bucket_config),
        )


def check_random_mm(
    backend: str,
    random_batch_size: int,
    random_mm_base_items_per_request: int,
    random_mm_num_mm_items_range_ratio: float,
    random_mm_limit_mm_per_prompt: str,
    random_mm_bucket_config: str,
) -> None:
    """Upstream's refusals for random-mm (ValueError), and the image (and video) libraries
    installed."""
    if backend != "openai-chat":
        raise ValueError(
            f"Multi-modal content (images) is not supported on backend {backend!r}; "
            "use one of ['openai-chat'] (--dataset-name random-mm)"
        )
    if random_batch_size != 1:
        raise ValueError("--random-batch-size above 1 is not supported for random-mm")
    if importlib.util.find_spec("PIL") is None:
        raise ValueError("--dataset-name random-mm needs pillow: pip install 'loadgen[mm]'")
    _, _, limits, _ = item_count_range(
        random_mm_base_items_per_request,
        random_mm_num_mm_items_range_ratio,
        parse_limits(random_mm_limit_mm_per_prompt),
        parse_bucket_config(random_mm_bucket_config),
    )
    if limits.get("video", 0) > 0 and importlib.util.find_spec("cv2") is None:
        raise ValueError(
            "--random-mm-bucket-config: video buckets (frames > 1) need OpenCV: "
            "pip install 'loadgen[mm]'"
        )
