"""embody.data: the episodes and samples of an imported dataset, read straight from its shards.

    ds = embody.data.open("dataset:libero-10")          # or "dir:/abs/path", or a path
    for sample in ds.samples(epoch=epoch):             # this rank's part, shuffled per epoch
        sample.values["obs/agentview_image"]           # numpy arrays, one frame of each key
        sample.action_chunk                            # actions t .. t+H-1 (fewer at the end)
    loader = torch.utils.data.DataLoader(ds.torch(), batch_size=32, num_workers=4)

A dataset is the directory embody-data writes (storage/dataset_writer.h): ``dataset.json`` (the
manifest: schema, token mapping, shards in order, statistics) and shard files
(embody/_shard.py has their format). This module reads them as storage/dataset_reader.h does:
every shard is checked against the manifest at open (index checksum, episode and frame counts,
schema), every chunk against its CRC-32 as it is read, and a damaged byte is a ChecksumError
naming the file, episode, key and chunk. Episodes are numbered 0..E-1 across shards in manifest
order, samples (one per frame) 0..N-1 in episode order; a sample is every key at frame t plus the
action chunk, rows t .. min(T, t+H)-1 of the ``actions`` key with H the manifest's action horizon
(at least 1), exactly the C++ reader's Sample.

Sharding across ranks is storage/partition.h's, bit for bit (embody/_partition.py): the same
(seed, epoch) gives every rank a disjoint, contiguous slice of the same permutation, so the
ranks of a job together read every item once per epoch, as the engine's loader does. Ranks come
from ``RANK``/``WORLD_SIZE`` (torchrun) or Open MPI's variables (an Embody job's mpirun).

numpy is imported on first use (jobs that only report need not have it); ``torch()`` needs
torch. Reads of samples go through a cache of verified chunks (64 MiB by default), so reading a
chunk's frames one after the other reads and checks it once.
"""

from __future__ import annotations

import bisect
import builtins
import collections
import functools
import json
import os
import re
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from embody import _env
from embody._errors import DataError
from embody._partition import partition as _partition
from embody._shard import DTYPE_BY_NAME, Key, ShardReader

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Dataset", "Episode", "Key", "Sample", "open", "resolve"]

MANIFEST_FILE = "dataset.json"
MANIFEST_VERSION = 1
ACTION_KEY = "actions"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_MAX_VERSION = 1_000_000


_np: Any = None


def _numpy() -> Any:
    global _np
    if _np is None:
        try:
            import numpy
        except ImportError:
            raise ImportError("embody.data needs numpy (Debian: apt-get install python3-numpy; "
                              "elsewhere: pip install numpy)") from None
        _np = numpy
    return _np


def resolve(ref: str) -> str:
    """The directory a dataset reference names.

    - ``dir:/abs/path`` or an absolute path: that directory.
    - ``dataset:NAME`` / ``dataset:NAME@VERSION``: a stored dataset of the job's tenant, bound to
      the job at submit. Its directory is in ``EMBODY_DATASETS``, a JSON object from the names
      the job gave to directories; a bare NAME found only with versions takes the highest.
    """
    if ref.startswith("dir:"):
        path = ref[len("dir:"):]
        if not os.path.isabs(path):
            raise ValueError(f"{ref!r}: a dir: dataset needs an absolute path")
        return path
    if ref.startswith("dataset:"):
        return _resolve_stored(ref)
    if ref.startswith("sim:"):
        raise ValueError(f"{ref!r} is a stream embody-engine generates, not a stored dataset")
    if os.path.isabs(ref):
        return ref
    raise ValueError(f"{ref!r}: expected \"dataset:NAME[@VERSION]\", \"dir:/abs/path\" or an "
                     "absolute path")


def _resolve_stored(ref: str) -> str:
    text = ref[len("dataset:"):]
    name, _, version = text.partition("@")
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{ref!r}: NAME must be 1-128 letters, digits, '-', '_' or '.'")
    if version and (not version.isdigit() or not 1 <= int(version) <= _MAX_VERSION):
        raise ValueError(f"{ref!r}: VERSION must be an integer from 1 to {_MAX_VERSION}")
    bound_text = os.environ.get("EMBODY_DATASETS", "")
    if not bound_text:
        raise DataError(f"{ref}: no dataset is bound to this process (EMBODY_DATASETS is not "
                        "set); name the dataset in the job's spec, or open it as dir:PATH")
    try:
        bound = json.loads(bound_text)
    except ValueError:
        bound = None
    if not isinstance(bound, dict):
        raise DataError("EMBODY_DATASETS is not a JSON object of dataset names to directories")
    key = f"{name}@{int(version)}" if version else name
    path = bound.get(key)
    if path is None and not version:
        versions = [int(k.split("@", 1)[1]) for k in bound
                    if k.startswith(name + "@") and k.split("@", 1)[1].isdigit()]
        if versions:
            path = bound.get(f"{name}@{max(versions)}")
    if not isinstance(path, str) or not os.path.isabs(path):
        known = ", ".join(sorted(bound)) or "none"
        raise DataError(f"{ref}: not among the datasets bound to this job ({known})")
    return path


def _check_manifest(m: Any, path: str) -> None:
    """What DatasetManifest::FromJson insists on, and every field the reader uses typed."""
    def bad(what: str) -> DataError:
        return DataError(f"{path}: {what}")

    def count(v: Any) -> bool:
        return type(v) is int and v >= 0

    if not isinstance(m, dict) or m.get("format") != "embody-dataset":
        raise bad("not an embody dataset manifest")
    if m.get("version") != MANIFEST_VERSION:
        raise bad(f"unsupported manifest version {m.get('version')!r}")
    try:
        horizon = m["token_mapping"]["action_horizon"]
        episodes, frames = m["stats"]["episodes"], m["stats"]["frames"]
        keys, shards = list(m["keys"]), list(m["shards"])
    except (KeyError, TypeError):
        raise bad("manifest without keys, shards, token_mapping or stats") from None
    if type(horizon) is not int or not 0 <= horizon <= 4096:
        raise bad("action horizon must be an integer in [0, 4096]")
    for k in keys:
        if (not isinstance(k, dict) or not isinstance(k.get("name"), str)
                or k.get("dtype") not in DTYPE_BY_NAME or not isinstance(k.get("shape"), list)
                or not all(type(d) is int and d > 0 for d in k["shape"])):
            raise bad(f"bad key {k!r}")
    next_episode = total_frames = 0
    for s in shards:
        file = s.get("file") if isinstance(s, dict) else None
        if not isinstance(file, str) or file in ("", ".", "..") or "/" in file:
            raise bad(f"bad shard file name {file!r}")
        if not all(count(s.get(f)) for f in ("first_episode", "episodes", "frames", "bytes",
                                             "index_crc32")):
            raise bad(f"shard {file}: counts must be integers >= 0")
        if s["first_episode"] != next_episode or s["episodes"] == 0:
            raise bad(f"shard {file} episode range is not contiguous")
        next_episode += s["episodes"]
        total_frames += s["frames"]
    if episodes != next_episode or frames != total_frames:
        raise bad("shard counts do not add up to the statistics")


@dataclass
class Episode:
    """One episode: ``arrays`` maps each key read to a (frames, *shape) array."""

    index: int
    frames: int
    attributes: dict[str, str]
    arrays: dict[str, "np.ndarray"]


@dataclass
class Sample:
    """Every key read at frame ``frame`` of episode ``episode`` (``values``: one frame each, of
    the key's shape), and the action chunk after it: rows frame .. min(frames, frame+H)-1 of
    the action key, (n, *shape), n < H near the episode's end; None without an action key."""

    index: int
    episode: int
    frame: int
    tokens: int
    values: dict[str, "np.ndarray"]
    action_chunk: Optional["np.ndarray"]


class _ChunkCache:
    """Verified chunks, each kept as a read-only (frames, *shape) array over the bytes read, by
    an int naming (episode, key, chunk); least recently used first out, bounded in bytes. After
    a fork the child starts with an empty one: a lock held by a thread that did not come along
    would never be released."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._reset()
        _CACHES.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._items: collections.OrderedDict[int, "np.ndarray"] = collections.OrderedDict()
        self._bytes = 0

    def get(self, key: int) -> Optional["np.ndarray"]:
        with self._lock:
            chunk = self._items.get(key)
            if chunk is not None:
                self._items.move_to_end(key)
            return chunk

    def put(self, key: int, chunk: "np.ndarray") -> None:
        """Keeps the chunk unless it alone exceeds the capacity (storage::ChunkCache::Put)."""
        n = chunk.nbytes
        if n > self.capacity:
            return
        with self._lock:
            if key in self._items:  # another thread read it meanwhile
                return
            self._items[key] = chunk
            self._bytes += n
            while self._bytes > self.capacity:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.nbytes


_CACHES: "weakref.WeakSet[_ChunkCache]" = weakref.WeakSet()


def _reset_caches_after_fork() -> None:
    for cache in list(_CACHES):
        cache._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_caches_after_fork)


class Dataset:
    """An open dataset directory. Safe to use from many threads; picklable (a copy reopens the
    directory), so DataLoader workers can be spawned as well as forked."""

    def __init__(self, path: str, *, cache_bytes: int = 64 << 20,
                 action_key: str = ACTION_KEY) -> None:
        self.path = path
        self._options = {"cache_bytes": cache_bytes, "action_key": action_key}
        manifest_path = os.path.join(path, MANIFEST_FILE)
        try:
            with builtins.open(manifest_path, "rb") as f:
                self.manifest: dict[str, Any] = json.loads(f.read())
        except OSError as e:
            raise DataError(f"{manifest_path}: {e.strerror or e}") from None
        except ValueError:
            raise DataError(f"{manifest_path}: not valid JSON") from None
        _check_manifest(self.manifest, manifest_path)
        self.keys = [Key(k["name"], k["dtype"], tuple(k["shape"])) for k in self.manifest["keys"]]
        self.action_horizon = max(1, self.manifest["token_mapping"]["action_horizon"])
        self._shards: list[ShardReader] = []
        self._episode_shard: list[int] = []
        self._episode_local: list[int] = []
        self._sample_begin = [0]
        try:
            for s, info in enumerate(self.manifest["shards"]):
                shard = ShardReader(os.path.join(path, info["file"]))
                self._shards.append(shard)
                frames = sum(e.frames for e in shard.episodes)
                if (shard.index_crc != info["index_crc32"] or len(shard.episodes) !=
                        info["episodes"] or frames != info["frames"] or shard.schema != self.keys):
                    raise DataError(f"{shard.path}: does not match the dataset manifest (index "
                                    "checksum, episode or frame counts, or schema differ)")
                for local, entry in enumerate(shard.episodes):
                    self._episode_shard.append(s)
                    self._episode_local.append(local)
                    self._sample_begin.append(self._sample_begin[-1] + entry.frames)
        except OSError as e:
            self.close()
            raise DataError(f"{e.filename}: {e.strerror}") from None
        except BaseException:
            self.close()
            raise
        self._key_index = {k.name: i for i, k in enumerate(self.keys)}
        self._action = self._key_index.get(action_key, -1)
        self._cache = _ChunkCache(cache_bytes)
        # Per episode, what a read needs, looked up once here rather than per sample: its index
        # entry, and per key the frames of a chunk.
        self._entries = [self._shards[s].episodes[local]
                         for s, local in zip(self._episode_shard, self._episode_local)]
        self._frames_per_chunk = [[kc.frames_per_chunk for kc in entry.keys]
                                  for entry in self._entries]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], **state["options"])  # type: ignore[misc]

    def close(self) -> None:
        for shard in self._shards:
            shard.close()

    def __enter__(self) -> "Dataset":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- what is in it ------------------------------------------------------------------------

    @property
    def num_episodes(self) -> int:
        return len(self._episode_shard)

    @property
    def num_samples(self) -> int:
        return self._sample_begin[-1]

    def key(self, name: str) -> Key:
        return self.keys[self._key_number(name)]

    def episode_frames(self, episode: int) -> int:
        return self._entry(self._check_episode(episode)).frames

    def episode_attributes(self, episode: int) -> dict[str, str]:
        return dict(self._entry(self._check_episode(episode)).attributes)

    def sample_tokens(self, sample: int) -> int:
        """The sample's token count, from the index (no data read)."""
        episode, frame = self.locate(sample)
        return self._entry(episode).sample_tokens[frame]

    def locate(self, sample: int) -> tuple[int, int]:
        """(episode, frame) of a global sample number."""
        if not 0 <= sample < self.num_samples:
            raise IndexError(f"{self.path}: no sample {sample} (dataset has {self.num_samples})")
        episode = bisect.bisect_right(self._sample_begin, sample) - 1
        return episode, sample - self._sample_begin[episode]

    def describe_episode(self, episode: int) -> str:
        return self._shards[self._episode_shard[episode]].describe(self._episode_local[episode])

    # -- reading --------------------------------------------------------------------------------

    def read_episode(self, episode: int, keys: Optional[Iterable[str]] = None) -> Episode:
        """Every frame of the episode's keys (all keys, or those named), verified."""
        np = _numpy()
        self._check_episode(episode)
        shard = self._shards[self._episode_shard[episode]]
        local = self._episode_local[episode]
        entry = shard.episodes[local]
        arrays = {}
        for k in self._key_numbers(keys):
            spec = self.keys[k]
            raw = shard.read_key(local, k)
            arrays[spec.name] = np.frombuffer(raw, dtype=spec.numpy_dtype).reshape(
                (entry.frames,) + spec.shape)
        return Episode(episode, entry.frames, dict(entry.attributes), arrays)

    def read_rows(self, episode: int, key: str, begin: int, end: int) -> "np.ndarray":
        """Rows [begin, end) of one key of an episode, (end - begin, *shape): Dataset::ReadKeyRows,
        through the chunk cache."""
        k = self._key_number(key)
        self._check_episode(episode)
        if not 0 <= begin <= end <= self._entry(episode).frames:
            raise IndexError(f"{self.path}: rows [{begin}, {end}) of key {key} of episode "
                             f"{episode} do not exist")
        return self._rows(episode, k, begin, end)

    def read_sample(self, sample: int, keys: Optional[Iterable[str]] = None,
                    action_chunk: bool = True) -> Sample:
        """One sample (Dataset::ReadSample): the keys (all, or those named) at its frame, and the
        action chunk unless ``action_chunk`` is False."""
        return self._read_sample(sample, self._key_numbers(keys), action_chunk)

    def _read_sample(self, sample: int, key_numbers: list[int], action_chunk: bool) -> Sample:
        # Each key's frame is a row of one cached chunk: the only per-sample work is indexing it
        # and copying the row out (the action chunk too, unless it runs into the next chunk).
        if not 0 <= sample < self._sample_begin[-1]:
            raise IndexError(f"{self.path}: no sample {sample} (dataset has {self.num_samples})")
        episode = bisect.bisect_right(self._sample_begin, sample) - 1
        frame = sample - self._sample_begin[episode]
        entry = self._entries[episode]
        per_chunk = self._frames_per_chunk[episode]
        keys = self.keys
        chunk_rows = self._chunk_rows
        values = {}
        for k in key_numbers:
            c, row = divmod(frame, per_chunk[k])
            values[keys[k].name] = chunk_rows(episode, k, c)[row].copy()
        chunk = None
        if action_chunk and self._action >= 0:
            k = self._action
            end = min(entry.frames, frame + self.action_horizon)
            c, row = divmod(frame, per_chunk[k])
            if row + end - frame <= per_chunk[k]:
                chunk = chunk_rows(episode, k, c)[row:row + end - frame].copy()
            else:
                chunk = self._rows(episode, k, frame, end)
        return Sample(sample, episode, frame, entry.sample_tokens[frame], values, chunk)

    def verify(self, progress: Optional[Callable[[int], None]] = None) -> None:
        """Reads every chunk of every shard and checks its checksum (``embody-data verify``);
        ``progress`` gets the bytes checked as it goes. Raises ChecksumError at the first bad
        one."""
        for shard in self._shards:
            for e, entry in enumerate(shard.episodes):
                for k, kc in enumerate(entry.keys):
                    for c in range(len(kc.crcs)):
                        n = len(shard.read_chunk(e, k, c))
                        if progress is not None:
                            progress(n)

    # -- a rank's part --------------------------------------------------------------------------

    def partition(self, count: int, *, rank: Optional[int] = None,
                  world_size: Optional[int] = None, seed: int = 0, epoch: int = 0,
                  shuffle: bool = True) -> list[int]:
        """This rank's items of ``count`` for the epoch (storage::Partition); rank and world
        size default to this process's."""
        return _partition(count, rank=_env.rank() if rank is None else rank,
                          world_size=_env.world_size() if world_size is None else world_size,
                          seed=seed, epoch=epoch, shuffle=shuffle)

    def episodes(self, *, rank: Optional[int] = None, world_size: Optional[int] = None,
                 shuffle: bool = False, seed: int = 0, epoch: int = 0,
                 keys: Optional[Iterable[str]] = None) -> Iterator[Episode]:
        """This rank's episodes for the epoch, in order (shuffle=False) or permuted."""
        names = None if keys is None else list(keys)
        for e in self.partition(self.num_episodes, rank=rank, world_size=world_size, seed=seed,
                                epoch=epoch, shuffle=shuffle):
            yield self.read_episode(e, names)

    def samples(self, *, rank: Optional[int] = None, world_size: Optional[int] = None,
                shuffle: bool = True, seed: int = 0, epoch: int = 0,
                keys: Optional[Iterable[str]] = None, action_chunk: bool = True,
                read_ahead: int = 2) -> Iterator[Sample]:
        """This rank's samples for the epoch, shuffled by (seed, epoch) unless shuffle=False.

        ``read_ahead`` threads (the engine loader's default, 2) read and verify the next samples
        while the caller works on this one; they yield in order, and an error (a ChecksumError)
        is raised where its sample would have come. 0 reads each sample when it is asked for."""
        items = self.partition(self.num_samples, rank=rank, world_size=world_size, seed=seed,
                               epoch=epoch, shuffle=shuffle)
        return self.read_samples(items, keys=keys, action_chunk=action_chunk,
                                 read_ahead=read_ahead)

    def read_samples(self, items: Iterable[int], *, keys: Optional[Iterable[str]] = None,
                     action_chunk: bool = True, read_ahead: int = 2) -> Iterator[Sample]:
        """read_sample() of each of ``items`` in order, with ``read_ahead`` threads reading
        ahead (see samples())."""
        key_numbers = self._key_numbers(None if keys is None else list(keys))
        read = functools.partial(self._read_sample, key_numbers=key_numbers,
                                 action_chunk=action_chunk)
        if read_ahead <= 0:
            return map(read, items)
        return _read_ahead(read, list(items), read_ahead)

    def torch(self, *, kind: str = "samples", shuffle: bool = True, seed: int = 0,
              keys: Optional[Iterable[str]] = None, rank: Optional[int] = None,
              world_size: Optional[int] = None, read_ahead: int = 0) -> Any:
        """A ``torch.utils.data.IterableDataset`` of this rank's samples (or episodes), for a
        DataLoader: its workers split the rank's part between them, ``set_epoch(n)`` reshuffles.
        ``read_ahead`` > 0 gives each worker that many threads reading ahead (see samples()),
        for a job with more CPUs than workers: its reads then overlap the collate of the batch
        before. 0 (the default) reads each sample when the worker asks for it.

        A sample is a dict of numpy arrays that DataLoader's default collate stacks: each key
        read at the frame, ``action_chunk`` padded with zeros to (H, *shape) and ``action_mask``
        (H,) True where a row is real, plus ``index``, ``episode``, ``frame``, ``tokens``. An
        episode is a dict of its arrays plus ``index`` and ``frames``; episodes differ in length,
        so load them with ``batch_size=None``.
        """
        try:
            from embody._torch_data import TorchItems
        except ImportError as e:
            raise ImportError(f"Dataset.torch() needs torch ({e}); samples() and episodes() "
                              "do not") from None
        if kind not in ("samples", "episodes"):
            raise ValueError(f"kind must be 'samples' or 'episodes', got {kind!r}")
        return TorchItems(self, kind=kind, shuffle=shuffle, seed=seed,
                          keys=None if keys is None else list(keys), rank=rank,
                          world_size=world_size, read_ahead=read_ahead)

    # -- inside ---------------------------------------------------------------------------------

    def _check_episode(self, episode: int) -> int:
        if not 0 <= episode < self.num_episodes:
            raise IndexError(f"{self.path}: no episode {episode} (dataset has "
                             f"{self.num_episodes})")
        return episode

    def _entry(self, episode: int) -> Any:
        return self._entries[episode]

    def _key_number(self, name: str) -> int:
        k = self._key_index.get(name)
        if k is None:
            raise KeyError(f"{self.path}: no key {name!r} (keys: "
                           f"{', '.join(self._key_index)})")
        return k

    def _key_numbers(self, names: Optional[Iterable[str]]) -> list[int]:
        if names is None:
            return list(range(len(self.keys)))
        return [self._key_number(n) for n in names]

    def _chunk_rows(self, episode: int, k: int, c: int) -> "np.ndarray":
        """Chunk c of key k of an episode as a read-only (frames, *shape) array, verified, through
        the cache. Reading and checking it (os.pread, zlib.crc32) runs outside the GIL."""
        cache_key = (episode * len(self.keys) + k) << 24 | c  # chunks per key < 2^24 (frames)
        rows = self._cache.get(cache_key)
        if rows is None:
            np = _np or _numpy()
            shard = self._shards[self._episode_shard[episode]]
            spec = self.keys[k]
            data = shard.read_chunk(self._episode_local[episode], k, c)
            rows = np.frombuffer(data, spec.numpy_dtype).reshape((-1,) + spec.shape)
            self._cache.put(cache_key, rows)
        return rows

    def _rows(self, episode: int, k: int, begin: int, end: int) -> "np.ndarray":
        """Dataset::ReadRows: rows [begin, end) of key k, chunk by chunk through the cache; a
        copy of its own (writable, and the cache's chunk stays as read)."""
        np = _np or _numpy()
        per_chunk = self._frames_per_chunk[episode][k]
        parts = []
        t = begin
        while t < end:
            c, row = divmod(t, per_chunk)
            n = min(end - t, per_chunk - row)
            parts.append(self._chunk_rows(episode, k, c)[row:row + n])
            t += n
        if len(parts) == 1:
            return parts[0].copy()
        if not parts:
            spec = self.keys[k]
            return np.empty((0,) + spec.shape, dtype=spec.numpy_dtype)
        return np.concatenate(parts)


def _read_ahead(read: Callable[[int], Sample], items: list[int], threads: int,
                batch: int = 16) -> Iterator[Sample]:
    """read(i) for each of ``items``, in order, computed by ``threads`` threads in batches of
    ``batch`` items, at most 2 x threads batches ahead of the caller. Reads and checksums run
    outside the GIL (os.pread, zlib.crc32 on large buffers), so the threads overlap each other
    and the caller. An exception reaches the caller after the samples before it."""
    def run(part: list[int]) -> tuple[list[Sample], Optional[BaseException]]:
        done: list[Sample] = []
        try:
            for i in part:
                done.append(read(i))
        except Exception as e:  # handed to the caller in order, where the sample would be
            return done, e
        return done, None

    import concurrent.futures  # here: most jobs import embody without reading data

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                                 thread_name_prefix="embody-read-ahead")
    pending: collections.deque[Any] = collections.deque()
    parts = (items[i:i + batch] for i in range(0, len(items), batch))
    try:
        for part in parts:
            pending.append(pool.submit(run, part))
            if len(pending) < 2 * threads:
                continue
            done, error = pending.popleft().result()
            yield from done
            if error is not None:
                raise error
        while pending:
            done, error = pending.popleft().result()
            yield from done
            if error is not None:
                raise error
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def open(ref: str, *, cache_bytes: int = 64 << 20, action_key: str = ACTION_KEY) -> Dataset:
    """Opens the dataset ``ref`` names (see resolve()): manifest and every shard checked."""
    return Dataset(resolve(ref), cache_bytes=cache_bytes, action_key=action_key)
