"""Which flags the audio backend and datasets need together, as one-line refusals."""

from __future__ import annotations

from loadgen.audio_payloads import AUDIO_BACKEND
from loadgen.datasets.registry import ASR_PATHS

SAMPLING_FLAGS = (
    "--top-p", "--top-k", "--min-p", "--temperature", "--frequency-penalty",
    "--presence-penalty", "--repetition-penalty",
)  # fmt: skip


def audio_problem(
    backend: str,
    dataset_name: str,
    hf_paths: tuple[str, ...] | None,
    enable_multimodal_chat: bool,
    given: frozenset[str] | set[str],
) -> str | None:
    """Why these flags cannot make an audio run, or None. ``hf_paths`` is the hf family's
    hub ids (None for another dataset)."""
    asr = hf_paths == ASR_PATHS
    if backend == AUDIO_BACKEND:
        if dataset_name != "custom_audio" and not asr:
            return (
                f"--backend {AUDIO_BACKEND} uploads audio: use --dataset-name custom_audio or "
                f"an hf ASR dataset, not {dataset_name}"
            )
        if sampled := [flag for flag in SAMPLING_FLAGS if flag in given]:
            return (
                f"{sampled[0]}: Sampling parameters are only supported by openai-compatible "
                f"backends (not --backend {AUDIO_BACKEND}), as vllm bench serve"
            )
        return None
    if asr:
        return f"the hf ASR datasets need --backend {AUDIO_BACKEND}, not {backend}"
    if dataset_name == "custom_audio" and not (backend == "openai-chat" and enable_multimodal_chat):
        return (
            f"--dataset-name custom_audio needs --backend {AUDIO_BACKEND}, or --backend "
            f"openai-chat with --enable-multimodal-chat; got --backend {backend}"
        )
    return None
