// The shard file: many episodes in one large file, data in checksummed chunks, an index at the
// end and a fixed footer. This header is the format's reference; docs/storage.md repeats it.
//
// All integers are little-endian. Byte by byte:
//
//   header (16 bytes, offset 0)
//     [0,8)    magic "EMBSHARD"
//     [8,12)   u32 format version (kFormatVersion)
//     [12,16)  u32 reserved, 0
//   data region [16, index_offset)
//     for each episode in index order, for each key in schema order: the key's frames, row-major
//     (frames × frame_bytes bytes), starting at a 64-byte aligned offset (zero padding before).
//     A key's rows are split into chunks of frames_per_chunk frames (the last chunk may be
//     shorter); chunk c covers frames [c·fpc, min(frames, (c+1)·fpc)) and starts at
//     data_offset + c·fpc·frame_bytes. Each chunk's CRC-32 (zlib's polynomial) is in the index.
//   index [index_offset, index_offset + index_size)
//     u32 key_count
//     key_count × { u16 name_len, name bytes, u8 dtype code (dtype.h), u8 rank,
//                   rank × u64 dim }                          -- the schema, shared by episodes
//     u32 episode_count
//     episode_count × {
//       u32 frames
//       u32 attribute_count
//       attribute_count × { u16 name_len, name bytes, u32 value_len, value bytes }
//       key_count × { u64 data_offset, u32 frames_per_chunk, u32 chunk_count,
//                     chunk_count × u32 crc32 }
//       frames × u32 sample token count                        -- token_mapping.h
//     }
//   footer (32 bytes, the file's last)
//     [0,8)    u64 index_offset
//     [8,16)   u64 index_size
//     [16,20)  u32 CRC-32 of the index bytes
//     [20,24)  u32 format version
//     [24,32)  magic "EMBSHEND"
//
// A shard is opened from its footer: the magic, index_offset + index_size + 32 == file size and
// the index checksum must all hold, so a truncated or extended file is refused at open, before
// any data is read. Every offset and count in the index is bounded by the file before use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"

namespace storage {

inline constexpr char kShardMagic[] = "EMBSHARD";
inline constexpr char kFooterMagic[] = "EMBSHEND";
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kHeaderSize = 16;
inline constexpr uint64_t kFooterSize = 32;
inline constexpr uint64_t kDataAlignment = 64;

// Limits a reader enforces on an index (a shard may come from anywhere).
inline constexpr uint32_t kMaxKeys = 1024;
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint64_t kMaxDim = 1u << 24;
inline constexpr uint64_t kMaxFrameBytes = 1ull << 30;
inline constexpr uint32_t kMaxEpisodeFrames = 1u << 24;

// CRC-32 of a buffer of any size (zlib's crc32 takes at most 4 GiB a call).
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

struct KeyChunks {
  uint64_t data_offset = 0;
  uint32_t frames_per_chunk = 0;
  std::vector<uint32_t> crcs;  // one per chunk
};

struct EpisodeEntry {
  uint32_t frames = 0;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<KeyChunks> keys;          // schema order
  std::vector<uint32_t> sample_tokens;  // one per frame
};

struct ShardIndex {
  Schema schema;
  std::vector<EpisodeEntry> episodes;
};

struct Footer {
  uint64_t index_offset = 0;
  uint64_t index_size = 0;
  uint32_t index_crc = 0;
  uint32_t version = 0;
};

std::string EncodeHeader();
std::string EncodeFooter(const Footer& f);
std::string EncodeIndex(const ShardIndex& index);

// `file` names the shard in errors. The footer is checked against the file's size.
common::Result<Footer> DecodeFooter(std::string_view bytes, uint64_t file_size,
                                    const std::string& file);
common::Status CheckHeader(std::string_view bytes, const std::string& file);
// Decodes and bounds-checks an index whose data region ends at `data_end` (= index_offset).
common::Result<ShardIndex> DecodeIndex(std::string_view bytes, uint64_t data_end,
                                       const std::string& file);

}  // namespace storage
