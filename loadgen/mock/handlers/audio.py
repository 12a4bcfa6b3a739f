"""POST /v1/audio/transcriptions and /v1/audio/translations, streamed as vLLM streams them.

The body is multipart/form-data: a ``file`` part (a WAV file: its duration is read from the
header) and text fields (``model``, ``max_completion_tokens``, ``stream``,
``stream_include_usage``, ``stream_continuous_usage_stats``, ``ignore_eos``; booleans as
Python's ``True``/``False`` or JSON's ``true``/``false``). A streamed answer is vLLM's
``transcription.chunk`` events: one per token, ``{"choices":[{"delta":{"content":...}}]}``, the
last with its ``finish_reason``, each with the running ``usage`` when continuous usage is
asked; then, with ``stream_include_usage``, a usage chunk with no choices, then ``[DONE]``.
The prompt counts 50 tokens per second of audio (Whisper's encoder frames) plus the
``prompt`` field's tokens; the output is the generation endpoints' token cycle, as many tokens
as they would give (--output-len, cut to ``max_completion_tokens``), paced at the same TTFT and
ITL. Without ``stream`` the answer is ``{"text": ..., "usage": {...}}``.
"""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from time import perf_counter_ns
from typing import Any

import orjson
from aiohttp import BodyPartReader, web

from loadgen.audio import AudioError, wav_duration_s
from loadgen.mock.bodies import RequestError
from loadgen.mock.handlers.generation import Generation
from loadgen.mock.personalities.base import JSON_TYPE

AUDIO_TOKENS_PER_S = 50
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}
_TRUE = ("true", "1")


class Audio:
    """The audio endpoints, answered with the generation endpoints' tokens and pacing."""

    def __init__(self, generation: Generation) -> None:
        self.generation = generation
        self.state = generation.state

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/audio/transcriptions."""
        return await self._answer(request, "transcription")

    async def translations(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/audio/translations."""
        return await self._answer(request, "translation")

    async def _answer(self, request: web.Request, task: str) -> web.StreamResponse:
        arrival_ns = perf_counter_ns()
        state = self.state
        request_id = state.response_id("trsc-")
        record = None
        if state.recorder is not None:
            record = state.recorder.add(request.headers.get("x-request-id", request_id), arrival_ns)
        fields, audio = await read_form(request)
        state.check_model(fields, required=False)
        duration_s = audio_duration_s(audio)
        prompt = fields.get("prompt", "")
        prompt_tokens = math.ceil(duration_s * AUDIO_TOKENS_PER_S)
        if prompt:
            prompt_tokens += len((await state.encode(prompt)).ids)
        max_tokens = _int_field(fields, "max_completion_tokens")
        ignore_eos = _flag(fields, "ignore_eos")
        n, finish = self.generation._output_len(max_tokens, 0, ignore_eos, prompt_tokens)
        state.inject_error()
        counts = state.counts
        counts.prompt += prompt_tokens
        counts.generated += n
        counts.requests += 1
        running = state.load.start(prompt_tokens, n, state.ttft_s, 0)
        try:
            model = fields.get("model") or state.config.model
            if not _flag(fields, "stream"):
                await asyncio.sleep(state.ttft_s + max(n - 1, 0) * state.itl_s)
                usage = _usage(prompt_tokens, n)
                answer = {"text": self.generation._text(n), "usage": usage}
                return web.Response(body=orjson.dumps(answer), content_type=JSON_TYPE)
            events = transcription_events(
                request_id, f"{task}.chunk", model, self._tokens(n), finish, prompt_tokens,
                _flag(fields, "stream_include_usage"),
                _flag(fields, "stream_continuous_usage_stats"),
            )  # fmt: skip
            return await self._stream(request, events, record)
        finally:
            state.load.end(running)

    def _tokens(self, n: int) -> list[str]:
        escaped = self.generation.escaped
        return [escaped[i % len(escaped)].decode() for i in range(n)]

    async def _stream(
        self, request: web.Request, events: list[bytes], record: array | None
    ) -> web.StreamResponse:
        """The events after the TTFT, one token event per ITL (the trailing ones at once); each
        token event's write instant goes to the timing record."""
        state = self.state
        response = web.StreamResponse(headers=_SSE_HEADERS)
        await response.prepare(request)
        await asyncio.sleep(state.ttft_s)
        tokens = sum(1 for event in events if b'"choices":[{' in event)
        for i, event in enumerate(events):
            if 0 < i < tokens and state.itl_s > 0:
                await asyncio.sleep(state.itl_s)
            await response.write(event)
            if record is not None and i < tokens:
                record.append(perf_counter_ns())
        await response.write_eof()
        return response


async def read_form(request: web.Request) -> tuple[dict[str, str], bytes]:
    """The form's text fields and its ``file`` part's bytes; a 400 when it is no form."""
    if not request.content_type.startswith("multipart/form-data"):
        raise RequestError(400, "the audio endpoints take multipart/form-data")
    fields: dict[str, str] = {}
    audio: bytes | None = None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):  # a form nested in the form
            raise RequestError(400, "a part of the form is itself a multipart form")
        data = await part.read()
        if part.name == "file":
            audio = bytes(data)
        elif part.name:
            fields[part.name] = bytes(data).decode("utf-8", "replace")
    if audio is None:
        raise RequestError(400, "the form has no 'file' part")
    return fields, audio


def audio_duration_s(audio: bytes) -> float:
    """The uploaded file's duration from its WAV header; a 400 for another format."""
    try:
        return wav_duration_s(audio)
    except AudioError as exc:
        raise RequestError(400, f"Invalid or unsupported audio file: {exc}") from None


def transcription_events(
    request_id: str,
    kind: str,
    model: str,
    tokens: list[str],
    finish: str,
    prompt_tokens: int,
    include_usage: bool,
    continuous_usage: bool,
) -> list[bytes]:
    """vLLM's SSE events of a streamed transcription (see the module docstring)."""
    created = int(time.time())
    head = {"id": request_id, "object": kind, "created": created, "model": model}
    events = []
    for i, text in enumerate(tokens):
        choice: dict[str, Any] = {"delta": {"content": text}}
        if i == len(tokens) - 1:
            choice |= {"finish_reason": finish, "stop_reason": None}
        chunk: dict[str, Any] = {**head, "choices": [choice]}
        if include_usage and continuous_usage:
            chunk["usage"] = _usage(prompt_tokens, i + 1)
        events.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
    if include_usage:
        usage_chunk = {**head, "choices": [], "usage": _usage(prompt_tokens, len(tokens))}
        events.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def _flag(fields: dict[str, str], name: str) -> bool:
    return fields.get(name, "").strip().lower() in _TRUE


def _int_field(fields: dict[str, str], name: str) -> int | None:
    value = fields.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise RequestError(400, f"{name} must be an integer, got {value!r}") from None
    if number < 1:
        raise RequestError(400, f"{name} must be at least 1, got {number}")
    return number
