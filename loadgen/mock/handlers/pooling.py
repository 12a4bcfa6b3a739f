"""POST /v1/embeddings, /pooling and /rerank (also under /v1 and /v2): answered after the time to
first token, with one fixed unit vector per input (floats, or raw float32 with ``encoding_format``
bytes or bytes_only, as vLLM sends them) and deterministic rerank scores."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from loadgen.mock.bodies import RequestError, read_json, render_chat
from loadgen.mock.personalities.base import JSON_TYPE
from loadgen.mock.state import MockState


class Pooling:
    """The pooling endpoints, with the one vector they answer precomputed."""

    def __init__(self, state: MockState) -> None:
        self.state = state
        config = state.config
        vector = np.random.default_rng(config.seed).standard_normal(config.embedding_dim)
        vector /= np.linalg.norm(vector)  # unit length, as embedding models normalise
        self.vector = vector.tolist()
        self.vector_bytes = vector.astype("<f4").tobytes()

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /v1/embeddings: one vector per input, after the time to first token."""
        return await self._pool(request, "embedding")

    async def pooling(self, request: web.Request) -> web.Response:
        """POST /pooling: vLLM's pooling API, answered as /v1/embeddings is."""
        return await self._pool(request, "pooling")

    async def _prompt_tokens(self, body: dict[str, Any]) -> list[int]:
        """The token count of each input of a pooling request (messages count as one)."""
        state = self.state
        if "messages" in body:
            return [len((await state.encode(render_chat(body["messages"]))).ids)]
        inputs = body.get("input")
        if isinstance(inputs, str) or (
            isinstance(inputs, list) and inputs and isinstance(inputs[0], int)
        ):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            raise RequestError(400, "input must be a string, token ids, or a non-empty list")
        counts = []
        for item in inputs:
            if isinstance(item, str):
                counts.append(len((await state.encode(item)).ids))
            elif isinstance(item, list) and item:
                counts.append(len(state.check_token_ids(item)))
            else:
                raise RequestError(400, "each input must be a string or a list of token ids")
        return counts

    async def _pool(self, request: web.Request, kind: str) -> web.Response:
        state = self.state
        body = await read_json(request, state.personality)
        state.check_model(body, required=True)
        counts = await self._prompt_tokens(body)
        encoding_format = body.get("encoding_format", "float")
        if encoding_format not in ("float", "bytes", "bytes_only"):
            raise RequestError(400, f"unsupported encoding_format: {encoding_format}")
        state.inject_error()
        await asyncio.sleep(state.ttft_s)
        prompt_tokens = sum(counts)
        usage = {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens,
            "completion_tokens": 0,
            "prompt_tokens_details": None,
        }
        head = {
            "id": state.response_id("embd-" if kind == "embedding" else "pool-"),
            "object": "list",
            "created": int(time.time()),
            "model": state.config.model,
        }
        if encoding_format != "float":
            headers = {}
            if encoding_format == "bytes":  # bytes_only answers carry no usage at all
                headers["metadata"] = orjson.dumps(head | {"usage": usage}).decode()
            return web.Response(
                body=self.vector_bytes * len(counts),
                content_type="application/octet-stream",
                headers=headers,
            )
        vector_key = "embedding" if kind == "embedding" else "data"
        data = [{"index": i, "object": kind, vector_key: self.vector} for i in range(len(counts))]
        return web.Response(
            body=orjson.dumps(head | {"data": data, "usage": usage}), content_type=JSON_TYPE
        )

    async def rerank(self, request: web.Request) -> web.Response:
        """POST /rerank, /v1/rerank, /v2/rerank: the documents scored against the query (each
        pair counted as a cross-encoder reads it: query tokens plus document tokens), best
        first, after the time to first token."""
        state = self.state
        body = await read_json(request, state.personality)
        state.check_model(body, required=True)
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str):
            raise RequestError(400, "query must be a string")
        if not isinstance(documents, list) or not documents:
            raise RequestError(400, "documents must be a non-empty list")
        if not all(isinstance(d, str) for d in documents):
            raise RequestError(400, "each document must be a string")
        query_tokens = len((await state.encode(query)).ids)
        doc_tokens = [len((await state.encode(d)).ids) for d in documents]
        state.inject_error()
        await asyncio.sleep(state.ttft_s)
        prompt_tokens = query_tokens * len(documents) + sum(doc_tokens)
        scores = [1.0 / (1 + i) for i in range(len(documents))]  # deterministic, in (0, 1]
        response = {
            "id": state.response_id("rerank-"),
            "model": state.config.model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            "results": [
                {"index": i, "document": {"text": documents[i]}, "relevance_score": scores[i]}
                for i in range(len(documents))
            ],
        }
        return web.Response(body=orjson.dumps(response), content_type=JSON_TYPE)
