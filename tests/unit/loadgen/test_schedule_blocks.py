"""--duration's schedule generated block by block: the same offsets, to the nanosecond, and the
same hash as the one-shot schedule of its count, whatever the blocks' and chunks' sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen import schedule_blocks
from loadgen.schedule import arrival_offsets_s, schedule_hash, to_ns
from loadgen.schedule_blocks import ScheduleBlocks, block_seed, block_seeds


def in_blocks(schedule: ScheduleBlocks, sizes: list[int]) -> np.ndarray:
    """Every offset of ``schedule``, taken in blocks of the given sizes, round and round."""
    parts, turn = [], 0
    while schedule.left:
        parts.append(schedule.take(sizes[turn % len(sizes)]))
        turn += 1
    return np.concatenate(parts)


@pytest.mark.parametrize(
    ("count", "rate", "burstiness", "seed"),
    [(1, 5.0, 1.0, 0), (40, 20.0, 1.0, 3), (1000, 50.0, 0.3, 7), (64, 2.0, math.inf, 1),
     (333, 1.5, 4.0, 42), (5000, 1000.0, 1.0, 11)],
)  # fmt: skip
@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_blocks_are_the_one_shot_schedule(
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    rate: float,
    burstiness: float,
    seed: int,
    chunk: int,
) -> None:
    monkeypatch.setattr(schedule_blocks, "CHUNK", chunk)  # the passes' own chunks
    one_shot = to_ns(arrival_offsets_s(count, rate, burstiness, seed))
    for sizes in ([1], [3, 10], [count], [count + 5], [13, 1, 250]):
        schedule = ScheduleBlocks(count, rate, burstiness, seed)
        assert schedule.hash() == schedule_hash(one_shot)  # known before the first block
        np.testing.assert_array_equal(in_blocks(schedule, sizes), one_shot)
        assert schedule.left == 0 and schedule.take(5).size == 0
        assert schedule.hash() == schedule_hash(one_shot)


def test_another_seed_is_another_schedule() -> None:
    a = in_blocks(ScheduleBlocks(100, 10.0, 1.0, 1), [30])
    b = in_blocks(ScheduleBlocks(100, 10.0, 1.0, 2), [30])
    assert not np.array_equal(a, b) and a[-1] == b[-1] == 10 * 10**9  # both end at N / rate


def test_at_rate_inf_the_count_is_open_and_hashed_as_taken() -> None:
    schedule = ScheduleBlocks(None, math.inf, 1.0, 0)
    assert schedule.left is None
    taken = [schedule.take(n) for n in (8, 8, 3)]
    assert all((block == 0).all() for block in taken) and schedule.taken == 19
    assert schedule.hash() == schedule_hash(np.zeros(19, dtype=np.int64))
    capped = ScheduleBlocks(10, math.inf, 1.0, 0)
    assert len(in_blocks(capped, [4])) == 10


def test_a_paced_schedule_needs_its_count_and_a_positive_rate() -> None:
    with pytest.raises(ValueError, match="count"):
        ScheduleBlocks(None, 10.0, 1.0, 0)
    with pytest.raises(ValueError, match="request-rate"):
        ScheduleBlocks(10, 0.0, 1.0, 0)
    with pytest.raises(ValueError, match="burstiness"):
        ScheduleBlocks(10, 1.0, 0.0, 0)


def test_block_seeds_are_the_run_seed_then_derived_from_it_and_the_block() -> None:
    assert block_seed(1234, 0) == 1234  # block 0: the run's own (a campaign run's) seed
    later = [block_seed(1234, k) for k in range(1, 50)]
    assert len(set(later)) == 49 and all(0 <= s < 2**31 for s in later)
    assert later[0] == block_seed(1234, 1) != block_seed(1235, 1)
    # stable across versions and machines: SHA-256 of "loadgen-block/1234/1"
    assert block_seed(1234, 1) == 0x5A46BAFE
    assert block_seeds(7, 40, 16) == [7, block_seed(7, 1), block_seed(7, 2)]
    assert block_seeds(7, 0, 16) == [7]
