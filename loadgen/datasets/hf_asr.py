"""vLLM's hf ASR datasets (``ASRDataset``): speech clips for ``--backend openai-audio``.

Loaded as upstream loads them: ``load_dataset(path, name=--hf-subset, split=--hf-split or
"train", streaming=not --no-stream)``, then ``shuffle(seed)`` unless --disable-shuffle; a local
copy (a directory of parquet files, or a saved dataset) stands for a hub id with --hf-name.
The ``audio`` column is read undecoded (``Audio(decode=False)``, as upstream does for
LibriSpeech and Earnings22): a row's embedded bytes are decoded and uploaded again as a 16-bit
PCM ``audio.wav``, which is what upstream uploads for a decoded row too; a row that has only a
path sends that file as it is. Rows are taken in order; a clip shorter than
--asr-min-audio-len-sec or longer than --asr-max-audio-len-sec is skipped (and counted), until
--num-prompts are kept, then topped up as upstream's ``maybe_oversample_requests``. Every
request asks for --hf-output-len (default 1024). The prompt (counted, never sent to the audio
API) is Whisper's ``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` or Cohere
ASR's control tokens when the tokenizer knows them as single tokens, else empty (upstream
decides by the tokenizer's name).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from loadgen.audio import AudioClip, decoded_clip, file_clip, reencoded_clip
from loadgen.datasets.sampled_prompts import SampledPrompts, top_up
from loadgen.text.tokenizer import TokenCodec

ASR_PATHS = (
    "openslr/librispeech_asr",
    "facebook/voxpopuli",
    "LIUM/tedlium",
    "edinburghcstr/ami",
    "speechcolab/gigaspeech",
    "kensho/spgispeech",
    "ArtificialAnalysis/Earnings22-Cleaned-AA",
    "D4nt3/esb-datasets-earnings22-validation-tiny-filtered",
)
ASR_OUTPUT_LEN = 1024
ASR_SPLIT = "train"
WHISPER_PROMPT = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
COHERE_PROMPT = (
    "<|startofcontext|><|startoftranscript|><|emo:undefined|><|en|><|en|><|pnc|><|noitn|>"
    "<|notimestamp|><|nodiarize|>"
)


def load_asr_rows(
    path: str, subset: str | None, split: str | None, streaming: bool, seed: int, shuffle: bool
) -> Iterable[dict[str, Any]]:
    """The rows in upstream's order, their audio undecoded."""
    from datasets import Audio, load_dataset  # the [hf] extra

    data = load_dataset(
        path, name=subset, split=split if split is not None else ASR_SPLIT, streaming=streaming
    )
    if shuffle:
        data = data.shuffle(seed=seed)
    return data.cast_column("audio", Audio(decode=False))


def asr_prompt(tokenizer: TokenCodec) -> str:
    """Whisper's or Cohere ASR's decoder prompt when the tokenizer has their tokens, else ''."""
    first = ("<|startoftranscript|>", "<|startofcontext|>")
    single = [len(ids) == 1 for ids in tokenizer.encode_batch(list(first))]
    if single[1]:
        return COHERE_PROMPT
    return WHISPER_PROMPT if single[0] else ""


def row_clip(audio: Any) -> AudioClip:
    """A row's ``audio`` as the upload upstream makes of it (see the module docstring)."""
    if isinstance(audio, dict) and "array" in audio and "sampling_rate" in audio:
        return decoded_clip(audio["array"], int(audio["sampling_rate"]))
    if isinstance(audio, str):
        return file_clip(audio)
    if isinstance(audio, dict) and audio.get("bytes") is not None:
        return reencoded_clip(audio["bytes"])
    if isinstance(audio, dict) and audio.get("path"):
        return file_clip(audio["path"])
    raise ValueError(
        "ASR samples must provide decoded audio arrays, embedded audio bytes, or a local "
        "audio path."
    )


def sample_asr_requests(
    rows: Iterable[dict[str, Any]],
    tokenizer: TokenCodec,
    num_requests: int,
    output_len: int | None,
    seed: int,
    no_oversample: bool = False,
    min_len_s: float = 0.0,
    max_len_s: float = math.inf,
) -> SampledPrompts:
    """Upstream's ASR sampling (see the module docstring); ``max_len_s`` 0 is no bound, as
    upstream reads it."""
    max_len_s = max_len_s or math.inf
    prompt = asr_prompt(tokenizer)
    prompt_len = len(tokenizer.encode_batch([prompt])[0]) + tokenizer.num_special_tokens
    wanted = output_len if output_len is not None else ASR_OUTPUT_LEN
    clips: list[AudioClip] = []
    skipped = 0
    for row in rows:
        if len(clips) >= num_requests:
            break
        clip = row_clip(row["audio"])
        if clip.duration_s < min_len_s or clip.duration_s > max_len_s:
            skipped += 1
            continue
        clips.append(clip)
    if not clips and skipped:
        raise ValueError(
            f"all {skipped} clips read are outside --asr-min-audio-len-sec {min_len_s} and "
            f"--asr-max-audio-len-sec {max_len_s}"
        )
    outputs = [wanted] * len(clips)
    lens = [prompt_len] * len(clips)
    if not no_oversample:
        clips, outputs, lens = top_up(clips, outputs, lens, num_requests, seed)
    sampled = SampledPrompts.of([prompt] * len(clips), lens, outputs)
    return dataclasses.replace(sampled, audios=clips)
