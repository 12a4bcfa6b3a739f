"""Audio without sockets: WAV headers and samples, the multipart bodies, the audio datasets'
sampling, the flag rules, and vLLM's transcription stream as the workers' parser counts it."""

from __future__ import annotations

import asyncio
import io
import json
import math
import re
import struct
import wave
from email.parser import BytesParser
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from loadgen.audio import (
    AudioError,
    audio_seconds,
    pcm16_wav,
    read_audio_file,
    read_wav,
    reencoded_clip,
    wav_duration_s,
)
from loadgen.audio_payloads import audio_bodies, content_type
from loadgen.backends import check_endpoint
from loadgen.config.audio_rules import audio_problem
from loadgen.datasets.custom_audio import load_custom_audio_rows, sample_custom_audio_requests
from loadgen.datasets.hf_asr import ASR_PATHS, WHISPER_PROMPT, sample_asr_requests
from loadgen.mock.bodies import RequestError
from loadgen.mock.handlers.audio import read_form, transcription_events
from workers.sse import SSEStream


def pcm16(seconds: float, rate: int = 16000, channels: int = 1) -> bytes:
    frames = int(seconds * rate)
    ramp = (np.arange(frames * channels) % 2000 - 1000).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(ramp.tobytes())
    return buffer.getvalue()


def float32_wav(samples: np.ndarray, rate: int) -> bytes:
    data = samples.astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"LIST" + struct.pack("<I", 3)
    body += b"abc\x00" + b"data" + struct.pack("<I", len(data)) + data  # odd chunk padded
    return b"RIFF" + struct.pack("<I", len(body)) + body


# --- WAV -----------------------------------------------------------------------------------


def test_durations_come_from_the_header() -> None:
    assert wav_duration_s(pcm16(1.5)) == 1.5
    assert wav_duration_s(pcm16(0.25, rate=8000, channels=2)) == 0.25
    assert wav_duration_s(float32_wav(np.zeros(24000), 48000)) == 0.5


def test_a_16_bit_file_is_uploaded_with_its_samples_unchanged() -> None:
    original = pcm16(0.1, channels=2)
    clip = reencoded_clip(original)
    assert (clip.filename, clip.content_type, clip.duration_s) == ("audio.wav", "audio/wav", 0.1)
    with wave.open(io.BytesIO(clip.data)) as back, wave.open(io.BytesIO(original)) as first:
        assert back.getnchannels() == 2 and back.getsampwidth() == 2
        assert back.readframes(back.getnframes()) == first.readframes(first.getnframes())


def test_float_samples_are_read_past_other_chunks_and_clipped_to_pcm16() -> None:
    samples = np.array([0.0, 0.5, -0.5, 1.5, -2.0])
    read, rate = read_wav(float32_wav(samples, 16000))
    assert rate == 16000 and read[:, 0].tolist() == pytest.approx(samples.tolist())
    with wave.open(io.BytesIO(pcm16_wav(read, rate))) as out:
        ints = np.frombuffer(out.readframes(5), "<i2").tolist()
    assert ints == [0, 16384, -16384, 32767, -32768]


def test_other_files_are_refused_naming_them(tmp_path: Path) -> None:
    flac = tmp_path / "a.flac"
    flac.write_bytes(b"fLaC\x00\x00\x00\x22" + bytes(40))
    with pytest.raises(AudioError, match=f"audio file {flac}: not a WAV file.*ffmpeg"):
        read_audio_file(str(flac))
    with pytest.raises(AudioError, match=r"audio file /no/such\.wav: No such file"):
        read_audio_file("/no/such.wav")
    assert audio_seconds(None) is None


# --- multipart -----------------------------------------------------------------------------


def form_parts(body: bytes, boundary: str) -> list:
    head = f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n".encode()
    return BytesParser().parsebytes(head + body).get_payload()


def test_bodies_carry_the_file_then_upstreams_fields_as_text() -> None:
    clip = reencoded_clip(pcm16(0.5))
    (body,) = audio_bodies(
        ["whisper"], [64], [clip], ignore_eos=True, extra_body={"temperature": 0.0},
        boundary="b0und",
    )  # fmt: skip
    parts = form_parts(body, "b0und")
    assert parts[0].get_param("filename", header="content-disposition") == "audio.wav"
    assert parts[0].get_content_type() == "audio/wav"
    assert parts[0].get_payload(decode=True) == clip.data
    fields = {p.get_param("name", header="content-disposition"): p.get_payload() for p in parts}
    assert list(fields)[1:] == [
        "model", "max_completion_tokens", "stream", "language", "stream_include_usage",
        "stream_continuous_usage_stats", "ignore_eos", "temperature",
    ]  # fmt: skip
    assert (fields["model"], fields["max_completion_tokens"], fields["stream"]) == (
        "whisper", "64", "True",
    )  # fmt: skip
    assert fields["temperature"] == "0.0"
    assert content_type("b0und") == "multipart/form-data; boundary=b0und"


def read_posted_form(body: bytes, boundary: str) -> tuple[dict[str, str], bytes]:
    """The mock's ``read_form`` of a mocked POST of a multipart body (no socket)."""

    async def read() -> tuple[dict[str, str], bytes]:
        loop = asyncio.get_running_loop()
        payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=loop)
        payload.feed_data(body)
        payload.feed_eof()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        request = make_mocked_request("POST", "/v1/audio/transcriptions", headers, payload=payload)
        return await read_form(request)

    return asyncio.run(read())


def test_the_mock_reads_a_form_and_refuses_a_nested_multipart_part() -> None:
    flat = (
        b'--o\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n'
        b'--o\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF\r\n'
        b"--o--\r\n"
    )
    assert read_posted_form(flat, "o") == ({"model": "m"}, b"RIFF")
    nested = (
        b"--o\r\nContent-Type: multipart/mixed; boundary=i\r\n"
        b'Content-Disposition: form-data; name="file"\r\n\r\n'
        b"--i\r\nContent-Type: text/plain\r\n\r\nx\r\n--i--\r\n--o--\r\n"
    )
    with pytest.raises(RequestError, match="itself a multipart form") as refused:
        read_posted_form(nested, "o")
    assert refused.value.status == 400


def test_the_endpoint_must_be_an_audio_one() -> None:
    check_endpoint("openai-audio", "http://h/v1/audio/translations")
    with pytest.raises(ValueError, match="must end with 'transcriptions' or 'translations'"):
        check_endpoint("openai-audio", "http://h/v1/completions")


# --- the audio datasets --------------------------------------------------------------------


class Codec:
    """Words and the control tokens it knows count one token each; other <|...|> pieces one per
    character."""

    num_special_tokens = 1

    def __init__(self, *controls: str) -> None:
        self.controls = set(controls)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        pieces = [re.findall(r"<\|[^|]*\|>|\S+", text) for text in texts]
        return [
            [0] * sum(len(p) if p.startswith("<|") and p not in self.controls else 1 for p in ps)
            for ps in pieces
        ]


WHISPER = Codec(*re.findall(r"<\|[^|]*\|>", WHISPER_PROMPT))


@pytest.fixture
def audio_file(tmp_path: Path) -> Path:
    rows = []
    for i, seconds in enumerate([1.0, 0.5, 2.0]):
        (tmp_path / f"{i}.wav").write_bytes(pcm16(seconds))
        rows.append(
            {"prompt": f"say {i}", "audio": str(tmp_path / f"{i}.wav"), "output_tokens": i + 3}
        )
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_custom_audio_takes_lines_in_order_with_their_output_tokens(audio_file: Path) -> None:
    rows = load_custom_audio_rows(str(audio_file))
    sampled = sample_custom_audio_requests(rows, Codec(), 5, -1, 0, disable_shuffle=True)
    assert sampled.prompts[:3] == ["say 0", "say 1", "say 2"]
    assert sampled.output_lens[:3].tolist() == [3, 4, 5]
    assert sampled.prompt_lens.tolist() == [3] * 5  # 2 words + 1 special
    assert sampled.audios is not None and len(sampled.audios) == 5  # topped up
    assert [clip.duration_s for clip in sampled.audios[:3]] == [1.0, 0.5, 2.0]
    shuffled = sample_custom_audio_requests(rows, Codec(), 3, 7, 0)
    assert sorted(shuffled.prompts) == ["say 0", "say 1", "say 2"]
    assert shuffled.output_lens.tolist() == [7, 7, 7]


def test_custom_audio_in_a_chat_message_is_a_base64_wav_part(audio_file: Path) -> None:
    rows = load_custom_audio_rows(str(audio_file))
    sampled = sample_custom_audio_requests(rows, Codec(), 1, 8, 0, True, multimodal_chat=True)
    assert sampled.audios is None and sampled.mm_contents is not None
    (part,) = sampled.mm_contents[0]
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"


def test_custom_audio_refuses_lines_without_audio(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "p"}\n')
    with pytest.raises(ValueError, match=f'{path}:1: each line needs "audio"'):
        load_custom_audio_rows(str(path))


def asr_rows(tmp_path: Path) -> list[dict]:
    (tmp_path / "p.wav").write_bytes(pcm16(3.0))
    return [
        {"audio": {"bytes": pcm16(1.0), "path": "a.wav"}},
        {"audio": {"bytes": None, "path": str(tmp_path / "p.wav")}},
        {"audio": {"array": np.zeros(8000), "sampling_rate": 16000}},
        {"audio": {"bytes": pcm16(10.0), "path": "long.wav"}},
    ]


def test_asr_rows_become_uploads_as_upstream_makes_them(tmp_path: Path) -> None:
    sampled = sample_asr_requests(asr_rows(tmp_path), WHISPER, 4, None, 0)
    assert sampled.audios is not None
    names = [(c.filename, c.content_type, c.duration_s) for c in sampled.audios]
    assert names == [
        ("audio.wav", "audio/wav", 1.0), ("p.wav", None, 3.0), ("audio.wav", "audio/wav", 0.5),
        ("audio.wav", "audio/wav", 10.0),
    ]  # fmt: skip
    assert sampled.prompts == [WHISPER_PROMPT] * 4
    assert sampled.prompt_lens.tolist() == [5] * 4  # four control tokens and one special
    assert sampled.output_lens.tolist() == [1024] * 4


def test_asr_length_bounds_skip_clips_and_zero_max_is_no_bound(tmp_path: Path) -> None:
    rows = asr_rows(tmp_path)
    kept = sample_asr_requests(rows, Codec(), 2, 16, 0, True, min_len_s=0.75, max_len_s=5.0)
    assert [c.duration_s for c in kept.audios or []] == [1.0, 3.0]
    assert kept.prompts == ["", ""]
    unbounded = sample_asr_requests(rows, Codec(), 4, 16, 0, True, max_len_s=0.0)
    assert len(unbounded.audios or []) == 4
    with pytest.raises(ValueError, match="all 4 clips read are outside"):
        sample_asr_requests(rows, Codec(), 2, 16, 0, min_len_s=20.0, max_len_s=math.inf)


# --- which flags go together ---------------------------------------------------------------


def test_audio_flag_rules() -> None:
    none: set[str] = set()
    assert audio_problem("openai-audio", "custom_audio", None, False, none) is None
    assert audio_problem("openai-audio", "hf", ASR_PATHS, False, none) is None
    assert audio_problem("openai-chat", "custom_audio", None, True, none) is None
    assert "use --dataset-name custom_audio" in str(
        audio_problem("openai-audio", "random", None, False, none)
    )
    assert "--top-p: Sampling parameters are only supported" in str(
        audio_problem("openai-audio", "custom_audio", None, False, {"--top-p"})
    )
    assert "need --backend openai-audio" in str(
        audio_problem("openai-chat", "hf", ASR_PATHS, False, none)
    )
    assert "--enable-multimodal-chat" in str(
        audio_problem("openai-chat", "custom_audio", None, False, none)
    )


# --- the stream, as the workers read it ----------------------------------------------------


@pytest.mark.parametrize("continuous", [True, False])
def test_a_vllm_transcription_stream_parses_as_chat(continuous: bool) -> None:
    events = transcription_events(
        "trsc-1", "transcription.chunk", "whisper", [" Hello", " world", ""], "stop", 77,
        include_usage=True, continuous_usage=continuous,
    )  # fmt: skip
    stream = SSEStream(chat=True)
    for i, event in enumerate(events):
        stream.feed(event, 1000 + i)
    stream.finish(2000)
    # Every chunk with a choice is a token, the last one's "" content too, as upstream counts
    # them; the running usage on token chunks is not read, the usage-only chunk is.
    assert list(stream.event_ns) == [1000, 1001, 1002]
    assert (stream.prompt_tokens, stream.completion_tokens) == (77, 3)
    assert stream.done and stream.failure is None
