"""POST /v1/completions and /v1/chat/completions: a deterministic cycle of ordinary tokens, whole
or streamed, after the time to first token and at the inter-token latency.

The prompt is counted with the real tokenizer so that usage figures are exact, and the generated
text re-encodes to exactly its token count. Without ``ignore_eos`` a response has ``output_len``
tokens ("the model stops"), cut to ``max_tokens`` and raised to ``min_tokens``, within the room
``max_model_len`` leaves after the prompt.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from array import array
from time import perf_counter_ns
from typing import Any

import orjson
from aiohttp import web
from tokenizers import Tokenizer

from loadgen.mock.bodies import RequestError, int_param, read_json, render_chat
from loadgen.mock.events import Events, SuffixEvents
from loadgen.mock.pacing import PacedStream, Pacer
from loadgen.mock.personalities.base import JSON_TYPE, StreamRequest
from loadgen.mock.state import MockState
from loadgen.text.tokenizer import TokenizerLoadError

MAX_CYCLE_TOKENS = 1024
# What Starlette (and so vLLM) sends for an event stream.
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}
_WORD_TOKEN = re.compile(r" [A-Za-z]{2,}")


def token_cycle(tokenizer: Tokenizer) -> list[int]:
    """Ordinary word tokens that decode on their own and re-encode to themselves.

    Re-encoding the generated text then gives back exactly the generated token count.
    """
    special = set(tokenizer.get_added_tokens_decoder())
    words: list[int] = []
    printable: list[int] = []
    for token_id in range(tokenizer.get_vocab_size()):
        if token_id in special:
            continue
        text = tokenizer.decode([token_id])
        if _WORD_TOKEN.fullmatch(text):
            if tokenizer.encode(text, add_special_tokens=False).ids == [token_id]:
                words.append(token_id)
                if len(words) == MAX_CYCLE_TOKENS:
                    break
        elif len(printable) < MAX_CYCLE_TOKENS and text.strip() and text.isprintable():
            printable.append(token_id)
    cycle = words or printable
    if not cycle:
        raise TokenizerLoadError("the tokenizer has no ordinary printable tokens to generate")
    return cycle


class Generation:
    """The generation endpoints, with the output text and its fragments precomputed."""

    def __init__(self, state: MockState) -> None:
        self.state = state
        self.pacer: Pacer | None = None  # made in the running loop, by the first paced stream
        tokenizer, personality = state.tokenizer, state.personality
        cycle = token_cycle(tokenizer)
        texts = [tokenizer.decode([token_id]) for token_id in cycle]
        self.cycle_text = "".join(texts)
        self.cycle_offsets = list(itertools.accumulate((len(t) for t in texts), initial=0))
        self.escaped = [orjson.dumps(t)[1:-1] for t in texts]
        self.completion_fragments = [e + personality.completion_end for e in self.escaped]
        self.chat_fragments = [e + personality.chat_end for e in self.escaped]
        self.completion_offsets = list(
            itertools.accumulate((len(f) for f in self.completion_fragments), initial=0)
        )
        self.chat_offsets = list(
            itertools.accumulate((len(f) for f in self.chat_fragments), initial=0)
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions."""
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        return await self._generate(request, chat=True)

    async def _prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        state = self.state
        if chat:
            return (await state.encode(render_chat(body.get("messages")))).ids
        prompt = body.get("prompt")
        # A batch of prompts is served as its first prompt.
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return (await state.encode(prompt)).ids
        if isinstance(prompt, list) and prompt:
            return state.check_token_ids(prompt)
        raise RequestError(400, "prompt must be a string or a non-empty list of token ids")

    def _length_limits(self, body: dict[str, Any], chat: bool) -> tuple[int | None, int]:
        """The request's max_tokens (None when absent) and min_tokens, validated."""
        max_tokens = None
        if chat:
            max_tokens = int_param(body, "max_completion_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = int_param(body, "max_tokens", minimum=1)
        min_tokens = int_param(body, "min_tokens", minimum=0) or 0
        if max_tokens is not None and min_tokens > max_tokens:
            raise RequestError(
                400,
                f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                f"got {min_tokens}.",
            )
        return max_tokens, min_tokens

    def _output_len(
        self, max_tokens: int | None, min_tokens: int, ignore_eos: bool, prompt_tokens: int
    ) -> tuple[int, str]:
        """The number of tokens to generate and the finish_reason of the last one."""
        config = self.state.config
        max_model_len = config.max_model_len
        room = max_model_len - prompt_tokens
        if room < 1:
            raise RequestError(
                400,
                f"This model's maximum context length is {max_model_len} tokens. "
                f"However, your request has {prompt_tokens} input tokens. "
                "Please reduce the length of the input messages.",
            )
        if max_tokens is not None and max_tokens > room:
            raise RequestError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. "
                f"This model's maximum context length is {max_model_len} tokens "
                f"and your request has {prompt_tokens} input tokens "
                f"({max_tokens} > {max_model_len} - {prompt_tokens}).",
            )
        natural = min(max(min_tokens, config.output_len), room)
        if ignore_eos:
            return (max_tokens if max_tokens is not None else natural), "length"
        if max_tokens is not None and max_tokens < natural:
            return max_tokens, "length"
        return natural, "stop"

    def _text(self, n: int) -> str:
        full, rest = divmod(n, len(self.escaped))
        return self.cycle_text * full + self.cycle_text[: self.cycle_offsets[rest]]

    def _count_drafts(self, tokens: int) -> None:
        """With --spec-decode-draft-tokens K: one draft of K tokens per generated token, of
        which the first K // 2 are accepted (a 50 % acceptance rate for even K)."""
        state = self.state
        accepted = state.spec_accepted_per_pos
        if accepted:
            state.spec_drafts += tokens
            for pos in range(len(accepted) // 2):
                accepted[pos] += tokens

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival_ns = perf_counter_ns()
        state = self.state
        personality, config = state.personality, state.config
        request_id = state.response_id(personality.id_prefix(chat))
        record = None
        if state.recorder is not None:
            record = state.recorder.add(request.headers.get("x-request-id", request_id), arrival_ns)
        body = await read_json(request, personality)
        state.check_model(body, required=True)
        max_tokens, min_tokens = self._length_limits(body, chat)
        prompt_ids = await self._prompt_ids(body, chat)
        prompt_tokens = len(prompt_ids)
        ignore_eos = bool(body.get("ignore_eos"))
        n, finish_reason = self._output_len(max_tokens, min_tokens, ignore_eos, prompt_tokens)
        state.inject_error()
        ttft_s = state.ttft_s
        cached = -1
        if state.prefix_cache is not None:  # --prefill-us-per-token: the uncached part's prefill
            missing = state.prefix_cache.serve(prompt_ids)
            ttft_s += missing * config.prefill_us_per_token / 1e6
            cached = prompt_tokens - missing

        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        served = config.model
        model = personality.answered_model(chat, body.get("model"), served)
        answer = StreamRequest(
            chat=chat,
            request_id=request_id,
            created=int(time.time()),
            model=model,
            model_json=state.model_json if model == served else orjson.dumps(model),
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=n,
            include_usage=include_usage,
            ttft_ms=ttft_s * 1000.0,
            itl_ms=config.itl_ms,
            cached_tokens=cached,
        )
        await state.slots.acquire()  # --max-running: queued behind the requests before it
        counts = state.counts
        counts.prompt += prompt_tokens
        counts.generated += n
        counts.requests += 1
        running = state.load.start(prompt_tokens, n, ttft_s, cached)
        try:
            if not body.get("stream"):
                await asyncio.sleep(ttft_s + (n - 1) * state.itl_s)
                response = personality.response(answer, self._text(n))
                return web.Response(body=orjson.dumps(response), content_type=JSON_TYPE)
            self._count_drafts(n)
            return await self._stream(request, self._events(answer, arrival_ns), record, ttft_s)
        finally:
            state.load.end(running)
            state.slots.release()

    def _events(self, answer: StreamRequest, arrival_ns: int) -> Events:
        shape = self.state.personality.stream_shape(answer)
        if answer.chat:
            fragments, offsets = self.chat_fragments, self.chat_offsets
        else:
            fragments, offsets = self.completion_fragments, self.completion_offsets
        if shape.suffix:
            events: Events = SuffixEvents(
                shape.head, shape.prefix, fragments, offsets, self.escaped, shape.last_suffix,
                shape.tail, answer.completion_tokens, shape.ttft_at, arrival_ns, 0,
                shape.last_prefix, shape.suffix,
            )  # fmt: skip
        else:
            events = Events(
                shape.head, shape.prefix, fragments, offsets, self.escaped, shape.last_suffix,
                shape.tail, answer.completion_tokens, shape.ttft_at, arrival_ns, 0,
                shape.last_prefix,
            )  # fmt: skip
        return events

    async def _stream(
        self, request: web.Request, events: Events, record: array | None, ttft_s: float
    ) -> web.StreamResponse:
        state = self.state
        # A chat stream's role chunk is a choices-bearing event too; clients count it.
        head_events = 1 if events.head else 0
        close_after = state.personality.close_after_stream
        if state.itl_s <= 0:
            # The whole stream in one write, headers included, after the time to first token.
            if ttft_s > 0:
                await asyncio.sleep(ttft_s)
            body = events.render(0, events.n)
            if record is not None:  # aiohttp writes the body as soon as the handler returns
                record.extend(itertools.repeat(perf_counter_ns(), events.n + head_events))
            if not close_after:
                return web.Response(body=body, headers=_SSE_HEADERS)
            response = web.StreamResponse(headers=_SSE_HEADERS)
            response.content_length = len(body)
            try:
                await response.prepare(request)
                # Reading stops before the body goes out, so the next request is never read.
                state.connections.close_after_response(request.transport)
                await response.write(body)
                await response.write_eof()
            except ConnectionResetError:
                pass
            return response

        response = web.StreamResponse(headers=_SSE_HEADERS)
        # The whole stream is known up front, so it goes out with a Content-Length: no
        # chunked framing to build here or to parse in the client, per event.
        response.content_length = events.size()
        loop = asyncio.get_running_loop()
        if self.pacer is None or self.pacer.loop is not loop:
            self.pacer = Pacer(loop, state.config.itl_ms)
        try:
            await response.prepare(request)
        except ConnectionResetError:
            return response  # the client went away before the headers
        transport = request.transport
        if transport is None or transport.is_closing():
            return response
        # The pacer writes the events straight to the transport: aiohttp's writer would only
        # count the bytes, and with the Content-Length set its write_eof() then adds nothing.
        # Nothing waits for the client to drain, but a stream is at most its known size.
        stream = PacedStream(
            transport=transport,
            events=events,
            first_ms=self.pacer.now_ms() + ttft_s * 1000.0,
            head_events=head_events,
            record=record,
            done=loop.create_future(),
            stop_reading=close_after,
        )
        self.pacer.start(stream)
        await stream.done
        await response.write_eof()
        if close_after:
            state.connections.close_after_response(transport)
        return response
