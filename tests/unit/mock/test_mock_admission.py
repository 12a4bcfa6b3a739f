"""The mock's --max-running queue: N requests run at once, the rest wait in arrival order and
take a slot as one is given back; a queued request that goes away leaves the queue; and the
capacity formula. In one event loop, no sockets."""

from __future__ import annotations

import asyncio

import pytest

from loadgen.mock.admission import RunningSlots, capacity_rps


async def _hold(slots: RunningSlots, name: int, order: list[int], hold_s: float) -> None:
    await slots.acquire()
    order.append(name)
    await asyncio.sleep(hold_s)
    slots.release()


def test_at_most_n_run_and_the_rest_go_in_arrival_order() -> None:
    async def main() -> tuple[list[int], list[int]]:
        slots = RunningSlots(2)
        order: list[int] = []
        peaks: list[int] = []
        tasks = []
        for name in range(6):
            tasks.append(asyncio.create_task(_hold(slots, name, order, 0.01)))
            await asyncio.sleep(0)  # each arrives after the one before
        while not all(task.done() for task in tasks):
            peaks.append(slots.running)
            await asyncio.sleep(0.001)
        assert (slots.running, slots.waiting) == (0, 0)
        assert slots.max_waiting == 4
        return order, peaks

    order, peaks = asyncio.run(main())
    assert order == list(range(6))
    assert max(peaks) == 2


def test_a_new_request_queues_behind_waiting_ones_even_when_a_slot_frees() -> None:
    async def main() -> list[int]:
        slots = RunningSlots(1)
        order: list[int] = []
        await slots.acquire()  # the one running
        first = asyncio.create_task(_hold(slots, 1, order, 0))
        await asyncio.sleep(0)
        slots.release()  # handed to the first waiting, not left free for a newcomer
        assert slots.running == 1
        late = asyncio.create_task(_hold(slots, 2, order, 0))
        await asyncio.gather(first, late)
        return order

    assert asyncio.run(main()) == [1, 2]


def test_a_queued_request_that_goes_away_leaves_its_place() -> None:
    async def main() -> tuple[int, int]:
        slots = RunningSlots(1)
        await slots.acquire()
        gone = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        assert slots.waiting == 1
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        slots.release()
        return slots.running, slots.waiting

    assert asyncio.run(main()) == (0, 0)


def test_a_request_cancelled_after_its_turn_came_passes_the_slot_on() -> None:
    async def main() -> int:
        slots = RunningSlots(1)
        await slots.acquire()
        handed = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        slots.release()  # its turn is set ...
        handed.cancel()  # ... and it goes away before it runs
        with pytest.raises(asyncio.CancelledError):
            await handed
        return slots.running

    assert asyncio.run(main()) == 0


def test_no_limit_never_queues() -> None:
    async def main() -> tuple[int, int]:
        slots = RunningSlots(0)
        for _ in range(100):
            await slots.acquire()
        return slots.running, slots.waiting

    assert asyncio.run(main()) == (100, 0)


def test_capacity_is_slots_over_the_time_a_request_holds_one() -> None:
    # 4 slots, each held 10 ms + 9 * 2 ms = 28 ms: 4 / 0.028 requests per second.
    assert capacity_rps(4, 0.010, 0.002, 10) == pytest.approx(4 / 0.028)
    assert capacity_rps(1, 0.1, 0.0, 1) == pytest.approx(10.0)
