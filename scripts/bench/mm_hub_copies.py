"""Local copies of the multimodal hub datasets for dataset_parity.py's ``hf-mm`` cases.

Each copy is a directory named after its hub id (``/`` as ``_``): a parquet file in the hub
dataset's columns, its image columns HF's Image feature ({bytes, path}: RGB, RGBA with
transparency, grayscale and palette PNGs of a few sizes), and a README whose ``configs`` names
the split, as the hub repositories do. MMVU's rows point at the hub's video URLs; the copy
holds those videos under ``videos/`` (small MP4s written by OpenCV).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

MMVU_ROOT = "https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main"
ROWS = 300


def _png(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """An image as HF's Image feature stores it; the mode and size change with ``index``."""
    from PIL import Image

    height, width = 8 + index % 7 * 5, 10 + index % 5 * 7
    mode = ("RGB", "RGBA", "L", "P")[index % 4]
    if mode == "RGBA":
        image = Image.fromarray(rng.integers(0, 256, (height, width, 4), dtype=np.uint8), mode)
    elif mode == "L":
        image = Image.fromarray(rng.integers(0, 256, (height, width), dtype=np.uint8), mode)
    else:
        image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        if mode == "P":
            image = image.convert("P")
            image.info["transparency"] = 0
    with io.BytesIO() as out:
        image.save(out, "PNG")
        return {"bytes": out.getvalue(), "path": f"{index}.png"}


def _mp4(path: Path, frames: int) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (32, 24))
    for value in range(frames):
        writer.write(np.full((24, 32, 3), 40 * value % 256, dtype=np.uint8))
    writer.release()


def write_hub_copy(folder: Path, split: str, rows: list[dict], images: dict[str, Any]) -> Path:
    """A local parquet copy of a hub dataset, ``images`` its columns cast to HF's Image feature,
    with the README that names its split (the tests write their copies with it too)."""
    from datasets import Dataset

    folder.mkdir(parents=True, exist_ok=True)
    table = Dataset.from_list(rows)
    for column, feature in images.items():
        table = table.cast_column(column, feature)
    table.to_parquet(str(folder / "data.parquet"))
    (folder / "README.md").write_text(
        f"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: {split}\n"
        "    path: data.parquet\n---\n"
    )
    return folder


def write_mm_copies(directory: Path, entries: list[dict]) -> None:
    """The five copies, their texts taken from ShareGPT ``entries`` (at least ROWS of them)."""
    from datasets import Image, List

    rng = np.random.default_rng(0)
    turns = [(e["conversations"][0]["value"], e["conversations"][1]["value"]) for e in entries]
    turns = turns[:ROWS]
    llava = [
        {"conversations": [{"from": "human", "value": f"<image>\n{p}"}, {"from": "gpt", "value": c}]
         [: 1 + (i % 9 > 0)], "image": _png(rng, i)}
        for i, (p, c) in enumerate(turns)
    ]  # fmt: skip
    write_hub_copy(directory / "lmms-lab_LLaVA-OneVision-Data", "train", llava, {"image": Image()})
    arena = [
        {"conversation": [[{"role": "user", "content": p}, {"role": "assistant", "content": c}]],
         "images": [_png(rng, i), _png(rng, i + 1)][: 1 + i % 2]}
        for i, (p, c) in enumerate(turns)
    ]  # fmt: skip
    arena_dir = directory / "lmarena-ai_VisionArena-Chat"
    write_hub_copy(arena_dir, "train", arena, {"images": List(Image())})
    bench = [
        {"turns": [[{"role": "user", "content": p[:500]}]], "images": [_png(rng, i)]}
        for i, (p, _) in enumerate(turns)
    ]
    write_hub_copy(directory / "lmarena-ai_vision-arena-bench-v0.1", "train", bench,
           {"images": List(Image())})  # fmt: skip
    mmstar = [
        {"question": f"{p[:300]}\nOptions: A: {c[:20]}, B: {c[20:40]}", "image": _png(rng, i)}
        for i, (p, c) in enumerate(turns)
    ]
    write_hub_copy(directory / "Lin-Chen_MMStar", "val", mmstar, {"image": Image()})
    mmvu_dir = directory / "yale-nlp_MMVU"
    for subject, frames in (("Art", 3), ("Biology", 5), ("Chemistry", 8)):
        _mp4(mmvu_dir / "videos" / subject / "0.mp4", frames)
    mmvu = [
        {"question": p[:400],
         "choices": {"A": c[:30], "B": c[30:60], "C": c[60:90] or None},
         "video": f"{MMVU_ROOT}/videos/{('Art', 'Biology', 'Chemistry')[i % 3]}/0.mp4"}
        for i, (p, c) in enumerate(turns)
    ]  # fmt: skip
    write_hub_copy(mmvu_dir, "validation", mmvu, {})
