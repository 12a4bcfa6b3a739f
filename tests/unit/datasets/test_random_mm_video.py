"""random-mm's video buckets: random frames encoded as MP4 by OpenCV, sent as ``video_url``."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.datasets.random_mm import sample_random_mm_requests, synthetic_video_part

cv2 = pytest.importorskip("cv2")  # the [mm] extra, installed by the test extra

VIDEO_BUCKETS = "{(16, 24, 3): 0.5, (8, 8, 1): 0.5}"


def frames_of(part: dict, tmp_path: Path) -> list[np.ndarray]:
    url = part["video_url"]["url"]
    assert part["type"] == "video_url" and url.startswith("data:video/mp4;base64,")
    (tmp_path / "v.mp4").write_bytes(base64.b64decode(url.split(",", 1)[1]))
    capture = cv2.VideoCapture(str(tmp_path / "v.mp4"))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def test_a_video_is_an_mp4_of_its_frames_size_and_count(tmp_path: Path) -> None:
    part = synthetic_video_part(np.random.default_rng(0), width=24, height=16, frames=3)
    frames = frames_of(part, tmp_path)
    assert len(frames) == 3 and {f.shape for f in frames} == {(16, 24, 3)}
    again = synthetic_video_part(np.random.default_rng(0), width=24, height=16, frames=3)
    assert again == part  # the same seed, the same bytes


def test_requests_mix_images_and_videos_within_the_limits(tok) -> None:
    buckets = {(16, 24, 3): 0.5, (8, 8, 1): 0.5}
    limits = {"image": 2, "video": 1}
    ds = sample_random_mm_requests(tok, 12, 16, 4, 0, (0.0, 0.0), 1, 3, 1.0, limits, buckets)
    assert ds.mm_contents is not None
    kinds = [[part["type"] for part in parts] for parts in ds.mm_contents]
    assert all(k.count("video_url") <= 1 and k.count("image_url") <= 2 for k in kinds)
    assert any("video_url" in k for k in kinds) and any("image_url" in k for k in kinds)
    again = sample_random_mm_requests(tok, 12, 16, 4, 0, (0.0, 0.0), 1, 3, 1.0, limits, buckets)
    assert again.mm_contents == ds.mm_contents and again.prompts == ds.prompts


def test_video_buckets_validate_and_name_opencv_when_missing(monkeypatch) -> None:
    config = RunConfig(
        dataset_name="random-mm", backend="openai-chat", random_mm_bucket_config=VIDEO_BUCKETS
    )
    config.validate()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"video buckets \(frames > 1\) need OpenCV"):
        config.validate()
    # A video bucket that cannot be drawn (probability 0, or a limit of 0) needs no OpenCV.
    RunConfig(dataset_name="random-mm", backend="openai-chat").validate()
    RunConfig(
        dataset_name="random-mm", backend="openai-chat", random_mm_bucket_config=VIDEO_BUCKETS,
        random_mm_limit_mm_per_prompt='{"image": 2, "video": 0}',
    ).validate()  # fmt: skip
