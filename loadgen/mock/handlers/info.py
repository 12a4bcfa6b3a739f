"""The endpoints that report rather than generate: /health, /v1/models, /metrics, /mock/stats,
/timings, and the profiler switches vLLM serves."""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from loadgen.mock.personalities.base import JSON_TYPE
from loadgen.mock.state import MockState


class Info:
    """The reporting endpoints, with the /v1/models answer precomputed."""

    def __init__(self, state: MockState) -> None:
        self.state = state
        config = state.config
        self.models_body = orjson.dumps(
            {
                "object": "list",
                "data": []
                if config.empty_model_list
                else [
                    {
                        "id": config.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "loadgen",
                        "root": config.model,
                        "parent": None,
                        "max_model_len": config.max_model_len,
                    }
                ],
            }
        )

    async def health(self, request: web.Request) -> web.Response:
        """GET /health: 200 with an empty body."""
        return web.Response()

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the one served model."""
        return web.Response(body=self.models_body, content_type=JSON_TYPE)

    async def metrics(self, request: web.Request) -> web.Response:
        """GET /metrics: Prometheus text: the personality's load metrics (computed now, from
        what the handlers noted: loadgen/mock/load.py); with --spec-decode-draft-tokens, vLLM's
        spec-decode counters."""
        state = self.state
        model = state.config.model
        lines = ["# TYPE loadgen_mock_requests_total counter"]
        lines.append(f"loadgen_mock_requests_total {sum(state.requests_seen.values())}")
        lines += state.personality.metric_lines(model, state.load_now())
        accepted = state.spec_accepted_per_pos
        if accepted:
            labels = f'engine="0",model_name="{model}"'
            draft_tokens = state.spec_drafts * len(accepted)
            lines += [
                f"vllm:spec_decode_num_drafts_total{{{labels}}} {state.spec_drafts}",
                f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {draft_tokens}",
                f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {sum(accepted)}",
            ]
            lines += [
                "vllm:spec_decode_num_accepted_tokens_per_pos_total"
                f'{{{labels},position="{pos}"}} {count}'
                for pos, count in enumerate(accepted)
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """POST /reset_prefix_cache (vLLM) or /flush_cache (SGLang): the prefix cache emptied,
        counted in /mock/stats."""
        state = self.state
        if state.prefix_cache is not None:
            state.prefix_cache.clear()
        state.prefix_cache_resets += 1
        status, body, content_type = state.personality.reset_answer()
        return web.Response(status=status, body=body, content_type=content_type)

    async def profile(self, request: web.Request) -> web.Response:
        """POST /start_profile and /stop_profile: accepted, as by a vLLM server that profiles."""
        return web.Response()

    async def stats(self, request: web.Request) -> web.Response:
        """GET /mock/stats: requests received so far by method and path, how many were being
        handled at once (now, and at most), the usage reported, and the connections' fate."""
        state = self.state
        stats = {
            "personality": state.personality.name,
            "requests": state.requests_seen,
            "in_flight": state.in_flight,
            "max_in_flight": state.max_in_flight,
            "requests_served": state.served,
            "prompt_tokens": state.counts.prompt,
            "completion_tokens": state.counts.generated,
            "connections": state.connections.stats(),
            "prefix_cache_resets": state.prefix_cache_resets,
        }
        if state.prefix_cache is not None:
            stats["prefix_cache"] = {
                "queried_tokens": state.prefix_cache.queried_tokens,
                "hit_tokens": state.prefix_cache.hit_tokens,
            }
        if state.slots.limit:
            stats["max_running"] = {
                "limit": state.slots.limit,
                "waiting": state.slots.waiting,
                "max_waiting": state.slots.max_waiting,
            }
        return web.Response(body=orjson.dumps(stats), content_type=JSON_TYPE)

    async def timings(self, request: web.Request) -> web.Response:
        """GET /timings (with --record-timings): the timing records so far, as an .npz archive."""
        assert self.state.recorder is not None
        body = self.state.recorder.npz()
        return web.Response(body=body, content_type="application/octet-stream")
