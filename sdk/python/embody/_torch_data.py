"""The torch side of embody.data, imported only by Dataset.torch(): torch is optional.

An IterableDataset rather than a map-style one with a DistributedSampler: the rank's part comes
from storage/partition.h's permutation (the engine's, the same on every rank without talking),
and the DataLoader's workers then take every num_workers-th item of it, so together they read the
rank's part once, in an order fixed by (seed, epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Optional

import torch.utils.data

if TYPE_CHECKING:
    from embody.data import Dataset


class TorchItems(torch.utils.data.IterableDataset):  # type: ignore[misc]
    """This rank's samples or episodes of a Dataset, as dicts the default collate stacks."""

    def __init__(self, ds: "Dataset", *, kind: str, shuffle: bool, seed: int,
                 keys: Optional[list[str]], rank: Optional[int],
                 world_size: Optional[int], read_ahead: int = 0) -> None:
        super().__init__()
        self.ds = ds
        self.read_ahead = read_ahead
        self.kind = kind
        self.shuffle = shuffle
        self.seed = seed
        self.keys = keys
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The next iteration reads epoch ``epoch``'s permutation (call before each epoch)."""
        self.epoch = epoch

    def _items(self) -> list[int]:
        count = self.ds.num_samples if self.kind == "samples" else self.ds.num_episodes
        return self.ds.partition(count, rank=self.rank, world_size=self.world_size,
                                 seed=self.seed, epoch=self.epoch, shuffle=self.shuffle)

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        items = self._items()
        info = torch.utils.data.get_worker_info()
        if info is not None:
            items = items[info.id::info.num_workers]
        if self.kind == "episodes":
            for e in items:
                episode = self.ds.read_episode(e, self.keys)
                yield {**episode.arrays, "index": episode.index, "frames": episode.frames}
            return
        import numpy as np
        horizon = self.ds.action_horizon
        for sample in self.ds.read_samples(items, keys=self.keys, read_ahead=self.read_ahead):
            item: dict[str, Any] = sample.values
            chunk = sample.action_chunk
            if chunk is not None:
                n = len(chunk)
                if n < horizon:  # near the episode's end: zeros after the real rows
                    padded = np.zeros((horizon,) + chunk.shape[1:], dtype=chunk.dtype)
                    padded[:n] = chunk
                    chunk = padded
                mask = np.zeros(horizon, dtype=bool)
                mask[:n] = True
                item["action_chunk"] = chunk
                item["action_mask"] = mask
            item.update(index=sample.index, episode=sample.episode, frame=sample.frame,
                        tokens=sample.tokens)
            yield item
