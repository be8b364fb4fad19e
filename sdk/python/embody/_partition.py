"""Which items (samples or episodes) each rank reads in an epoch: storage/partition.h, bit for bit.

Every rank computes the same epoch permutation from (seed, epoch) alone, with no communication,
and takes a contiguous slice of it: rank r of W gets positions [r*N // W, (r+1)*N // W). The parts
are disjoint, cover all N items, differ in size by at most one, and are the same on every run,
and the same as embody-engine's for the same seed and epoch: the permutation is the C++
Fisher-Yates shuffle driven by SplitMix64 (common/rng.h), redone here in exact integer arithmetic.
"""

from __future__ import annotations

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_EPOCH_MIX = 0xD1B54A32D192ED03


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class SplitMix64:
    """common::Rng: NextU64 and Below, the two draws a partition uses."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next_u64(self) -> int:
        self.state = (self.state + _GOLDEN) & _MASK
        return _mix(self.state)

    def below(self, bound: int) -> int:
        """Uniform in [0, bound) without modulo bias, as the C++ (rejecting the short stripe)."""
        limit = _MASK - _MASK % bound
        while True:
            x = self.next_u64()
            if x < limit:
                return x % bound


def epoch_order(count: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """The order of all ``count`` items in an epoch (storage::EpochOrder)."""
    order = list(range(count))
    if not shuffle or count < 2:
        return order
    rng = SplitMix64(SplitMix64(seed).next_u64() ^ ((epoch * _EPOCH_MIX) & _MASK))
    rng.next_u64()
    # The loop of the C++, with its state in locals: a million items take about a second.
    state = rng.state
    for i in range(count - 1, 0, -1):
        bound = i + 1
        limit = _MASK - _MASK % bound
        while True:
            state = (state + _GOLDEN) & _MASK
            x = _mix(state)
            if x < limit:
                break
        j = x % bound
        order[i], order[j] = order[j], order[i]
    return order


def partition(count: int, *, rank: int, world_size: int, seed: int = 0, epoch: int = 0,
              shuffle: bool = True) -> list[int]:
    """This rank's items for the epoch, in the order to read them (storage::Partition)."""
    if world_size < 1 or rank < 0 or rank >= world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size}")
    order = epoch_order(count, seed, epoch, shuffle)
    return order[rank * count // world_size:(rank + 1) * count // world_size]
