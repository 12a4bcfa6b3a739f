"""End to end: random-mm's videos and custom_image's images through the real CLI, real workers
and the mock, on the chat backend and the -clip, -vlm2vec and Infinity embedding backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import only_json, refusal, run_in_process

pytest.importorskip("cv2")  # the [mm] extra, installed by the test extra

IMAGE = "data:image/png;base64,iVBORw0KGgo="  # sent as given; the mock does not decode it
TEXTS = [f"Describe picture {i}" for i in range(4)]


def run(tmp_path: Path, backend: str, endpoint: str, *args: str) -> dict:
    proc = run_in_process(
        "--mock", "--backend", backend, "--endpoint", endpoint, "--num-prompts", "4",
        "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path / backend), *args,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return only_json(tmp_path / backend)


def test_random_mm_sends_videos_within_their_limit(tmp_path: Path) -> None:
    result = run(
        tmp_path, "openai-chat", "/v1/chat/completions", "--dataset-name", "random-mm",
        "--random-input-len", "16", "--random-output-len", "3",
        "--random-mm-base-items-per-request", "2",
        "--random-mm-limit-mm-per-prompt", '{"image": 1, "video": 1}',
        "--random-mm-bucket-config", "{(16, 16, 1): 0.5, (16, 24, 4): 0.5}",
    )  # fmt: skip
    assert (result["completed"], result["failed"]) == (4, 0)
    too_many = refusal(
        "--mock", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--dataset-name", "random-mm", "--random-mm-limit-mm-per-prompt", '{"image": 1}',
        "--random-mm-bucket-config", "{(16, 24, 4): 1.0}", "--disable-tqdm",
    )  # fmt: skip
    assert too_many.returncode == 2
    assert "Modality video is not in limit_mm_per_prompt" in too_many.stderr


@pytest.fixture
def images(tmp_path: Path) -> Path:
    rows = [{"prompt": text, "image_files": [IMAGE]} for text in TEXTS]
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "i.jsonl"


CUSTOM = ("--dataset-name", "custom_image", "--disable-shuffle")


@pytest.mark.parametrize("backend", ["openai-embeddings-clip", "openai-embeddings-vlm2vec"])
def test_clip_and_vlm2vec_send_image_messages(tmp_path: Path, images, backend: str) -> None:
    # Their bodies are checked part by part in tests/unit/loadgen/test_mm_embeddings.py; here the
    # mock reads each message and answers it.
    result = run(tmp_path, backend, "/v1/embeddings", *CUSTOM, "--dataset-path", str(images))
    assert result["completed"] == 4


def test_infinity_clip_sends_the_image_url(tmp_path: Path, images) -> None:
    result = run(
        tmp_path, "infinity-embeddings-clip", "/v1/embeddings", *CUSTOM, "--dataset-path",
        str(images),
    )  # fmt: skip
    assert result["completed"] == 4
    two = tmp_path / "two.jsonl"
    two.write_text(json.dumps({"prompt": "p", "image_files": [IMAGE, IMAGE]}) + "\n")
    refused = run_in_process(
        "--mock", "--backend", "infinity-embeddings-clip", "--endpoint", "/v1/embeddings",
        "--dataset-name", "custom_image", "--dataset-path", str(two), "--num-prompts", "1",
        "--disable-tqdm",
    )  # fmt: skip
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert (
        f"{two}: --backend infinity-embeddings-clip sends one image per request; request 0 "
        "has 2" in refused.stderr
    )
