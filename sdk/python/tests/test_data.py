"""embody.data against the C++ storage library: datasets written by embody-data and by
DatasetWriter, read back by both, every byte compared; damage found the way the C++ finds it;
partitions equal to storage::Partition."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Optional

from support import SdkTestCase, binary, have_numpy

import embody
from embody import _partition, data

FIXTURE = binary("EMBODY_SDK_DATASET_FIXTURE", "embody-sdk-dataset-fixture")
EMBODY_DATA = binary("EMBODY_DATA_BIN", "embody-data")
SKIP_REASON: Optional[str] = None
if not have_numpy():
    SKIP_REASON = "numpy is not installed (Debian: apt-get install python3-numpy)"
elif FIXTURE is None or EMBODY_DATA is None:
    SKIP_REASON = ("the C++ fixtures are not built (cmake --build build --target embody-data "
                   "embody-sdk-dataset-fixture)")


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


class Fixtures:
    """Datasets made once for every case (they are only read)."""

    tmp: Optional[tempfile.TemporaryDirectory[str]] = None

    @classmethod
    def make(cls) -> None:
        if cls.tmp is not None:
            return
        cls.tmp = tempfile.TemporaryDirectory()
        root = cls.tmp.name
        # An HDF5 file in the robomimic layout, imported by the tool import jobs run. Demos of
        # 40..45 frames with two 16x16 cameras: over 1 MiB, so --shard-mib 1 makes two shards.
        hdf5 = os.path.join(root, "demo.hdf5")
        run(FIXTURE, "write-hdf5", hdf5, "14", "40", "3")
        cls.imported = os.path.join(root, "imported")
        run(EMBODY_DATA, "import-hdf5", hdf5, cls.imported, "--shard-mib", "1",
            "--action-horizon", "5")
        # Written directly with chunks of a few frames and shards of a few episodes.
        cls.written = os.path.join(root, "written")
        run(FIXTURE, "write-dataset", cls.written, "23", "300", "6000", "11")
        cls.dumps = {d: json.loads(run(FIXTURE, "dump", d)) for d in (cls.imported, cls.written)}

    @classmethod
    def cleanup(cls) -> None:
        if cls.tmp is not None:
            cls.tmp.cleanup()
            cls.tmp = None


def tearDownModule() -> None:
    Fixtures.cleanup()


def copy_dataset(src: str, dst: str) -> str:
    shutil.copytree(src, dst)
    for name in os.listdir(dst):
        os.chmod(os.path.join(dst, name), 0o644)
    return dst


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class SameAsTheCppReaderTest(SdkTestCase):
    def setUp(self) -> None:
        super().setUp()
        Fixtures.make()

    def compare(self, path: str) -> data.Dataset:
        want = Fixtures.dumps[path]
        ds = data.open("dir:" + path)
        self.addCleanup(ds.close)
        self.assertEqual(ds.num_episodes, len(want["episodes"]))
        self.assertEqual(ds.num_samples, len(want["samples"]))
        for e, we in enumerate(want["episodes"]):
            episode = ds.read_episode(e)
            self.assertEqual(episode.frames, we["frames"])
            self.assertEqual(ds.episode_frames(e), we["frames"])
            self.assertEqual(episode.attributes, dict(we["attributes"]))
            self.assertEqual(list(episode.arrays), [k.name for k in ds.keys])
            for name, hex_bytes in we["arrays"].items():
                array = episode.arrays[name]
                key = ds.key(name)
                self.assertEqual(array.shape, (we["frames"],) + key.shape)
                self.assertEqual(array.dtype.str, key.numpy_dtype.replace("<u1", "|u1"))
                self.assertEqual(array.tobytes().hex(), hex_bytes, f"episode {e} key {name}")
        for s, ws in enumerate(want["samples"]):
            sample = ds.read_sample(s)
            self.assertEqual((sample.episode, sample.frame, sample.tokens),
                             (ws["episode"], ws["frame"], ws["tokens"]))
            self.assertEqual(ds.locate(s), (ws["episode"], ws["frame"]))
            self.assertEqual(ds.sample_tokens(s), ws["tokens"])
            for name, hex_bytes in ws["values"].items():
                self.assertEqual(sample.values[name].shape, ds.key(name).shape)
                self.assertEqual(sample.values[name].tobytes().hex(), hex_bytes,
                                 f"sample {s} key {name}")
            self.assertEqual(len(sample.action_chunk), ws["action_frames"])
            self.assertEqual(sample.action_chunk.tobytes().hex(), ws["action_chunk"])
        return ds

    def test_a_dataset_imported_by_embody_data(self) -> None:
        ds = self.compare(Fixtures.imported)
        self.assertGreaterEqual(len(ds.manifest["shards"]), 2)
        self.assertEqual(ds.action_horizon, 5)
        self.assertEqual(ds.episode_attributes(0)["demo"], "demo_0")

    def test_a_dataset_of_many_small_chunks_and_shards(self) -> None:
        ds = self.compare(Fixtures.written)
        self.assertGreaterEqual(len(ds.manifest["shards"]), 4)
        chunks = max(len(kc.crcs) for shard in ds._shards for e in shard.episodes
                     for kc in e.keys)
        self.assertGreater(chunks, 5)
        self.assertEqual(ds.action_horizon, 4)

    def test_rows_of_one_key(self) -> None:
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        whole = ds.read_episode(3, keys=["obs/image"]).arrays["obs/image"]
        self.assertEqual(list(ds.read_episode(3, keys=["obs/image"]).arrays), ["obs/image"])
        rows = ds.read_rows(3, "obs/image", 1, 4)
        self.assertEqual(rows.tobytes(), whole[1:4].tobytes())
        every = ds.read_rows(3, "obs/image", 0, whole.shape[0])  # across every chunk
        self.assertEqual(every.tobytes(), whole.tobytes())
        self.assertEqual(ds.read_rows(3, "obs/image", whole.shape[0], whole.shape[0]).shape,
                         (0,) + whole.shape[1:])
        with self.assertRaises(IndexError):
            ds.read_rows(3, "obs/image", 0, whole.shape[0] + 1)
        with self.assertRaisesRegex(KeyError, "no key 'obs/depth'"):
            ds.read_rows(3, "obs/depth", 0, 1)
        sample = ds.read_sample(0, keys=["rewards"], action_chunk=False)
        self.assertEqual(list(sample.values), ["rewards"])
        self.assertIsNone(sample.action_chunk)

    def test_arrays_are_writable(self) -> None:
        # torch.from_numpy warns on (and cannot share) read-only arrays.
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        self.assertTrue(ds.read_sample(0).values["obs/state"].flags.writeable)
        self.assertTrue(ds.read_episode(0).arrays["actions"].flags.writeable)

    def test_verify_reads_every_chunk(self) -> None:
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        checked: list[int] = []
        ds.verify(checked.append)
        data_bytes = sum(e.frames * k.frame_bytes for shard in ds._shards
                         for e in shard.episodes for k in ds.keys)
        self.assertEqual(sum(checked), data_bytes)

    def test_read_ahead_yields_what_reading_one_by_one_does(self) -> None:
        # Threads reading ahead, in batches, with a cache too small to keep a chunk for long:
        # the same samples in the same order, byte for byte, as reading each when asked.
        ds = data.open(Fixtures.written, cache_bytes=4096)
        self.addCleanup(ds.close)
        want = [(s.index, {k: v.tobytes() for k, v in s.values.items()}, s.action_chunk.tobytes())
                for s in ds.samples(epoch=2, read_ahead=0)]
        self.assertEqual(len(want), ds.num_samples)
        for threads in (1, 3):
            got = [(s.index, {k: v.tobytes() for k, v in s.values.items()},
                    s.action_chunk.tobytes())
                   for s in ds.samples(epoch=2, read_ahead=threads)]
            self.assertEqual(got, want, f"{threads} threads")
        some = ds.read_samples([5, 3, 5], keys=["rewards"], action_chunk=False)
        self.assertEqual([(s.index, list(s.values), s.action_chunk) for s in some],
                         [(5, ["rewards"], None), (3, ["rewards"], None), (5, ["rewards"], None)])

    def test_a_caller_that_stops_early_leaves_no_thread_reading(self) -> None:
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        it = ds.samples(read_ahead=2)
        next(it)
        it.close()
        for _ in range(100):
            if not any(t.name.startswith("embody-read-ahead") for t in threading.enumerate()):
                break
            time.sleep(0.05)
        self.assertEqual([t.name for t in threading.enumerate()
                          if t.name.startswith("embody-read-ahead")], [])

    def test_a_pickled_dataset_reopens(self) -> None:
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        copy = pickle.loads(pickle.dumps(ds))
        self.addCleanup(copy.close)
        self.assertEqual(copy.read_sample(17).values["actions"].tobytes(),
                         ds.read_sample(17).values["actions"].tobytes())


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class DamageTest(SdkTestCase):
    """A damaged shard fails as the C++ reader fails, naming what is wrong."""

    def setUp(self) -> None:
        super().setUp()
        Fixtures.make()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.path = copy_dataset(Fixtures.written, os.path.join(self.tmp.name, "ds"))
        with open(os.path.join(self.path, "dataset.json")) as f:
            self.manifest = json.load(f)

    def shard(self, i: int = 0) -> str:
        return os.path.join(self.path, self.manifest["shards"][i]["file"])

    def flip(self, path: str, offset: int) -> None:
        with open(path, "r+b") as f:
            f.seek(offset)
            b = f.read(1)
            f.seek(offset)
            f.write(bytes([b[0] ^ 0x01]))

    def test_a_flipped_data_byte_names_the_episode_key_and_chunk(self) -> None:
        ds = data.open(self.path)
        self.addCleanup(ds.close)
        entry = ds._shards[1].episodes[0]
        image = [k.name for k in ds.keys].index("obs/image")
        offset = entry.keys[image].data_offset + ds.keys[image].frame_bytes + 5  # frame 1
        self.flip(self.shard(1), offset)
        episode = self.manifest["shards"][1]["first_episode"]
        with self.assertRaises(embody.ChecksumError) as caught:
            ds.read_episode(episode)
        message = str(caught.exception)
        self.assertIn(f"{self.shard(1)} episode 0 (demo_{episode}): checksum mismatch in key "
                      "obs/image chunk 1", message)
        with self.assertRaises(embody.ChecksumError):
            ds.read_sample(ds._sample_begin[episode] + 1)
        ds.read_sample(ds._sample_begin[episode])  # chunk 0 is intact
        with self.assertRaises(embody.ChecksumError):
            ds.verify()
        # Read ahead, the error comes where its sample would: after every sample before it.
        bad = ds._sample_begin[episode] + 1
        order = [0, 1, 2, bad, 3]
        for threads in (0, 2):
            seen = []
            with self.assertRaises(embody.ChecksumError):
                for sample in ds.read_samples(order, read_ahead=threads):
                    seen.append(sample.index)
            self.assertEqual(seen, [0, 1, 2], f"{threads} threads")
        # The C++ reader agrees.
        done = subprocess.run([str(EMBODY_DATA), "verify", self.path], capture_output=True,
                              text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("checksum mismatch in key obs/image chunk 1", done.stdout + done.stderr)

    def test_a_damaged_chunk_is_never_cached_or_handed_out(self) -> None:
        # The action chunk of a chunk's last frame runs into the next chunk of the action key:
        # damage there fails that sample every time it is read (a chunk that failed its check is
        # not kept), one by one and read ahead, while samples elsewhere read on.
        ds = data.open(self.path)
        self.addCleanup(ds.close)
        actions = [k.name for k in ds.keys].index("actions")
        episode = next(e for e in range(1, ds.num_episodes)
                       if len(ds._entry(e).keys[actions].crcs) >= 2)
        s, local = ds._episode_shard[episode], ds._episode_local[episode]
        kc = ds._entry(episode).keys[actions]
        self.assertGreaterEqual(ds.action_horizon, 2)
        chunk1 = kc.data_offset + kc.frames_per_chunk * ds.keys[actions].frame_bytes
        self.flip(self.shard(s), chunk1)
        bad = ds._sample_begin[episode] + kc.frames_per_chunk - 1  # chunk 0's last frame
        ds.read_sample(bad, action_chunk=False)  # its values are all in intact chunks
        want = (f"{self.shard(s)} episode {local} (demo_{episode}): checksum mismatch in key "
                "actions chunk 1 ")
        for threads in (None, 0, 2, None):
            with self.assertRaises(embody.ChecksumError) as caught:
                if threads is None:
                    ds.read_sample(bad)
                else:
                    seen = []
                    for sample in ds.read_samples([0, bad, 0], read_ahead=threads):
                        seen.append(sample.index)
            self.assertIn(want, str(caught.exception))
            if threads is not None:
                self.assertEqual(seen, [0], f"{threads} threads")
        self.assertEqual(ds.read_sample(0).index, 0)

    def test_a_damaged_index_fails_at_open(self) -> None:
        size = os.path.getsize(self.shard())
        self.flip(self.shard(), size - 40)  # the index's last bytes
        with self.assertRaisesRegex(embody.ChecksumError, "index checksum mismatch"):
            data.open(self.path)

    def test_a_truncated_shard_fails_at_open(self) -> None:
        with open(self.shard(2), "r+b") as f:
            f.truncate(os.path.getsize(self.shard(2)) - 1)
        with self.assertRaisesRegex(embody.DataError, "no footer magic"):
            data.open(self.path)

    def test_a_shard_that_is_not_the_manifests(self) -> None:
        os.replace(self.shard(1), self.shard(0))
        with self.assertRaisesRegex(embody.DataError, "does not match the dataset manifest"):
            data.open(self.path)

    def test_a_missing_shard(self) -> None:
        os.unlink(self.shard(3))
        with self.assertRaisesRegex(embody.DataError, "No such file"):
            data.open(self.path)

    def test_a_manifest_whose_counts_do_not_add_up(self) -> None:
        self.manifest["stats"]["frames"] += 1
        with open(os.path.join(self.path, "dataset.json"), "w") as f:
            json.dump(self.manifest, f)
        with self.assertRaisesRegex(embody.DataError, "do not add up"):
            data.open(self.path)

    def test_a_shard_name_outside_the_directory(self) -> None:
        self.manifest["shards"][0]["file"] = "../elsewhere.embs"
        with open(os.path.join(self.path, "dataset.json"), "w") as f:
            json.dump(self.manifest, f)
        with self.assertRaisesRegex(embody.DataError, "bad shard file name"):
            data.open(self.path)

    def test_not_a_dataset(self) -> None:
        with self.assertRaisesRegex(embody.DataError, "dataset.json"):
            data.open(self.tmp.name)


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class PartitionTest(SdkTestCase):
    def test_the_same_as_storage_partition(self) -> None:
        for count, seed, epoch, world, shuffle in [(10, 1, 2, 3, True), (1, 0, 0, 1, True),
                                                   (97, 12345678901234, 7, 4, True),
                                                   (50, 3, 0, 8, False), (5, 9, 1, 8, True),
                                                   (1000, 2**64 - 1, 2**40, 5, True)]:
            for rank in range(world):
                want = json.loads(run(str(FIXTURE), "partition", str(count), str(seed),
                                      str(epoch), str(world), str(rank),
                                      "1" if shuffle else "0"))
                got = _partition.partition(count, rank=rank, world_size=world, seed=seed,
                                           epoch=epoch, shuffle=shuffle)
                self.assertEqual(got, want, (count, seed, epoch, world, rank, shuffle))

    def test_ranks_read_every_sample_once_per_epoch(self) -> None:
        Fixtures.make()
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        for epoch in (0, 1):
            seen: list[tuple[int, int]] = []
            for rank in range(3):
                seen += [(s.episode, s.frame) for s in ds.samples(rank=rank, world_size=3,
                                                                   seed=4, epoch=epoch,
                                                                   keys=["rewards"])]
            self.assertEqual(sorted(seen), [ds.locate(i) for i in range(ds.num_samples)])
        orders = [[s.index for s in ds.samples(rank=0, world_size=1, epoch=e, keys=[])]
                  for e in (0, 1)]
        self.assertNotEqual(orders[0], orders[1])  # reshuffled each epoch
        self.assertEqual([s.index for s in ds.samples(shuffle=False, keys=[])],
                         list(range(ds.num_samples)))

    def test_the_ranks_come_from_the_environment(self) -> None:
        Fixtures.make()
        ds = data.open(Fixtures.written)
        self.addCleanup(ds.close)
        self.setenv({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"})
        got = [e.index for e in ds.episodes()]
        self.assertEqual(got, list(range(ds.num_episodes // 2, ds.num_episodes)))


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
@unittest.skipUnless(have_torch(), "torch is not importable (Debian: python3-torch)")
class TorchTest(SdkTestCase):
    def setUp(self) -> None:
        super().setUp()
        Fixtures.make()
        self.ds = data.open(Fixtures.written)
        self.addCleanup(self.ds.close)

    def load(self, items: object, **kwargs: object) -> list[dict]:
        import torch.utils.data
        return list(torch.utils.data.DataLoader(items, **kwargs))  # type: ignore[arg-type]

    def test_workers_read_the_ranks_part_once(self) -> None:
        items = self.ds.torch(rank=1, world_size=2, seed=3)
        want = self.ds.partition(self.ds.num_samples, rank=1, world_size=2, seed=3)
        self.assertEqual(len(items), len(want))
        for workers, context in ((0, None), (2, "fork"), (2, "spawn")):
            batches = self.load(items, batch_size=4, num_workers=workers,
                                multiprocessing_context=context)
            seen = sorted(int(i) for b in batches for i in b["index"])
            self.assertEqual(seen, sorted(want), (workers, context))
        batch = self.load(items, batch_size=4)[0]
        h = self.ds.action_horizon
        self.assertEqual(tuple(batch["action_chunk"].shape), (4, h, 7))
        self.assertEqual(tuple(batch["action_mask"].shape), (4, h))
        self.assertEqual(tuple(batch["obs/image"].shape), (4, 8, 8, 3))
        self.assertEqual(str(batch["obs/image"].dtype), "torch.uint8")
        for row in range(4):
            sample = self.ds.read_sample(int(batch["index"][row]))
            self.assertEqual(batch["obs/state"][row].numpy().tobytes(),
                             sample.values["obs/state"].tobytes())
            n = len(sample.action_chunk)
            self.assertEqual(batch["action_mask"][row].tolist(), [True] * n + [False] * (h - n))
            self.assertEqual(batch["action_chunk"][row][:n].numpy().tobytes(),
                             sample.action_chunk.tobytes())
            self.assertFalse(batch["action_chunk"][row][n:].any())

    def test_workers_reading_ahead_yield_the_same_items(self) -> None:
        plain = self.ds.torch(rank=0, world_size=1, seed=5)
        ahead = self.ds.torch(rank=0, world_size=1, seed=5, read_ahead=2)
        for workers in (0, 2):
            want = self.load(plain, batch_size=3, num_workers=workers)
            got = self.load(ahead, batch_size=3, num_workers=workers)
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.assertEqual(sorted(g), sorted(w))
                for name in w:
                    self.assertTrue(bool((g[name] == w[name]).all()), (workers, name))

    def test_set_epoch_reshuffles(self) -> None:
        items = self.ds.torch(world_size=1, rank=0, keys=["rewards"])
        first = [int(b["index"]) for b in self.load(items, batch_size=None)]
        items.set_epoch(1)
        second = [int(b["index"]) for b in self.load(items, batch_size=None)]
        self.assertEqual(sorted(first), sorted(second))
        self.assertNotEqual(first, second)

    def test_episodes(self) -> None:
        items = self.ds.torch(kind="episodes", world_size=1, rank=0, shuffle=False)
        episodes = self.load(items, batch_size=None)
        self.assertEqual([int(e["index"]) for e in episodes], list(range(self.ds.num_episodes)))
        self.assertEqual(tuple(episodes[2]["actions"].shape), (self.ds.episode_frames(2), 7))


class ResolveTest(SdkTestCase):
    def test_directories(self) -> None:
        self.assertEqual(data.resolve("dir:/data/ds"), "/data/ds")
        self.assertEqual(data.resolve("/data/ds"), "/data/ds")
        for bad in ("dir:relative", "relative", "sim:reach", "dataset:", "dataset:a/b",
                    "dataset:x@0", "dataset:x@v2"):
            with self.assertRaises(ValueError, msg=bad):
                data.resolve(bad)

    def test_stored_datasets_bound_to_the_job(self) -> None:
        with self.assertRaisesRegex(embody.DataError, "EMBODY_DATASETS is not set"):
            data.resolve("dataset:libero")
        self.setenv({"EMBODY_DATASETS": json.dumps({"libero@2": "/root/tenant-1/dataset-9",
                                                    "libero@1": "/root/tenant-1/dataset-4",
                                                    "pusht": "/root/tenant-1/dataset-5"})})
        self.assertEqual(data.resolve("dataset:libero@1"), "/root/tenant-1/dataset-4")
        self.assertEqual(data.resolve("dataset:libero"), "/root/tenant-1/dataset-9")
        self.assertEqual(data.resolve("dataset:pusht"), "/root/tenant-1/dataset-5")
        with self.assertRaisesRegex(embody.DataError, "not among the datasets bound"):
            data.resolve("dataset:pusht@3")
        self.setenv({"EMBODY_DATASETS": "[]"})
        with self.assertRaisesRegex(embody.DataError, "not a JSON object"):
            data.resolve("dataset:libero")


class WithoutNumpyTest(SdkTestCase):
    def test_only_reading_arrays_needs_numpy(self) -> None:
        from support import run_python
        path = ""
        if SKIP_REASON is None:
            Fixtures.make()
            path = Fixtures.written
        done = run_python(
            "import sys\n"
            "sys.modules['numpy'] = None  # as if it were not installed\n"
            "import embody, embody.data\n"
            "embody.report(step=1, loss=0.5)\n"
            f"path = {path!r}\n"
            "if path:\n"
            "    ds = embody.data.open(path)\n"
            "    ds.verify()\n"
            "    print(ds.num_samples, 'samples verified')\n"
            "    try:\n"
            "        ds.read_sample(0)\n"
            "    except ImportError as e:\n"
            "        print(e)\n",
            {})
        self.assertEqual(done.returncode, 0, done.stderr)
        if path:
            self.assertIn("samples verified", done.stdout)
            self.assertIn("embody.data needs numpy (Debian: apt-get install python3-numpy",
                          done.stdout)
