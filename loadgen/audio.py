"""Audio clips as the openai-audio backend uploads them, and WAV files read without libsndfile.

Upstream reads audio with soundfile and, for a decoded clip, writes it back as a 16-bit PCM
WAV (``soundfile.write(buffer, y, sr, format="WAV")``) named ``audio.wav`` with the content
type ``audio/wav``; a clip given as a file path (an hf ASR row's ``path``) goes as the file's
own bytes under its own name. Here WAV files (integer PCM of 8 to 32 bits, or IEEE float) are
read with numpy; other containers (FLAC, MP3) are refused by name. The duration
(``input_audio_duration``, which feeds RTFx) is the frame count over the sample rate.
"""

from __future__ import annotations

import io
import os
import struct
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np

WAV_NAME = "audio.wav"
WAV_TYPE = "audio/wav"
_PCM = 1
_FLOAT = 3
_EXTENSIBLE = 0xFFFE


class AudioError(ValueError):
    """Audio that cannot be read: names the file or the clip and why."""


@dataclass(frozen=True)
class AudioClip:
    """One request's upload: the file's bytes, its name and type, and its duration."""

    data: bytes
    filename: str
    content_type: str | None  # None: the form part goes without one (a file sent as it is)
    duration_s: float


@dataclass(frozen=True)
class WavFormat:
    """What a WAV header says: the sample format, channels, rate and where the samples are."""

    format_tag: int  # 1 PCM, 3 IEEE float
    channels: int
    sample_rate: int
    bits: int
    data_offset: int
    data_size: int

    @property
    def frames(self) -> int:
        """Sample frames in the data chunk."""
        return self.data_size // (self.channels * self.bits // 8)

    @property
    def duration_s(self) -> float:
        """The clip's length in seconds."""
        return self.frames / self.sample_rate


def wav_format(data: bytes) -> WavFormat:
    """The format of a RIFF/WAVE file's bytes, from its ``fmt`` and ``data`` chunks."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("not a WAV file (no RIFF/WAVE header)")
    fmt: tuple[int, int, int, int] | None = None
    at = 12
    while at + 8 <= len(data):
        chunk, size = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = at + 8
        if chunk == b"fmt ":
            if size < 16:
                raise AudioError("WAV fmt chunk too short")
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if tag == _EXTENSIBLE and size >= 26:
                tag = struct.unpack_from("<H", data, body + 24)[0]  # the sub-format's GUID head
            fmt = (tag, channels, rate, bits)
        elif chunk == b"data":
            if fmt is None:
                raise AudioError("WAV data chunk before its fmt chunk")
            tag, channels, rate, bits = fmt
            if tag not in (_PCM, _FLOAT) or channels < 1 or rate < 1 or bits % 8 or not bits:
                raise AudioError(f"unsupported WAV format (tag {tag}, {bits} bits)")
            # A streamed WAV may leave the size 0 or 0xFFFFFFFF: the data runs to the end.
            size = min(size, len(data) - body) if size else len(data) - body
            return WavFormat(tag, channels, rate, bits, body, size)
        at = body + size + (size & 1)
    raise AudioError("WAV file without a data chunk")


def wav_duration_s(data: bytes) -> float:
    """The duration of a WAV file's bytes, from its header."""
    return wav_format(data).duration_s


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """The samples (float64, frames x channels, in [-1, 1)) and rate of a WAV file's bytes."""
    fmt = wav_format(data)
    width = fmt.bits // 8
    raw = data[fmt.data_offset : fmt.data_offset + fmt.frames * fmt.channels * width]
    if fmt.format_tag == _FLOAT:
        if width not in (4, 8):
            raise AudioError(f"unsupported WAV float width ({fmt.bits} bits)")
        samples = np.frombuffer(raw, dtype=f"<f{width}").astype(np.float64)
    elif width == 1:  # unsigned 8-bit
        samples = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128) / 128
    elif width == 3:
        bytes3 = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = bytes3[:, 0] | (bytes3[:, 1] << 8) | (bytes3[:, 2] << 16)
        samples = np.where(ints >= 1 << 23, ints - (1 << 24), ints) / float(1 << 23)
    else:
        ints = np.frombuffer(raw, dtype=f"<i{width}")
        samples = ints.astype(np.float64) / float(1 << (fmt.bits - 1))
    return samples.reshape(-1, fmt.channels), fmt.sample_rate


def pcm16_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """Samples in [-1, 1) as a 16-bit PCM WAV file (soundfile's format="WAV"); scaled by
    32768, the factor they were read with, so a 16-bit file's samples come back unchanged."""
    frames = np.asarray(samples, dtype=np.float64)
    if frames.ndim == 1:
        frames = frames[:, None]
    ints = np.clip(np.round(frames * 32768.0), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(frames.shape[1])
        out.setsampwidth(2)
        out.setframerate(int(sample_rate))
        out.writeframes(ints.tobytes())
    return buffer.getvalue()


def decoded_clip(samples: Any, sample_rate: int) -> AudioClip:
    """A decoded clip (an hf row's ``array``) as upstream uploads it: a PCM-16 audio.wav."""
    frames = np.asarray(samples, dtype=np.float64)
    return AudioClip(pcm16_wav(frames, sample_rate), WAV_NAME, WAV_TYPE, len(frames) / sample_rate)


def reencoded_clip(data: bytes) -> AudioClip:
    """A WAV file's bytes decoded and written again as upstream does (``sf.read`` then
    ``sf.write``): a PCM-16 audio.wav."""
    samples, rate = read_wav(data)
    return decoded_clip(samples, rate)


def file_clip(path: str) -> AudioClip:
    """A file sent as it is, under its own name and without a content type (upstream's
    ``audio_path``); its duration from its WAV header."""
    data = read_audio_file(path)
    return AudioClip(data, os.path.basename(path), None, wav_duration_s(data))


def read_audio_file(path: str) -> bytes:
    """A WAV file's bytes; another container or a missing file is refused naming the path."""
    try:
        with open(path, "rb") as source:
            data = source.read()
    except OSError as exc:
        raise AudioError(f"audio file {path}: {exc.strerror or exc}") from None
    try:
        wav_format(data)
    except AudioError as exc:
        raise AudioError(
            f"audio file {path}: {exc}; loadgen reads WAV files (convert it: ffmpeg -i {path} "
            "out.wav)"
        ) from None
    return data


def audio_seconds(clips: list[AudioClip] | None) -> np.ndarray | None:
    """Each request's input_audio_duration (float64 seconds), or None for a run without audio."""
    if clips is None:
        return None
    return np.array([clip.duration_s for clip in clips], dtype=np.float64)
