"""End to end: the multimodal hub datasets (LLaVA-OneVision, VisionArena, MMStar, MMVU) from
local copies, through the real CLI (in process), real workers and the mock's chat endpoint; the
refusals."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import only_json, refusal, run_in_process, write_hub_copy

datasets = pytest.importorskip("datasets")  # the [hf] extra
Image = pytest.importorskip("PIL.Image")  # the [mm] extra
cv2 = pytest.importorskip("cv2")

CHAT = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
MMVU_ROOT = "https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main"


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub: a local copy or nothing. HF_HUB_OFFLINE=1, and the flags the hub's clients set
    from it when they were imported (in this process, before the test)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def png(seed: int) -> dict[str, Any]:
    """An image as HF's Image feature stores it."""
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    with io.BytesIO() as out:
        Image.fromarray(pixels).save(out, "PNG")
        return {"bytes": out.getvalue(), "path": f"{seed}.png"}


def mp4(path: Path) -> None:
    """A tiny MP4 (mp4v, 30 fps) written by OpenCV, as random-mm's videos are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (32, 32))
    assert writer.isOpened()
    for value in range(4):
        writer.write(np.full((32, 32, 3), 60 * value, dtype=np.uint8))
    writer.release()


def llava(folder: Path) -> Path:
    turns = [{"from": "human", "value": "<image>\nDescribe the picture, please."},
             {"from": "gpt", "value": "It shows a few colored squares in a grid."}]  # fmt: skip
    rows = [{"conversations": turns, "image": png(i)} for i in range(4)]
    return write_hub_copy(folder, "train", rows, {"image": datasets.Image()})


def vision_arena(folder: Path) -> Path:
    rows = [
        {"conversation": [[{"role": "user", "content": f"What is shown in {i}?"}]],
         "images": [png(i)]}
        for i in range(4)
    ]  # fmt: skip
    return write_hub_copy(folder, "train", rows, {"images": datasets.List(datasets.Image())})


def mmstar(folder: Path) -> Path:
    rows = [{"question": f"Which is {i}?\nOptions: A: x", "image": png(i)} for i in range(4)]
    return write_hub_copy(folder, "val", rows, {"image": datasets.Image()})


def mmvu(folder: Path) -> Path:
    mp4(folder / "videos" / "Art" / "0.mp4")
    rows = [
        {"question": f"What happens in {i}?", "choices": {"A": "up", "B": "down"},
         "video": f"{MMVU_ROOT}/videos/Art/0.mp4"}
        for i in range(4)
    ]  # fmt: skip
    return write_hub_copy(folder, "validation", rows, {})


COPIES = {
    "lmms-lab/LLaVA-OneVision-Data": (llava, ["--hf-split", "train"]),
    "lmarena-ai/VisionArena-Chat": (vision_arena, []),
    "Lin-Chen/MMStar": (mmstar, []),
    "yale-nlp/MMVU": (mmvu, []),
}


@pytest.mark.parametrize("hub_id", list(COPIES))
def test_each_dataset_runs_from_a_local_copy(tmp_path: Path, hub_id: str) -> None:
    write, flags = COPIES[hub_id]
    copy = write(tmp_path / "copy")
    proc = run_in_process(
        "--mock", *CHAT, "--dataset-name", "hf", "--dataset-path", str(copy), "--hf-name",
        hub_id, *flags, "--num-prompts", "6", "--hf-output-len", "5", "--disable-tqdm",
        "--save-result", "--result-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["completed"], result["failed"], result["total_output_tokens"]) == (6, 0, 30)


@pytest.mark.parametrize("hub_id", list(COPIES))
def test_the_wrong_backend_and_a_missing_copy_are_refused(tmp_path: Path, hub_id: str) -> None:
    write, flags = COPIES[hub_id]
    copy = write(tmp_path / "copy")
    hf = ["--dataset-name", "hf", "--hf-name", hub_id, *flags, "--num-prompts", "2"]
    if hub_id == "yale-nlp/MMVU":  # upstream's MMVUDataset is not marked multimodal
        backend = ["--backend", "openai-audio"]
        refused = "--backend openai-audio uploads audio"
        (copy / "videos" / "Art" / "0.mp4").unlink()
        missing = f"the video {copy}/videos/Art/0.mp4 is not in the local copy"
        gone = copy
    else:
        backend = ["--backend", "openai"]
        refused = (
            "Multi-modal content is not supported on backend 'openai'; use one of "
            "['openai-audio', 'openai-chat']."
        )
        missing = "Couldn't find any data file"
        gone = tmp_path / "nowhere"
    wrong = refusal("--mock", *backend, *hf, "--dataset-path", str(copy))
    assert wrong.returncode == 2 and refused in wrong.stderr, wrong.stderr
    lost = run_in_process("--mock", *CHAT, *hf, "--dataset-path", str(gone))
    assert lost.returncode == 1 and missing in lost.stderr, lost.stderr
    assert "Traceback" not in wrong.stderr + lost.stderr
