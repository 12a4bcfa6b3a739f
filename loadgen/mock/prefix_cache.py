"""The mock's prefix cache: how many of a prompt's tokens a vLLM-style automatic prefix cache
would already hold, so that the time to first token can charge prefill for the rest only.

As vLLM's: the prompt is cut into blocks of ``BLOCK_TOKENS`` tokens, each block's key chains
the previous block's key with its token ids, and the cached part of a prompt is its longest run
of leading full blocks already seen. Every full block of a served prompt is then cached; the
least recently used are evicted beyond ``capacity_blocks``. A conversation whose next turn
repeats the history it was sent before (its answers included) so finds all but its new tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 16  # vLLM's default --block-size
CAPACITY_BLOCKS = 1 << 18  # 4 Mi tokens; a real server's KV cache holds less


class PrefixCache:
    """Full blocks of the prompts served, least recently used first."""

    def __init__(self, capacity_blocks: int = CAPACITY_BLOCKS) -> None:
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.queried_tokens = 0  # prompt tokens looked up, as vLLM's prefix_cache_queries
        self.hit_tokens = 0  # of which found cached, as vLLM's prefix_cache_hits

    def serve(self, ids: Sequence[int]) -> int:
        """The tokens of ``ids`` not in the cache (to prefill); then cache its full blocks."""
        key, hit, missing = 0, 0, False
        for start in range(0, len(ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
            key = hash((key, *ids[start : start + BLOCK_TOKENS]))
            if not missing and key in self.blocks:
                hit += BLOCK_TOKENS
                self.blocks.move_to_end(key)
                continue
            missing = True
            self.blocks[key] = None
        while len(self.blocks) > self.capacity_blocks:
            self.blocks.popitem(last=False)
        self.queried_tokens += len(ids)
        self.hit_tokens += hit
        return len(ids) - hit

    def clear(self) -> None:
        """Forget every cached block (a server's reset); the counters go on, as vLLM's do."""
        self.blocks.clear()
