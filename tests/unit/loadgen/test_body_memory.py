"""The request bodies live for the whole run: each must hold about its own size in memory, not
the 4 KiB buffer orjson (3.12 on) serializes into and never shrinks."""

from __future__ import annotations

import tracemalloc

from loadgen.payloads import serialize_bodies


def test_each_body_holds_about_its_own_size() -> None:
    n = 1000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        bodies = serialize_bodies(
            "vllm",
            ["m"] * n,
            ["a short prompt"] * n,
            [32] * n,
            logprobs=None,
            ignore_eos=False,
            extra_body=None,
        )
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    size = len(bodies[0])
    assert size < 200
    # Each bytes object costs its length plus a header of ~33 bytes, the list 8 per entry.
    assert held < n * (size + 33 + 8 + 64), f"{held / n:.0f} bytes per body of {size}"
