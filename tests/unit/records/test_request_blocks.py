"""RequestBlocks: per-request values held a block at a time, let go once written."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.records.request_blocks import RequestBlocks


def blocks_of(*sizes: int) -> RequestBlocks:
    """Blocks of ``sizes`` requests whose value ``a`` is 10 x the request's index."""
    base = 0
    out = None
    for size in sizes:
        values = np.arange(base, base + size, dtype=np.int64)
        if out is None:
            out = RequestBlocks(a=values * 10, b=values + 1)
        else:
            out.add(a=values * 10, b=values + 1)
        base += size
    assert out is not None
    return out


def test_values_are_taken_across_blocks_in_any_order() -> None:
    blocks = blocks_of(3, 0, 4, 2)
    index = np.array([8, 0, 5, 3, 2, 7], dtype=np.int64)
    assert blocks.take("a", index).tolist() == (index * 10).tolist()
    assert blocks.take("b", index[:1]).tolist() == [9]
    assert blocks.take("a", np.zeros(0, np.int64)).tolist() == []
    assert blocks.size == 9


def test_a_block_is_let_go_once_each_of_its_requests_is_done() -> None:
    blocks = blocks_of(3, 4)
    blocks.done(np.array([0, 4, 2]))
    assert [base for base, _ in blocks.held()] == [0, 3]
    blocks.done(np.array([1]))
    assert [base for base, _ in blocks.held()] == [3]  # block 0 done: let go
    with pytest.raises(LookupError, match="request 1: its block was let go"):
        blocks.take("a", np.array([1]))
    assert blocks.take("a", np.array([6])).tolist() == [60]  # block 1 still held


def test_whole_lays_read_back_values_under_the_blocks_still_held() -> None:
    blocks = blocks_of(2, 3)
    blocks.done(np.array([0, 1, 2]))  # block 0 let go; block 1 has 3, 4 left
    known = {"a": np.array([0, 10, 20, -1, -1]), "b": np.array([1, 2, 3, -1, -1])}
    whole = blocks.whole(known)
    assert whole["a"].tolist() == [0, 10, 20, 30, 40]
    assert whole["b"].tolist() == [1, 2, 3, 4, 5]
    assert known["a"].tolist() == [0, 10, 20, -1, -1]  # not written into
    # Nothing read back (no records file): every block is held, every value known.
    assert blocks_of(2, 3).whole()["a"].tolist() == [0, 10, 20, 30, 40]


def test_requests_outside_the_run_and_mismatched_blocks_are_refused() -> None:
    blocks = blocks_of(2)
    with pytest.raises(LookupError, match="not the run's"):
        blocks.take("a", np.array([2]))
    with pytest.raises(LookupError, match="not the run's"):
        blocks.done(np.array([-1]))
    with pytest.raises(ValueError, match="a block has"):
        blocks.add(a=np.zeros(1, np.int64))
