"""The global arrival schedule of a --duration run, generated block by block.

It is the schedule loadgen/schedule.py defines for N requests (``arrival_offsets_s``: gamma
gaps drawn in request order from ``RandomState(seed)``, summed, rescaled so that the last one
is at N / rate), to the nanosecond, without ever holding all N in memory: the gaps come from
one generator in chunks (the legacy generator draws one gap after another, so chunks give the
same gaps as one draw), the sums carry from one chunk to the next in the same order of
additions as ``np.cumsum``, and each offset is scaled by the same factor. The factor needs the
sum of all N gaps, so a first pass draws them once for it; a second pass hashes the schedule
(``schedule_hash``'s value, one value for the run, known before t0); the run's blocks are a
third. Each pass holds one chunk.

At rate inf every offset is 0 and the count is open: the hash is of the requests the run
prepared, known when it ends.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator

import numpy as np

from loadgen.schedule import to_ns

CHUNK = 1 << 18  # gaps drawn at a time by the passes (2 MB an array)


class ScheduleBlocks:
    """One seeded schedule of ``num_requests`` (None: open, at rate inf), handed out in
    blocks by ``take``, in order."""

    def __init__(self, num_requests: int | None, rate: float, burstiness: float, seed: int) -> None:
        if not burstiness > 0:
            raise ValueError(f"--burstiness must be > 0, got {burstiness}")
        if not rate > 0:
            raise ValueError(f"--request-rate must be > 0, got {rate}")
        if num_requests is not None and num_requests < 1:
            raise ValueError("a schedule of no request")
        if num_requests is None and not math.isinf(rate):
            raise ValueError("a paced schedule needs its count")
        self.num_requests, self.rate, self.burstiness, self.seed = (
            num_requests,
            rate,
            burstiness,
            seed,
        )
        self.taken = 0
        self._hash = hashlib.sha256()
        self._total = 0.0  # the sum of every gap: the rescaling's divisor
        self._last_s = 0.0
        self._offsets: Iterator[np.ndarray] | None = None
        if not self.unpaced:
            assert num_requests is not None
            self._last_s = num_requests / rate
            for sums in self._sums():
                self._total = float(sums[-1])
            for offsets in self._scaled():
                self._hash.update(to_ns(offsets).astype("<i8").tobytes())
            self._offsets = self._scaled()
            self._pending = np.zeros(0, dtype=np.int64)

    @property
    def unpaced(self) -> bool:
        """Every request due at t0 (rate inf)."""
        return math.isinf(self.rate)

    @property
    def left(self) -> int | None:
        """Requests of the schedule not yet taken (None: open)."""
        return None if self.num_requests is None else self.num_requests - self.taken

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` offsets (int64 ns from t0), fewer where the schedule ends."""
        if self.left is not None:
            count = min(count, self.left)
        if self.unpaced:
            block = np.zeros(count, dtype=np.int64)
            self._hash.update(block.astype("<i8").tobytes())
            self.taken += count
            return block
        parts, have = [self._pending], len(self._pending)
        assert self._offsets is not None
        while have < count:
            chunk = to_ns(next(self._offsets))
            parts.append(chunk)
            have += len(chunk)
        joined = np.concatenate(parts)
        block, self._pending = joined[:count], joined[count:]
        self.taken += count
        return block.astype(np.int64)

    def hash(self) -> str:
        """``schedule_hash`` of the whole schedule (paced), or of the offsets taken (rate inf)."""
        return self._hash.hexdigest()[:16]

    def _gaps(self) -> Iterator[np.ndarray]:
        assert self.num_requests is not None
        rng = np.random.RandomState(self.seed)
        theta = 1.0 / (self.rate * self.burstiness)
        for start in range(0, self.num_requests, CHUNK):
            size = min(CHUNK, self.num_requests - start)
            if math.isinf(self.burstiness):
                yield np.full(size, 1.0 / self.rate)
            else:
                yield rng.gamma(shape=self.burstiness, scale=theta, size=size)

    def _sums(self) -> Iterator[np.ndarray]:
        """The cumulative sums, chunk by chunk, added in np.cumsum's order."""
        carry: float | None = None
        for gaps in self._gaps():
            if carry is None:
                sums = np.cumsum(gaps)
            else:
                sums = np.cumsum(np.concatenate(([carry], gaps)))[1:]
            carry = float(sums[-1])
            yield sums

    def _scaled(self) -> Iterator[np.ndarray]:
        """The offsets in seconds, chunk by chunk, rescaled as ``arrival_offsets_s`` does."""
        assert self.num_requests is not None
        done = 0
        for sums in self._sums():
            done += len(sums)
            if self._total == 0:
                yield sums  # (as arrival_offsets_s: no rescaling)
                continue
            offsets = sums * (self._last_s / self._total)
            if done == self.num_requests:
                offsets[-1] = self._last_s  # the product can miss it by one ulp
            yield offsets


def block_seed(seed: int, block: int) -> int:
    """The seed block ``block`` draws its prompts with: ``seed`` itself for block 0, else

        int(SHA-256("loadgen-block/{seed}/{block}")[:4], big-endian) mod 2^31

    (``seed``: the run's, a campaign's point and run seed included)."""
    if block == 0:
        return seed
    text = f"loadgen-block/{seed}/{block}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % (1 << 31)


def block_seeds(seed: int, prepared: int, block: int) -> list[int]:
    """The seeds of the blocks of ``block`` requests that prepared ``prepared`` requests."""
    return [block_seed(seed, k) for k in range(max(1, math.ceil(prepared / block)))]
