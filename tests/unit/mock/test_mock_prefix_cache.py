"""The mock's prefix cache (--prefill-us-per-token): leading full blocks already served are
found, the rest is prefilled, and the least recently used blocks go first; without sockets."""

from __future__ import annotations

from loadgen.mock.prefix_cache import BLOCK_TOKENS, PrefixCache


def test_a_repeated_prefix_is_found_block_by_block() -> None:
    cache = PrefixCache()
    first = list(range(40))  # two full blocks and 8 tokens
    assert cache.serve(first) == 40
    assert cache.serve(first) == 40 - 2 * BLOCK_TOKENS  # the partial block is never cached
    turn = first + list(range(100, 130))  # the history, then new tokens
    assert cache.serve(turn) == len(turn) - 2 * BLOCK_TOKENS
    assert cache.serve(turn) == len(turn) - 4 * BLOCK_TOKENS
    assert (cache.queried_tokens, cache.hit_tokens) == (40 * 2 + 70 * 2, 32 + 32 + 64)


def test_a_block_counts_only_after_the_same_prefix() -> None:
    cache = PrefixCache()
    cache.serve([1] * 16 + [2] * 16)
    assert cache.serve([3] * 16 + [2] * 16) == 32  # same second block, other first: a miss
    assert cache.serve([1] * 16 + [3] * 16) == 16  # the first block is shared


def test_the_least_recently_used_blocks_are_evicted() -> None:
    cache = PrefixCache(capacity_blocks=2)
    a, b = [1] * 16, [2] * 16
    cache.serve(a)
    cache.serve(b)
    cache.serve(a)  # a is used again: b is now the oldest
    cache.serve([3] * 16)
    assert cache.serve(a) == 0
    assert cache.serve(b) == 16
