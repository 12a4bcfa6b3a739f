"""openai-audio's request bodies: multipart/form-data uploads, built once in the coordinator.

Upstream's ``async_request_openai_audio`` posts an ``aiohttp.FormData``: the ``file`` part
first, then every payload field as text (``str(value)``: ``True`` is sent as ``"True"``)::

    file (audio.wav, audio/wav; or a file as it is), model, max_completion_tokens,
    stream=True, language=en, stream_include_usage=True, stream_continuous_usage_stats=True
    + ignore_eos=True? + extra_body

The prompt is not sent. The bodies of a run share one boundary, so the workers send them with
one Content-Type (``content_type()``), the only header that differs from the JSON backends.
"""

from __future__ import annotations

import secrets
from typing import Any

from loadgen.audio import AudioClip

AUDIO_BACKEND = "openai-audio"
# One per coordinator process: every body of a run is cut with it.
BOUNDARY = f"loadgen-{secrets.token_hex(16)}"


def content_type(boundary: str = BOUNDARY) -> str:
    """The Content-Type the workers send the run's bodies with."""
    return f"multipart/form-data; boundary={boundary}"


def audio_fields(
    model: str, output_len: int, *, ignore_eos: bool, extra_body: dict[str, Any] | None
) -> dict[str, Any]:
    """The form's text fields in upstream's order, before they are made text."""
    fields: dict[str, Any] = {
        "model": model,
        "max_completion_tokens": output_len,
        "stream": True,
        "language": "en",
        "stream_include_usage": True,
        "stream_continuous_usage_stats": True,
    }
    if ignore_eos:
        fields["ignore_eos"] = True
    if extra_body:
        fields.update(extra_body)
    return fields


def form_body(fields: dict[str, Any], clip: AudioClip, boundary: str = BOUNDARY) -> bytes:
    """One multipart/form-data body: the audio file, then each field as text."""
    dash = f"--{boundary}".encode()
    if dash in clip.data:
        raise ValueError(f"the multipart boundary occurs in {clip.filename}")
    file_head = f'Content-Disposition: form-data; name="file"; filename="{clip.filename}"\r\n'
    if clip.content_type is not None:
        file_head += f"Content-Type: {clip.content_type}\r\n"
    parts = [dash + b"\r\n" + file_head.encode() + b"\r\n" + clip.data + b"\r\n"]
    for name, value in fields.items():
        head = f'Content-Disposition: form-data; name="{name}"\r\n'
        head += "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        parts.append(dash + b"\r\n" + head.encode() + str(value).encode() + b"\r\n")
    parts.append(dash + b"--\r\n")
    return b"".join(parts)


def audio_bodies(
    models: list[str],
    output_lens: list[int],
    clips: list[AudioClip],
    *,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None,
    boundary: str = BOUNDARY,
) -> list[bytes]:
    """Every request's upload (request i names ``models[i]`` and sends ``clips[i]``)."""
    return [
        form_body(
            audio_fields(model, int(out), ignore_eos=ignore_eos, extra_body=extra_body),
            clip,
            boundary,
        )
        for model, out, clip in zip(models, output_lens, clips, strict=True)
    ]
