"""A worker's requests as blocks: its SHARD, then --duration's TOPUP blocks appended as they
come, read by release order, let go once released."""

from __future__ import annotations

import numpy as np
import pytest

from workers.blocks import ShardBlocks
from workers.protocol import (
    Codec,
    Kind,
    Shard,
    WorkerConfig,
    decode_requests,
    decode_shard,
    shard_message,
    topup_message,
)

CODEC = Codec.new()
CONFIG = WorkerConfig(
    url="http://127.0.0.1:8000/v1/completions",
    headers={},
    request_id_prefix=None,
    max_concurrency=4,
    preopen_url="http://127.0.0.1:8000/v1/models",
    preopen_connections=4,
    topup=True,
)


def received(parts: list) -> tuple[Kind, dict, list[bytes]]:
    return CODEC.decode([bytes(p) for p in parts], from_worker=False)


def block(first_index: int, count: int, due_ns: int = 0) -> Shard:
    """A TOPUP's requests, through the wire: run indices from ``first_index``."""
    bodies = [f"body {first_index + k}".encode() for k in range(count)]
    indices = np.arange(first_index, first_index + count)
    scheduled = np.full(count, due_ns) + np.arange(count)
    kind, fields, frames = received(
        topup_message(CODEC, bodies, indices, scheduled, np.full(count, 7), last=False)
    )
    assert kind is Kind.TOPUP and fields == {"last": False}
    return decode_requests(CONFIG, frames)


def first_shard(count: int) -> Shard:
    bodies = [f"body {k}".encode() for k in range(count)]
    _, fields, frames = received(
        shard_message(CODEC, CONFIG, bodies, np.arange(count), np.arange(count))
    )
    return decode_shard(fields, frames)


def test_blocks_read_as_one_shard_in_release_order() -> None:
    blocks = ShardBlocks(first_shard(3))
    assert (blocks.size, blocks.final) == (3, False)  # topup: blocks may follow
    blocks.append(block(10, 2, due_ns=100), last=False)
    blocks.append(block(20, 0), last=False)  # an empty part: nothing joins
    blocks.append(block(30, 4, due_ns=200), last=True)
    assert (blocks.size, blocks.final, len(blocks.blocks)) == (9, True, 3)
    assert [blocks.index(k) for k in range(9)] == [0, 1, 2, 10, 11, 30, 31, 32, 33]
    assert [blocks.body(k) for k in (0, 3, 8)] == [b"body 0", b"body 10", b"body 33"]
    assert [blocks.due_ns(k) for k in (2, 3, 4, 5)] == [2, 100, 101, 200]
    assert blocks.guard(4) == 7 and blocks.guard(0) == 0
    with pytest.raises(IndexError):
        blocks.body(9)


def test_released_blocks_are_let_go_and_the_rest_is_still_counted() -> None:
    blocks = ShardBlocks(first_shard(3))
    blocks.append(block(10, 2, due_ns=100), last=False)
    blocks.append(block(30, 4, due_ns=200), last=False)
    assert blocks.due_count(now_ns=150, released=1) == 4  # 1, 2 of the shard; 10, 11
    assert blocks.due_count(now_ns=201, released=0) == 7
    blocks.let_go(4)  # the shard's 3 are released: it goes; the second block is half sent
    assert len(blocks.blocks) == 2 and blocks.index(4) == 11
    blocks.let_go(9)  # the last block stays (its requests' fields may still be read)
    assert len(blocks.blocks) == 1 and blocks.index(8) == 33
    assert blocks.indices_from(7) == [32, 33]  # never released: reported as not sent
    assert blocks.due_count(now_ns=10**9, released=7) == 2


def test_a_shard_without_topups_is_final() -> None:
    bodies = [b"a"]
    config = WorkerConfig(**{**CONFIG.__dict__, "topup": False})
    _, fields, frames = received(shard_message(CODEC, config, bodies, [0], [0]))
    assert ShardBlocks(decode_shard(fields, frames)).final
