"""vLLM's ``custom_audio`` dataset: a JSONL file of ``{prompt, audio, output_tokens?}`` lines.

Upstream's ``CustomAudioDataset``: ``audio`` is a path to an audio file; lines are shuffled
and topped up as ``custom``'s are, and every request asks for --custom-output-len (-1: each
line's ``output_tokens``). For Whisper-style models (``--backend openai-audio``) the clip is
decoded and uploaded again as a 16-bit PCM ``audio.wav``; with --enable-multimodal-chat
(``--backend openai-chat``, Qwen2-Audio and such) the same WAV goes base64 in an
``input_audio`` part after the prompt's text. ``prompt_len`` counts the prompt with special
tokens. Differs: upstream renders the prompt with the tokenizer's chat template, when it has
one, before it counts it (the prompt is not sent to the audio API); here it is counted as
written. Audio files are read as WAV (loadgen/audio.py).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from loadgen.audio import AudioClip, read_audio_file, reencoded_clip
from loadgen.datasets.custom import row_output_len
from loadgen.datasets.errors import file_errors
from loadgen.datasets.jsonl import json_lines
from loadgen.datasets.sampled_prompts import SampledPrompts, chosen_rows, top_up
from loadgen.text.tokenizer import TokenCodec


def load_custom_audio_rows(path: str) -> list[dict[str, Any]]:
    """The lines of the file, each with a string ``prompt`` and an ``audio`` path."""
    if not path.endswith(".jsonl"):
        raise ValueError(f"--dataset-path {path}: --dataset-name custom_audio reads .jsonl files")
    rows = []
    for number, row in json_lines(path):
        if not isinstance(row, dict) or not isinstance(row.get("audio"), str):
            raise ValueError(f'{path}:{number}: each line needs "audio", a path to a WAV file')
        if not isinstance(row.get("prompt", ""), str):
            raise ValueError(f'{path}:{number}: "prompt" must be a string')
        rows.append(row)
    if not rows:
        raise ValueError(f"--dataset-path {path}: the file has no lines")
    return rows


def input_audio_part(clip: AudioClip) -> dict[str, Any]:
    """A clip as a chat message's ``input_audio`` part (base64 WAV), as upstream sends it."""
    data = base64.b64encode(clip.data).decode("ascii")
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


def sample_custom_audio_requests(
    rows: list[dict[str, Any]],
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int,
    seed: int,
    disable_shuffle: bool = False,
    no_oversample: bool = False,
    multimodal_chat: bool = False,
) -> SampledPrompts:
    """Upstream's custom_audio sampling (see the module docstring): each request's clip in
    ``audios``, or with ``multimodal_chat`` its ``input_audio`` part in ``mm_contents``."""
    picked: list[tuple[str, AudioClip]] = []
    outputs: list[int] = []
    for row in chosen_rows(rows, num_requests, seed, disable_shuffle):
        picked.append((row.get("prompt", ""), reencoded_clip(read_audio_file(row["audio"]))))
        outputs.append(row_output_len(row, output_len, f"the audio {row['audio']!r}"))
    texts = [prompt for prompt, _ in picked]
    lens = [len(ids) + tokenizer.num_special_tokens for ids in tokenizer.encode_batch(texts)]
    if not no_oversample:
        picked, outputs, lens = top_up(picked, outputs, lens, num_requests, seed)
    sampled = SampledPrompts.of([prompt for prompt, _ in picked], lens, outputs)
    clips = [clip for _, clip in picked]
    if multimodal_chat:
        return dataclasses.replace(sampled, mm_contents=[[input_audio_part(c)] for c in clips])
    return dataclasses.replace(sampled, audios=clips)


def sample_custom_audio(
    rows: list[dict[str, Any]],
    path: str,
    tokenizer: TokenCodec,
    num_prompts: int,
    custom_output_len: int,
    seed: int,
    disable_shuffle: bool,
    no_oversample: bool,
    enable_multimodal_chat: bool,
) -> SampledPrompts:
    """The ``custom_audio`` dataset from the file's rows and its flags."""
    with file_errors(path):
        return sample_custom_audio_requests(
            rows,
            tokenizer,
            num_prompts,
            custom_output_len,
            seed,
            disable_shuffle,
            no_oversample,
            enable_multimodal_chat,
        )
