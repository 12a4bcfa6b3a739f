"""Shard planning: which worker sends which request, and how each worker is configured."""

from __future__ import annotations

import numpy as np

from loadgen.audio_payloads import content_type
from loadgen.backends import BACKENDS
from loadgen.config import RunConfig
from loadgen.config.sections import Server
from loadgen.fleet.fanout import ShardPlan
from loadgen.schedule import assign_workers, split_concurrency
from loadgen.server.client import auth_headers, proxy_for
from loadgen.session.fail_fast import FIRST
from loadgen.session.prepare import Prepared
from workers.pooling import JSON_BODY, POOLING_FORMS
from workers.protocol import WorkerConfig

PREOPEN_LIMIT = 4096  # connections a worker opens before t0, at most
JSON_TYPE = "application/json"
GUARD_SLACK = 64  # token events past twice max_tokens before a stream counts as endless


def plan_shards(
    config: RunConfig, prepared: Prepared, num_workers: int, topup: bool = False
) -> list[ShardPlan]:
    """One plan per worker: its requests, their bodies and schedule, and its configuration;
    ``topup``: --duration's blocks follow (loadgen/session/topup.py)."""
    owner = request_owners(prepared, num_workers, config.concurrency)
    cap = config.concurrency or 0
    shares = split_concurrency(cap, num_workers)
    headers = auth_headers(config.headers)
    backend = BACKENDS[config.backend]
    plans = []
    for w in range(num_workers):
        indices = np.flatnonzero(owner == w)
        worker_config = WorkerConfig(
            url=config.api_url,
            headers=headers,
            # Upstream's prefix_repetition requests carry no id, so no x-request-id.
            request_id_prefix=None
            if config.dataset_name == "prefix_repetition"
            else config.request_id_prefix,
            max_concurrency=cap,
            preopen_url=f"{config.server_url}/v1/models",
            preopen_connections=preopen_count(cap, shares[w], len(indices)),
            keep_text="always" if config.save_detailed else "when_no_usage",
            chat=backend.answer == "chat",  # openai-chat, and openai-audio
            response_form=response_form(config),
            proxy=proxy_for(config.api_url),
            insecure=config.insecure,
            request_timeout_s=config.request_timeout,
            idle_timeout_s=config.idle_timeout,
            connect_timeout_s=config.connect_timeout,
            report_first=FIRST if config.fail_fast else 0,
            multi_turn=prepared.turns is not None,
            session_prefix=config.request_id_prefix or "",
            content_type=content_type() if backend.multipart else JSON_TYPE,
            deadline_ns=round(config.duration * 1e9) if config.duration else 0,
            grace_ns=round(config.duration_grace_s * 1e9),
            topup=topup,
        )
        plans.append(
            ShardPlan(
                config=worker_config,
                bodies=[prepared.bodies[i] for i in indices],
                indices=indices,
                scheduled_ns=prepared.scheduled_ns[indices],
                max_events=output_guard(config, prepared.dataset.output_lens[indices]),
                turns=prepared.turns.frame(indices) if prepared.turns is not None else None,
            )
        )
    return plans


def request_owners(prepared: Prepared, num_workers: int, cap: int | None) -> np.ndarray:
    """The worker of each request, as ``assign_workers`` deals them; a conversation's turns all
    go to the worker its first turn goes to (its history lives there)."""
    if prepared.turns is None:
        return assign_workers(prepared.num_requests, num_workers, cap)
    conversation = prepared.turns.conversation
    return assign_workers(prepared.turns.num_conversations, num_workers, cap)[conversation]


def preopen_count(cap: int, share: int, num_requests: int) -> int:
    """Connections a worker opens before t0: with a cap, its share of the cap (the credits it
    starts with), so the workers' pre-opened connections add up to the cap and never exceed it
    (each opening the whole cap opened W times the cap, and a server with a fixed pool of
    connection threads closed the extra ones unused); a share above PREOPEN_LIMIT is opened
    whole, so a burst at t0 opens none. Without a cap (0), one per request, up to
    PREOPEN_LIMIT. Never more than its requests. Credits that gather at one worker open the
    rest during the run (counted in ``loadgen.new_connections_during_run``)."""
    if cap:
        return min(num_requests, share)
    return min(num_requests, PREOPEN_LIMIT)


def response_form(config: RunConfig) -> str:
    """How the workers read an answer: an SSE stream, or a pooling answer in the form its
    ``encoding_format`` (given with --extra-body) makes it."""
    if not config.pooling:
        return "sse"
    encoding_format = (config.extra_body or {}).get("encoding_format")
    return encoding_format if encoding_format in POOLING_FORMS else JSON_BODY


def output_guard(config: Server, output_lens: np.ndarray) -> np.ndarray:
    """The most token events each request may stream before it fails as endless: twice its
    max_tokens and 64 more (a server may split or repeat a little; one that ignores max_tokens
    goes far past), so a stream that never ends cannot grow a worker's memory without bound.
    0 (no guard) for pooling answers and requests without a max_tokens."""
    if config.pooling:
        return np.zeros(len(output_lens), dtype=np.int64)
    lens = np.asarray(output_lens, dtype=np.int64)
    return np.where(lens > 0, 2 * lens + GUARD_SLACK, 0)
