"""POST /tokenize and /detokenize in the personality's form: vLLM's (also SGLang's, with its
/v1 aliases), TGI's (no /detokenize) or llama.cpp's."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from loadgen.mock.bodies import RequestError, read_json, render_chat
from loadgen.mock.personalities.base import JSON_TYPE
from loadgen.mock.state import MockState


class Tokenize:
    """The tokenizer endpoints."""

    def __init__(self, state: MockState) -> None:
        self.state = state

    async def tokenize(self, request: web.Request) -> web.Response:
        """POST /tokenize: vLLM's form (prompt or messages), or llama.cpp's (content)."""
        state = self.state
        form = state.personality.tokenizer
        if form == "llamacpp":
            return await self._llamacpp_tokenize(request)
        if form == "tgi":
            return await self._tgi_tokenize(request)
        body = await read_json(request, state.personality)
        state.check_model(body, required=False)
        if "content" in body and "prompt" not in body and "messages" not in body:
            content = body["content"]
            if not isinstance(content, str):
                raise RequestError(400, "content must be a string")
            encoding = await state.encode(content, bool(body.get("add_special", False)))
            return web.Response(body=orjson.dumps({"tokens": encoding.ids}), content_type=JSON_TYPE)
        add_special_tokens = body.get("add_special_tokens", True)
        if "messages" in body:
            text = render_chat(body["messages"])
        elif isinstance(body.get("prompt"), str):
            text = body["prompt"]
        else:
            raise RequestError(400, "tokenize needs a string prompt, messages, or content")
        encoding = await state.encode(text, bool(add_special_tokens))
        if form == "sglang":
            response: dict[str, Any] = {"tokens": encoding.ids, "count": len(encoding.ids)}
            response["max_model_len"] = state.config.max_model_len
        else:
            response = {
                "count": len(encoding.ids),
                "max_model_len": state.config.max_model_len,
                "tokens": encoding.ids,
                "token_strs": encoding.tokens if body.get("return_token_strs") else None,
            }
        return web.Response(body=orjson.dumps(response), content_type=JSON_TYPE)

    async def detokenize(self, request: web.Request) -> web.Response:
        """POST /detokenize: token ids to text, special tokens kept."""
        state = self.state
        if state.personality.tokenizer == "llamacpp":
            return await self._llamacpp_detokenize(request)
        body = await read_json(request, state.personality)
        state.check_model(body, required=False)
        tokens = body.get("tokens")
        if not isinstance(tokens, list):
            raise RequestError(400, "tokens must be a list of token ids")
        if tokens:
            state.check_token_ids(tokens)
        text = state.tokenizer.decode(tokens, skip_special_tokens=False)
        key = "text" if state.personality.tokenizer == "sglang" else "prompt"
        return web.Response(body=orjson.dumps({key: text}), content_type=JSON_TYPE)

    async def _tgi_tokenize(self, request: web.Request) -> web.Response:
        """TGI's POST /tokenize: the generate body ``{"inputs"}`` to a bare array of
        ``{"id", "text", "start", "stop"}`` (character offsets)."""
        body = await read_json(request, self.state.personality)
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise RequestError(400, "inputs must be a string")
        encoding = await self.state.encode(inputs)
        tokens = [
            {"id": i, "text": inputs[start:stop], "start": start, "stop": stop}
            for i, (start, stop) in zip(encoding.ids, encoding.offsets, strict=True)
        ]
        return web.Response(body=orjson.dumps(tokens), content_type=JSON_TYPE)

    async def _llamacpp_tokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /tokenize: ``{"content", "add_special", "with_pieces"}`` to
        ``{"tokens"}``; a body without ``content`` (vLLM's form) gets no tokens."""
        state = self.state
        body = await read_json(request, state.personality)
        content = body.get("content")
        if content is not None and not isinstance(content, str):
            raise RequestError(400, "content must be a string")
        if content is None:
            return web.Response(body=b'{"tokens":[]}', content_type=JSON_TYPE)
        encoding = await state.encode(content, bool(body.get("add_special", False)))
        tokens: list[Any] = encoding.ids
        if body.get("with_pieces"):
            decode = state.tokenizer.decode
            tokens = [{"id": i, "piece": decode([i], skip_special_tokens=False)} for i in tokens]
        return web.Response(body=orjson.dumps({"tokens": tokens}), content_type=JSON_TYPE)

    async def _llamacpp_detokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /detokenize: ``{"tokens"}`` to ``{"content"}``; an id out of the
        vocabulary is a server error (500)."""
        state = self.state
        body = await read_json(request, state.personality)
        tokens = body.get("tokens", [])
        if not isinstance(tokens, list) or set(map(type, tokens)) - {int}:
            raise RequestError(500, "tokens must be a list of token ids")
        if tokens and (min(tokens) < 0 or max(tokens) >= state.vocab_size):
            raise RequestError(500, f"token id out of range [0, {state.vocab_size})")
        text = state.tokenizer.decode(tokens, skip_special_tokens=False)
        return web.Response(body=orjson.dumps({"content": text}), content_type=JSON_TYPE)
