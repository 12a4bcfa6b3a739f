"""vLLM's multimodal ``hf`` datasets (LLaVA-OneVision, VisionArena, MMStar, MMVU), sampled from
in-memory rows and from local parquet copies whose image columns are HF's Image feature."""

from __future__ import annotations

import base64
import io
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import write_hub_copy

from loadgen.datasets.hf import find_hf_dataset, load_hf_rows
from loadgen.datasets.hf_multimodal import (
    image_part,
    mmvu_root,
    multimodal_backend_problem,
    sample_mm_requests,
    video_part,
)

PIL = pytest.importorskip("PIL.Image")  # the [mm] extra

VISION_ARENA = "lmarena-ai/VisionArena-Chat"
MMVU_ROOT = "https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main"


def picture(seed: int, mode: str = "RGB") -> Any:
    """A small random image of the given mode."""
    rng = np.random.default_rng(seed)
    shape = {"RGB": (6, 10, 3), "RGBA": (6, 10, 4), "L": (6, 10)}[mode]
    return PIL.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)


def png(image: Any) -> bytes:
    with io.BytesIO() as out:
        image.save(out, "PNG")
        return out.getvalue()


def decoded(part: dict) -> Any:
    """The image a ``data:image/jpeg`` part carries."""
    url = part["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    return PIL.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def jpeg_url(image: Any) -> str:
    with io.BytesIO() as out:
        image.save(out, format="JPEG")
        return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()


def arena_rows(n: int) -> list[dict]:
    return [
        {
            "conversation": [[{"role": "user", "content": f"What is in picture {i}?"}]],
            "images": [picture(i), picture(100 + i)],
        }
        for i in range(n)
    ]


def test_each_hub_id_is_found_with_upstreams_split_and_never_templated() -> None:
    splits = {
        "lmms-lab/LLaVA-OneVision-Data": None,
        VISION_ARENA: "train",
        "lmarena-ai/vision-arena-bench-v0.1": "train",
        "Lin-Chen/MMStar": "val",
        "yale-nlp/MMVU": "validation",
    }
    for hub_id, split in splits.items():
        family = find_hf_dataset("/a/local/copy", hub_id)
        assert (family.split, family.templated) == (split, "never")
        assert find_hf_dataset(hub_id, None) is family


def test_images_go_out_as_upstreams_jpeg_data_urls() -> None:
    rgb = picture(0)
    assert image_part(rgb)["image_url"]["url"] == jpeg_url(rgb)
    assert image_part({"bytes": png(rgb), "path": "a.png"}) == image_part(rgb)
    assert image_part(picture(1, "L"))["image_url"]["url"] == jpeg_url(
        picture(1, "L").convert("RGB")
    )
    clear = PIL.new("RGBA", (8, 8), (10, 200, 30, 0))  # transparent: white shows through
    assert decoded(image_part(clear)).getpixel((4, 4)) == (255, 255, 255)
    assert image_part("/img/a.png") == {
        "type": "image_url",
        "image_url": {"url": "file:///img/a.png"},
    }
    url = "https://example.com/a.png"
    assert image_part(url)["image_url"]["url"] == url
    with pytest.raises(ValueError, match="an image must be"):
        image_part(None)


def test_vision_arena_sends_the_first_turn_and_first_image(tok) -> None:
    rows = arena_rows(4)
    ds = sample_mm_requests(rows, VISION_ARENA, tok, 4, None, 0)
    assert ds.prompts == [f"What is in picture {i}?" for i in range(4)]
    assert ds.prompt_lens.tolist() == [len(tok.encode_batch([p])[0]) + 1 for p in ds.prompts]
    assert ds.output_lens.tolist() == [128] * 4  # upstream's DEFAULT_OUTPUT_LEN
    assert ds.mm_contents == [[image_part(picture(i))] for i in range(4)]
    bench = [{"turns": [[{"content": "Describe it"}]], "images": [picture(7)]}]
    got = sample_mm_requests(bench, "lmarena-ai/vision-arena-bench-v0.1", tok, 1, 9, 0)
    assert (got.prompts, got.output_lens.tolist()) == (["Describe it"], [9])


def test_too_few_rows_are_topped_up_as_upstream_unless_no_oversample(tok) -> None:
    ds = sample_mm_requests(arena_rows(3), VISION_ARENA, tok, 8, 16, 5)
    rng = random.Random(5)
    picks = [rng.choice(range(3)) for _ in range(5)]
    assert ds.prompts == [f"What is in picture {i}?" for i in [0, 1, 2, *picks]]
    assert ds.mm_contents is not None and ds.mm_contents[3] == ds.mm_contents[picks[0]]
    kept = sample_mm_requests(arena_rows(3), VISION_ARENA, tok, 8, 16, 5, no_oversample=True)
    assert len(kept.prompts) == 3 and len(kept.mm_contents or []) == 3
    with pytest.raises(ValueError, match="no row of the dataset was kept"):
        sample_mm_requests([], VISION_ARENA, tok, 2, None, 0)


def test_mmstar_keeps_the_question_before_its_options(tok) -> None:
    rows = [{"question": f"  Which one is {i}?\nOptions: A: x, B: y", "image": picture(i)}
            for i in range(3)]  # fmt: skip
    ds = sample_mm_requests(rows, "Lin-Chen/MMStar", tok, 3, None, 0)
    assert ds.prompts == [f"Which one is {i}?" for i in range(3)]
    assert ds.mm_contents == [[image_part(picture(i))] for i in range(3)]


def test_llava_sizes_the_output_by_the_answer_within_the_limits(tok) -> None:
    def row(prompt: str, answer: str) -> dict:
        return {"conversations": [{"value": prompt}, {"value": answer}], "image": picture(3)}

    rows = [
        row("<image>\nDescribe the picture in detail.", "a " * 20),
        row("hi", "a " * 20),  # a prompt under 4 tokens
        row("<image>\nWhat color is it?", "x " * 3000),  # over 2048 tokens in all
        row("<image>\nCount the dots in it.", "three dots"),
    ]
    ds = sample_mm_requests(rows, "lmms-lab/LLaVA-OneVision-Data", tok, 2, None, 0)
    assert ds.prompts == [
        rows[0]["conversations"][0]["value"],
        rows[3]["conversations"][0]["value"],
    ]
    answers = ["a " * 20, "three dots"]
    assert ds.output_lens.tolist() == [len(tok.encode_batch([a])[0]) + 1 for a in answers]
    assert ds.mm_contents == [[image_part(picture(3))]] * 2
    fixed = sample_mm_requests(rows, "lmms-lab/LLaVA-OneVision-Data", tok, 4, 7, 0)
    assert len(fixed.prompts) == 4 and fixed.output_lens.tolist() == [7] * 4  # no filter
    text_only = [{"conversations": [{"value": "plain text prompt"}, {"value": "an answer"}]}]
    got = sample_mm_requests(text_only, "lmms-lab/LLaVA-OneVision-Data", tok, 1, None, 0)
    assert got.mm_contents == [[]]


def test_mmvu_videos_are_the_local_copys_files(tok, tmp_path: Path) -> None:
    (tmp_path / "videos" / "Art").mkdir(parents=True)
    (tmp_path / "videos" / "Art" / "1.mp4").write_bytes(b"not decoded")
    row = {
        "question": "What happens?",
        "choices": {"A": "it falls", "B": "it rises"},
        "video": f"{MMVU_ROOT}/videos/Art/1.mp4",
    }
    ds = sample_mm_requests([row], "yale-nlp/MMVU", tok, 2, None, 0, video_root=str(tmp_path))
    assert ds.prompts == ["What happens? A.it falls B.it rises"] * 2
    url = f"file://{tmp_path}/videos/Art/1.mp4"
    assert ds.mm_contents == [[{"type": "video_url", "video_url": {"url": url}}]] * 2
    assert ds.output_lens.tolist() == [128, 128]
    missing = dict(row, video=f"{MMVU_ROOT}/videos/Art/2.mp4")
    with pytest.raises(ValueError, match=f"the video {tmp_path}/videos/Art/2.mp4 is not in"):
        sample_mm_requests([missing], "yale-nlp/MMVU", tok, 1, None, 0, video_root=str(tmp_path))
    elsewhere = "https://example.com/v.mp4"
    assert video_part(elsewhere, MMVU_ROOT, str(tmp_path))["video_url"]["url"] == elsewhere
    assert video_part({"bytes": b"mp4"}, MMVU_ROOT, "/x")["video_url"]["url"] == (
        "data:video/mp4;base64," + base64.b64encode(b"mp4").decode()
    )


def test_mmvu_reads_a_directory_or_the_hub_cache(tmp_path: Path) -> None:
    assert mmvu_root(str(tmp_path), "yale-nlp/MMVU") == str(tmp_path)
    with pytest.raises(ValueError, match="none in the Hugging Face cache"):
        mmvu_root("nobody-has/this-dataset-cached", "nobody-has/this-dataset-cached")


def test_image_datasets_are_refused_on_backends_that_send_no_images() -> None:
    arena = find_hf_dataset(VISION_ARENA, None).paths
    assert multimodal_backend_problem("openai", arena) == (
        "Multi-modal content is not supported on backend 'openai'; use one of "
        "['openai-audio', 'openai-chat']."
    )
    for backend in ("openai-chat", "openai-embeddings-clip", "infinity-embeddings-clip"):
        assert multimodal_backend_problem(backend, arena) is None
    assert multimodal_backend_problem("infinity-embeddings", arena) is not None
    # Upstream's MMVUDataset is not marked multimodal: a completions backend sends its text.
    assert (
        multimodal_backend_problem("openai", find_hf_dataset("yale-nlp/MMVU", None).paths) is None
    )


def load_rows(path: str, hub_id: str, subset, split, streaming: bool, seed: int, shuffle: bool):
    """The rows as a run loads them (load_hf_rows with the family the hub id names)."""
    family = find_hf_dataset(path, hub_id)
    return load_hf_rows(path, family, subset, split, streaming, seed, not shuffle)


@pytest.mark.parametrize("streaming", [True, False])
def test_a_local_copy_loads_in_upstreams_order(tok, tmp_path: Path, streaming: bool) -> None:
    datasets = pytest.importorskip("datasets")
    modes = ("RGB", "RGBA", "L")
    rows = [
        {"question": f"Q{i}?Options: A", "image": {"bytes": png(picture(i, modes[i % 3]))}}
        for i in range(12)
    ]
    path = str(write_hub_copy(tmp_path / "mmstar", "val", rows, {"image": datasets.Image()}))
    data = load_rows(path, "Lin-Chen/MMStar", "ignored", None, streaming, 3, True)
    ds = sample_mm_requests(data, "Lin-Chen/MMStar", tok, 5, None, 3)
    order = [int(p[1:-1]) for p in ds.prompts]
    assert order != list(range(5))  # shuffled with the seed
    again = load_rows(path, "Lin-Chen/MMStar", None, "val", streaming, 3, True)
    assert [r["question"] for r in again][:5] == [f"Q{i}?Options: A" for i in order]
    assert ds.mm_contents == [[image_part(picture(i, modes[i % 3]))] for i in order]
    kept = load_rows(path, "Lin-Chen/MMStar", None, None, streaming, 3, False)
    assert [r["question"][:3] for r in kept][:3] == ["Q0?", "Q1?", "Q2?"]


def test_llava_needs_a_split_and_keeps_two_turn_rows(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [
        {"conversations": [{"from": "human", "value": f"p{i}"}] * (1 + i % 2),
         "image": {"bytes": png(picture(i))}}
        for i in range(6)
    ]  # fmt: skip
    path = str(write_hub_copy(tmp_path / "llava", "train", rows, {"image": datasets.Image()}))
    hub_id = "lmms-lab/LLaVA-OneVision-Data"
    with pytest.raises(ValueError, match="name the split with --hf-split"):
        load_rows(path, hub_id, None, None, True, 0, True)
    data = load_rows(path, hub_id, None, "train", True, 0, False)
    assert [r["conversations"][0]["value"] for r in data] == ["p1", "p3", "p5"]
