"""Reads one shard file of an Embody dataset: the format of storage/shard_format.h, checked as the
C++ reader (storage/shard_reader.cc) checks it.

    header  [0,16)   "EMBSHARD", u32 version (1), u32 0
    data    [16, index_offset)  per episode, per key: frames x frame_bytes, 64-byte aligned,
                     cut into chunks of frames_per_chunk frames, each with a CRC-32 in the index
    index   u32 key_count, key_count x {u16 len, name, u8 dtype, u8 rank, rank x u64 dim},
            u32 episode_count, episode_count x {u32 frames, u32 attr_count,
              attr_count x {u16 len, name, u32 len, value},
              key_count x {u64 data_offset, u32 frames_per_chunk, u32 chunk_count,
                           chunk_count x u32 crc32},
              frames x u32 sample token count}
    footer  (last 32) u64 index_offset, u64 index_size, u32 index CRC-32, u32 version, "EMBSHEND"

All integers little-endian. Opening checks header, footer (magic, sizes adding up to the file's)
and the index checksum, then bounds every count and offset of the index against the file, so a
truncated, extended or damaged shard fails at open, naming it. Data is verified chunk by chunk as
it is read; a mismatch names the file, the episode (and its demo), the key and the chunk, as the
C++ reader's message does. Standard library only: numpy is the caller's business.

Reads use os.pread on a descriptor opened once, so a reader is safe to share between threads and
across fork (DataLoader workers): there is no file offset to fight over.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Optional

from embody._errors import ChecksumError, DataError

SHARD_MAGIC = b"EMBSHARD"
FOOTER_MAGIC = b"EMBSHEND"
FORMAT_VERSION = 1
HEADER_SIZE = 16
FOOTER_SIZE = 32

MAX_KEYS = 1024
MAX_RANK = 8
MAX_DIM = 1 << 24
MAX_FRAME_BYTES = 1 << 30
MAX_EPISODE_FRAMES = 1 << 24

# dtype code -> (name, numpy type string, bytes); codes are part of the format (storage/dtype.h).
DTYPES = {1: ("u8", "<u1", 1), 2: ("i32", "<i4", 4), 3: ("f32", "<f4", 4), 4: ("f64", "<f8", 8)}
DTYPE_BY_NAME = {name: (code, np_type, size) for code, (name, np_type, size) in DTYPES.items()}

ATTR_DEMO = "demo"


@dataclass(frozen=True)
class Key:
    """One key of a dataset's schema: its name, element type (u8, i32, f32, f64) and the shape
    of one frame (``()`` for a scalar per frame)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def frame_bytes(self) -> int:
        n = DTYPE_BY_NAME[self.dtype][2]
        for d in self.shape:
            n *= d
        return n

    @property
    def numpy_dtype(self) -> str:
        """The little-endian numpy type string (``<f4``)."""
        return DTYPE_BY_NAME[self.dtype][1]


@dataclass
class KeyChunks:
    data_offset: int
    frames_per_chunk: int
    crcs: array  # one u32 per chunk


@dataclass
class EpisodeEntry:
    frames: int
    attributes: list[tuple[str, str]]
    keys: list[KeyChunks]  # schema order
    sample_tokens: array  # one u32 per frame


def _u32_array(raw: bytes) -> array:
    a = array("I")
    if a.itemsize != 4:  # pragma: no cover - every platform CPython runs on has a 4-byte uint
        a = array("L")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


class _Decoder:
    """Bounded little-endian reads: no count in a hostile index makes it read past its buffer."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def take(self, fmt: str, size: int) -> Optional[int]:
        if size > self.left():
            return None
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u8(self) -> Optional[int]:
        return self.take("<B", 1)

    def u16(self) -> Optional[int]:
        return self.take("<H", 2)

    def u32(self) -> Optional[int]:
        return self.take("<I", 4)

    def u64(self) -> Optional[int]:
        return self.take("<Q", 8)

    def raw(self, n: int) -> Optional[bytes]:
        if n > self.left():
            return None
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out


def _text(raw: bytes) -> str:
    # Names are bytes in the format; surrogateescape keeps any of them one-to-one.
    return raw.decode("utf-8", "surrogateescape")


def decode_index(buf: bytes, data_end: int, file: str) -> tuple[list[Key], list[EpisodeEntry]]:
    """storage::DecodeIndex: the schema and episodes of an index whose data region ends at
    ``data_end``, every entry bounded; DataError naming the file otherwise."""
    def bad(what: str) -> DataError:
        return DataError(f"{file}: bad shard index: {what}")

    d = _Decoder(buf)
    key_count = d.u32()
    if key_count is None or key_count == 0 or key_count > MAX_KEYS:
        raise bad("key count")
    schema: list[Key] = []
    frame_bytes: list[int] = []
    for i in range(key_count):
        length = d.u16()
        name = d.raw(length) if length else None
        code = d.u8()
        rank = d.u8()
        if not length or name is None or code is None or rank is None:
            raise bad(f"key {i}")
        key_name = _text(name)
        if code not in DTYPES or rank > MAX_RANK:
            raise bad(f"key {key_name}: dtype or rank")
        per_frame = DTYPES[code][2]
        shape = []
        for _ in range(rank):
            dim = d.u64()
            if dim is None or dim == 0 or dim > MAX_DIM:
                raise bad(f"key {key_name}: shape")
            per_frame *= dim
            if per_frame > MAX_FRAME_BYTES:
                raise bad(f"key {key_name}: frame too large")
            shape.append(dim)
        frame_bytes.append(per_frame)
        schema.append(Key(key_name, DTYPES[code][0], tuple(shape)))
    episode_count = d.u32()
    # Each episode takes at least 8 + key_count x 16 + 4 bytes.
    if episode_count is None or episode_count > d.left() // (12 + 16 * key_count):
        raise bad("episode count")
    episodes: list[EpisodeEntry] = []
    prev_end = HEADER_SIZE
    for e in range(episode_count):
        where = f"episode {e}"
        frames = d.u32()
        attr_count = d.u32() if frames is not None else None
        if (frames is None or frames == 0 or frames > MAX_EPISODE_FRAMES or attr_count is None
                or attr_count > d.left() // 6):
            raise bad(f"{where}: frames or attributes")
        attributes = []
        for a in range(attr_count):
            n_len = d.u16()
            a_name = d.raw(n_len) if n_len is not None else None
            v_len = d.u32() if a_name is not None else None
            value = d.raw(v_len) if v_len is not None else None
            if value is None:
                raise bad(f"{where}: attribute {a}")
            attributes.append((_text(a_name), _text(value)))
        keys = []
        for k in range(key_count):
            offset = d.u64()
            per_chunk = d.u32() if offset is not None else None
            chunk_count = d.u32() if per_chunk is not None else None
            if chunk_count is None or per_chunk == 0:
                raise bad(f"{where} key {schema[k].name}")
            if chunk_count != (frames + per_chunk - 1) // per_chunk or chunk_count > d.left() // 4:
                raise bad(f"{where} key {schema[k].name}: chunk count")
            # Data of consecutive keys and episodes lies in order inside the data region: this
            # bounds every read and refuses overlapping chunks.
            size = frames * frame_bytes[k]
            if offset < prev_end or offset > data_end or size > data_end - offset:
                raise bad(f"{where} key {schema[k].name}: data outside the data region")
            prev_end = offset + size
            crcs = _u32_array(d.raw(4 * chunk_count) or b"")
            keys.append(KeyChunks(offset, per_chunk, crcs))
        if frames > d.left() // 4:
            raise bad(f"{where}: sample token counts")
        tokens = _u32_array(d.raw(4 * frames) or b"")
        episodes.append(EpisodeEntry(frames, attributes, keys, tokens))
    if d.left() != 0:
        raise bad(f"{d.left()} trailing bytes")
    return schema, episodes


class ShardReader:
    """One open shard. Immutable after open; safe to use from many threads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self._open()
        except BaseException:
            os.close(self._fd)
            raise

    def _open(self) -> None:
        path = self.path
        size = os.fstat(self._fd).st_size
        self.file_size = size
        if size < HEADER_SIZE + FOOTER_SIZE:
            raise DataError(f"{path}: truncated shard ({size} bytes, smaller than header and "
                            "footer)")
        header = self._pread(HEADER_SIZE, 0)
        if header[:8] != SHARD_MAGIC:
            raise DataError(f"{path}: not a shard (bad header magic)")
        version = struct.unpack_from("<I", header, 8)[0]
        if version != FORMAT_VERSION:
            raise DataError(f"{path}: shard format version {version} is not supported (this "
                            f"reader reads {FORMAT_VERSION})")
        footer = self._pread(FOOTER_SIZE, size - FOOTER_SIZE)
        if footer[24:32] != FOOTER_MAGIC:
            raise DataError(f"{path}: truncated or incomplete shard (no footer magic at end)")
        index_offset, index_size, index_crc, version = struct.unpack_from("<QQII", footer, 0)
        if version != FORMAT_VERSION:
            raise DataError(f"{path}: shard format version {version} is not supported")
        if (index_offset < HEADER_SIZE or index_size > size
                or index_offset + index_size + FOOTER_SIZE != size):
            raise DataError(f"{path}: footer does not match the file size ({size} bytes): "
                            "truncated or damaged")
        index = self._pread(index_size, index_offset)
        if zlib.crc32(index) != index_crc:
            raise ChecksumError(f"{path}: index checksum mismatch (damaged shard)")
        self.index_crc = index_crc
        self.schema, self.episodes = decode_index(index, index_offset, path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _pread(self, n: int, offset: int) -> bytes:
        out = os.pread(self._fd, n, offset)
        if len(out) != n:
            raise DataError(f"{self.path}: short read at {offset} ({len(out)} of {n} bytes): "
                            "the file changed under the reader")
        return out

    def _read_into(self, buf: bytearray, offset: int) -> None:
        view = memoryview(buf)
        done = 0
        while done < len(buf):
            n = os.preadv(self._fd, [view[done:]], offset + done)
            if n <= 0:
                raise DataError(f"{self.path}: short read at {offset + done}: the file changed "
                                "under the reader")
            done += n

    def describe(self, episode: int) -> str:
        """``shard-00001.embs episode 3 (demo_4)``: how errors name an episode."""
        text = f"{self.path} episode {episode}"
        for name, value in self.episodes[episode].attributes:
            if name == ATTR_DEMO:
                text += f" ({value})"
        return text

    def _check(self, episode: int, key: int, chunk: int, data: memoryview, offset: int) -> None:
        if zlib.crc32(data) != self.episodes[episode].keys[key].crcs[chunk]:
            raise ChecksumError(
                f"{self.describe(episode)}: checksum mismatch in key {self.schema[key].name} "
                f"chunk {chunk} (bytes {offset}..{offset + len(data)})")

    def read_chunk(self, episode: int, key: int, chunk: int) -> bytes:
        """The bytes of one chunk (whole frames), verified."""
        e = self.episodes[episode]
        kc = e.keys[key]
        frame_bytes = self.schema[key].frame_bytes
        first = chunk * kc.frames_per_chunk
        n = min(kc.frames_per_chunk, e.frames - first) * frame_bytes
        offset = kc.data_offset + first * frame_bytes
        # One pread into a buffer of its own (no zeroing first, as bytearray(n) would).
        out = os.pread(self._fd, n, offset)
        if len(out) != n:  # interrupted or the file shrank: finish (or fail) the careful way
            rest = bytearray(n - len(out))
            self._read_into(rest, offset + len(out))
            out += rest
        self._check(episode, key, chunk, memoryview(out), offset)
        return out

    def read_key(self, episode: int, key: int) -> bytearray:
        """Every frame of one key of an episode: one read, then every chunk verified in place."""
        e = self.episodes[episode]
        kc = e.keys[key]
        frame_bytes = self.schema[key].frame_bytes
        out = bytearray(e.frames * frame_bytes)
        self._read_into(out, kc.data_offset)
        view = memoryview(out)
        chunk_bytes = kc.frames_per_chunk * frame_bytes
        for c in range(len(kc.crcs)):
            at = c * chunk_bytes
            self._check(episode, key, c, view[at:at + chunk_bytes], kc.data_offset + at)
        return out
