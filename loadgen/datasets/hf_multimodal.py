"""vLLM's multimodal ``hf`` datasets: LLaVA-OneVision, VisionArena, MMStar (images), MMVU (videos).

Loaded by loadgen/datasets/hf.py's ``load_hf_rows`` as upstream loads them: ``load_dataset(path,
name=--hf-subset, split=..., streaming=not --no-stream)``, then ``shuffle(seed)`` unless
--disable-shuffle; a local copy stands for a hub id with --hf-name. The split defaults to
upstream's (VisionArena ``train``, MMStar ``val``, MMVU ``validation``; LLaVA-OneVision has
none, so --hf-split names it), and only LLaVA-OneVision reads --hf-subset (upstream clears it
for the others). Each row becomes a text and one media part, sent after the text in the chat
message (``mm_contents``), as upstream's classes build them:

- LLaVA-OneVision (``MultiModalConversationDataset``): rows with two turns or more; the first
  turn is the prompt, the second's token count (special tokens in) the output length, rows
  outside ShareGPT's length limits skipped unless --hf-output-len is given; its ``image``.
- VisionArena (``VisionArenaDataset``): the first turn's first message and the row's first
  image; MMStar (``MMStarDataset``): the question up to "Options:", stripped, and its image.
  Both ask for --hf-output-len (default 128).
- MMVU (``MMVUDataset``): the question, a space, then the choices as ``K.V`` joined by spaces;
  the ``video`` URL's hub root (``https://huggingface.co/datasets/<id>/resolve/main``) replaced
  by the local copy (--dataset-path when it is a directory, else the Hugging Face cache's
  snapshot of the hub id, read offline), sent as a ``file://`` URL as upstream sends it (the
  server reads it: vLLM's --allowed-local-media-path). A video missing from the copy exits 1
  naming it. --hf-output-len, default 128.

An image goes out as upstream's ``process_image`` makes it: RGB (transparency over white),
JPEG, in a ``data:image/jpeg;base64`` URL; a string is a URL, or a path sent as ``file://``.
``prompt_len`` counts the text with the tokenizer's special tokens. Too few rows are topped up
as upstream's ``maybe_oversample_requests``.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import os
from collections.abc import Callable, Iterable
from typing import Any

from loadgen.datasets.media import VIDEO_SCHEMES, rgb_image, url_part
from loadgen.datasets.sampled_prompts import SampledPrompts, top_up
from loadgen.datasets.sharegpt import is_valid_sequence
from loadgen.text.tokenizer import TokenCodec

Part = dict[str, Any]

LLAVA_PATHS = ("lmms-lab/LLaVA-OneVision-Data",)
VISION_ARENA_PROMPTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "lmarena-ai/VisionArena-Chat": lambda row: row["conversation"][0][0]["content"],
    "lmarena-ai/vision-arena-bench-v0.1": lambda row: row["turns"][0][0]["content"],
}
VISION_ARENA_PATHS = tuple(VISION_ARENA_PROMPTS)
MMSTAR_PATHS = ("Lin-Chen/MMStar",)
MMVU_PATHS = ("yale-nlp/MMVU",)
MULTIMODAL_PATHS = (*LLAVA_PATHS, *VISION_ARENA_PATHS, *MMSTAR_PATHS, *MMVU_PATHS)
# Upstream's IS_MULTIMODAL datasets, refused on a backend that sends no images (MMVUDataset
# does not set it: on a completions backend upstream sends its text alone).
IMAGE_PATHS = (*LLAVA_PATHS, *VISION_ARENA_PATHS, *MMSTAR_PATHS)
MULTIMODAL_BACKENDS = ("openai-audio", "openai-chat")  # sorted, as upstream's message lists them
MM_OUTPUT_LEN = 128  # upstream's DEFAULT_OUTPUT_LEN for VisionArena, MMStar and MMVU
MM_SPLITS = {
    **dict.fromkeys(VISION_ARENA_PATHS, "train"),
    **dict.fromkeys(MMSTAR_PATHS, "val"),
    **dict.fromkeys(MMVU_PATHS, "validation"),
}


def multimodal_backend_problem(backend: str, hub_ids: tuple[str, ...]) -> str | None:
    """Upstream's refusal of an image dataset on a backend that cannot send it, or None."""
    if not set(hub_ids) & set(IMAGE_PATHS):
        return None
    if backend in MULTIMODAL_BACKENDS or "embeddings-" in backend:
        return None
    return (
        f"Multi-modal content is not supported on backend {backend!r}; use one of "
        f"{list(MULTIMODAL_BACKENDS)}."
    )


def mmvu_root(path: str, hub_id: str) -> str:
    """Where MMVU's videos are read: --dataset-path when it is a directory, else the hub id's
    snapshot in the Hugging Face cache (offline)."""
    if os.path.isdir(path):
        return os.path.abspath(path)
    from huggingface_hub import snapshot_download  # installed with the datasets library
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(hub_id, repo_type="dataset", local_files_only=True)
    except LocalEntryNotFoundError:
        raise ValueError(
            f"the videos of {hub_id} are read from a local copy: none in the Hugging Face cache "
            f"(`huggingface-cli download {hub_id} --repo-type dataset`, or give the copy's "
            f"directory as --dataset-path with --hf-name {hub_id})"
        ) from None


def mm_prompt(hub_id: str, row: dict[str, Any]) -> str:
    """The text upstream's class takes from a row."""
    if hub_id in LLAVA_PATHS:
        return row["conversations"][0]["value"]
    if hub_id in VISION_ARENA_PATHS:
        return VISION_ARENA_PROMPTS[hub_id](row)
    if hub_id in MMSTAR_PATHS:
        return row.get("question", "").split("Options:", 1)[0].strip()
    choices = " ".join(f"{key}.{value}" for key, value in row["choices"].items())
    return row["question"] + " " + choices


def image_part(image: Any) -> Part:
    """An image as upstream's ``process_image`` sends it (see the module docstring)."""
    if isinstance(image, str):
        return url_part(image)
    from PIL import Image  # the [mm] extra

    if isinstance(image, dict) and "bytes" in image:
        image = Image.open(io.BytesIO(image["bytes"]))
    if isinstance(image, Image.Image):
        with io.BytesIO() as jpeg:
            rgb_image(image).save(jpeg, format="JPEG")
            data = base64.b64encode(jpeg.getvalue()).decode("utf-8")
        return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}
    raise ValueError(
        f"an image must be a decoded image, raw bytes or a URL or path; got {type(image).__name__}"
    )


def video_part(video: Any, remote_root: str, local_root: str) -> Part:
    """An MMVU video as upstream's ``process_video`` sends it, its hub URL made local."""
    if isinstance(video, dict) and "bytes" in video:
        data = base64.b64encode(video["bytes"]).decode("utf-8")
        return {"type": "video_url", "video_url": {"url": f"data:video/mp4;base64,{data}"}}
    if not isinstance(video, str):
        raise ValueError(f"a video must be a URL or a path; got {type(video).__name__}")
    video = video.replace(remote_root, local_root)
    if not video.startswith(VIDEO_SCHEMES) and not os.path.isfile(video):
        raise ValueError(f"the video {video} is not in the local copy {local_root}")
    return url_part(video, "video")


def sample_mm_requests(
    rows: Iterable[dict[str, Any]],
    hub_id: str,
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int | None,
    seed: int,
    no_oversample: bool = False,
    video_root: str | None = None,
) -> SampledPrompts:
    """Upstream's sampling of one of these datasets (see the module docstring); ``video_root``
    is MMVU's local copy."""
    if hub_id not in MULTIMODAL_PATHS:
        raise ValueError(f"Unsupported dataset path: {hub_id}")
    specials = tokenizer.num_special_tokens
    remote_root = f"https://huggingface.co/datasets/{hub_id}/resolve/main"
    fixed = output_len if output_len is not None or hub_id in LLAVA_PATHS else MM_OUTPUT_LEN
    prompts: list[tuple[str, list[Part]]] = []  # (text, its media)
    lens: list[int] = []
    outputs: list[int] = []
    for row in rows:
        if len(prompts) >= num_requests:
            break
        text = mm_prompt(hub_id, row)
        prompt_len = len(tokenizer.encode_batch([text])[0]) + specials
        wanted = fixed
        if wanted is None:  # LLaVA-OneVision: the second turn's length, within the limits
            completion = row["conversations"][1]["value"]
            wanted = len(tokenizer.encode_batch([completion])[0]) + specials
            if not is_valid_sequence(prompt_len, wanted, False):
                continue
        if hub_id in MMVU_PATHS:
            assert video_root is not None
            media = [video_part(row["video"], remote_root, video_root)]
        elif hub_id in VISION_ARENA_PATHS:
            media = [image_part(row["images"][0])]
        elif hub_id in LLAVA_PATHS and "image" not in row:
            media = []
        else:
            media = [image_part(row["image"])]
        prompts.append((text, media))
        lens.append(prompt_len)
        outputs.append(wanted)
    if not prompts and num_requests > 0:
        raise ValueError("no row of the dataset was kept")
    if not no_oversample:
        prompts, outputs, lens = top_up(prompts, outputs, lens, num_requests, seed)
    sampled = SampledPrompts.of([text for text, _ in prompts], lens, outputs)
    return dataclasses.replace(sampled, mm_contents=[media for _, media in prompts])
