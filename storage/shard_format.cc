#include "storage/shard_format.h"

#include <zlib.h>

#include <cstring>
#include <limits>

namespace storage {

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {
    uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    c = crc32(c, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(c);
}

namespace {

// Little-endian appends. The project only targets little-endian hosts (x86-64, arm64), where
// these are plain copies; the byte order is still fixed by the format, not by the host.
void PutU8(std::string* s, uint8_t v) { s->push_back(static_cast<char>(v)); }
void PutU16(std::string* s, uint16_t v) {
  for (int i = 0; i < 2; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}

// Bounded reads over an index: every read checks what is left, so no count or length in a
// hostile index can make the decoder read past its buffer or allocate more than it holds.
class Decoder {
 public:
  explicit Decoder(std::string_view b) : b_(b) {}
  bool U8(uint8_t* v) { return Fixed(v, 1); }
  bool U16(uint16_t* v) { return Fixed(v, 2); }
  bool U32(uint32_t* v) { return Fixed(v, 4); }
  bool U64(uint64_t* v) { return Fixed(v, 8); }
  bool Bytes(size_t n, std::string* out) {
    if (n > b_.size() - pos_) return false;
    out->assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t left() const { return b_.size() - pos_; }

 private:
  template <typename T>
  bool Fixed(T* v, size_t n) {
    if (n > b_.size() - pos_) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) {
      x |= static_cast<uint64_t>(static_cast<uint8_t>(b_[pos_ + i])) << (8 * i);
    }
    *v = static_cast<T>(x);
    pos_ += n;
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

uint64_t GetU64(std::string_view b, size_t at) {
  uint64_t x = 0;
  for (size_t i = 0; i < 8; ++i)
    x |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return x;
}
uint32_t GetU32(std::string_view b, size_t at) { return static_cast<uint32_t>(GetU64(b, at)); }

}  // namespace

std::string EncodeHeader() {
  std::string s(kShardMagic, 8);
  PutU32(&s, kFormatVersion);
  PutU32(&s, 0);
  return s;
}

std::string EncodeFooter(const Footer& f) {
  std::string s;
  PutU64(&s, f.index_offset);
  PutU64(&s, f.index_size);
  PutU32(&s, f.index_crc);
  PutU32(&s, f.version);
  s.append(kFooterMagic, 8);
  return s;
}

std::string EncodeIndex(const ShardIndex& index) {
  std::string s;
  PutU32(&s, static_cast<uint32_t>(index.schema.size()));
  for (const KeySpec& k : index.schema) {
    PutU16(&s, static_cast<uint16_t>(k.name.size()));
    s += k.name;
    PutU8(&s, static_cast<uint8_t>(k.dtype));
    PutU8(&s, static_cast<uint8_t>(k.frame_shape.size()));
    for (int64_t d : k.frame_shape) PutU64(&s, static_cast<uint64_t>(d));
  }
  PutU32(&s, static_cast<uint32_t>(index.episodes.size()));
  for (const EpisodeEntry& e : index.episodes) {
    PutU32(&s, e.frames);
    PutU32(&s, static_cast<uint32_t>(e.attributes.size()));
    for (const auto& [name, value] : e.attributes) {
      PutU16(&s, static_cast<uint16_t>(name.size()));
      s += name;
      PutU32(&s, static_cast<uint32_t>(value.size()));
      s += value;
    }
    for (const KeyChunks& kc : e.keys) {
      PutU64(&s, kc.data_offset);
      PutU32(&s, kc.frames_per_chunk);
      PutU32(&s, static_cast<uint32_t>(kc.crcs.size()));
      for (uint32_t c : kc.crcs) PutU32(&s, c);
    }
    for (uint32_t t : e.sample_tokens) PutU32(&s, t);
  }
  return s;
}

common::Status CheckHeader(std::string_view bytes, const std::string& file) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kShardMagic, 8) != 0) {
    return common::FailedPrecondition(file + ": not a shard (bad header magic)");
  }
  uint32_t version = GetU32(bytes, 8);
  if (version != kFormatVersion) {
    return common::FailedPrecondition(file + ": shard format version " + std::to_string(version) +
                                      " is not supported (this build reads " +
                                      std::to_string(kFormatVersion) + ")");
  }
  return common::Status::Ok();
}

common::Result<Footer> DecodeFooter(std::string_view bytes, uint64_t file_size,
                                    const std::string& file) {
  if (file_size < kHeaderSize + kFooterSize || bytes.size() != kFooterSize) {
    return common::FailedPrecondition(file + ": truncated shard (" + std::to_string(file_size) +
                                      " bytes, smaller than header and footer)");
  }
  if (std::memcmp(bytes.data() + 24, kFooterMagic, 8) != 0) {
    return common::FailedPrecondition(file +
                                      ": truncated or incomplete shard (no footer magic at end)");
  }
  Footer f;
  f.index_offset = GetU64(bytes, 0);
  f.index_size = GetU64(bytes, 8);
  f.index_crc = GetU32(bytes, 16);
  f.version = GetU32(bytes, 20);
  if (f.version != kFormatVersion) {
    return common::FailedPrecondition(file + ": shard format version " + std::to_string(f.version) +
                                      " is not supported");
  }
  if (f.index_offset < kHeaderSize || f.index_size > file_size ||
      f.index_offset > file_size - kFooterSize - f.index_size ||
      f.index_offset + f.index_size + kFooterSize != file_size) {
    return common::FailedPrecondition(file + ": footer does not match the file size (" +
                                      std::to_string(file_size) + " bytes): truncated or damaged");
  }
  return f;
}

common::Result<ShardIndex> DecodeIndex(std::string_view bytes, uint64_t data_end,
                                       const std::string& file) {
  auto bad = [&](const std::string& what) {
    return common::FailedPrecondition(file + ": bad shard index: " + what);
  };
  Decoder d(bytes);
  ShardIndex index;
  uint32_t key_count = 0;
  if (!d.U32(&key_count) || key_count == 0 || key_count > kMaxKeys) return bad("key count");
  std::vector<uint64_t> frame_bytes;
  for (uint32_t i = 0; i < key_count; ++i) {
    KeySpec k;
    uint16_t len = 0;
    uint8_t code = 0, rank = 0;
    if (!d.U16(&len) || len == 0 || !d.Bytes(len, &k.name) || !d.U8(&code) || !d.U8(&rank)) {
      return bad("key " + std::to_string(i));
    }
    auto dt = DTypeFromCode(code);
    if (!dt || rank > kMaxRank) return bad("key " + k.name + ": dtype or rank");
    k.dtype = *dt;
    uint64_t bytes_per_frame = DTypeSize(k.dtype);
    for (uint8_t r = 0; r < rank; ++r) {
      uint64_t dim = 0;
      if (!d.U64(&dim) || dim == 0 || dim > kMaxDim) return bad("key " + k.name + ": shape");
      bytes_per_frame *= dim;
      if (bytes_per_frame > kMaxFrameBytes) return bad("key " + k.name + ": frame too large");
      k.frame_shape.push_back(static_cast<int64_t>(dim));
    }
    frame_bytes.push_back(bytes_per_frame);
    index.schema.push_back(std::move(k));
  }
  uint32_t episode_count = 0;
  if (!d.U32(&episode_count)) return bad("episode count");
  // Each episode takes at least 8 + key_count·16 + 4 bytes: a count the index cannot hold is
  // refused before anything is allocated for it.
  if (episode_count > d.left() / (12 + 16ull * key_count)) return bad("episode count");
  index.episodes.resize(episode_count);
  uint64_t prev_end = kHeaderSize;
  for (uint32_t e = 0; e < episode_count; ++e) {
    EpisodeEntry& ep = index.episodes[e];
    std::string where = "episode " + std::to_string(e);
    uint32_t attr_count = 0;
    if (!d.U32(&ep.frames) || ep.frames == 0 || ep.frames > kMaxEpisodeFrames ||
        !d.U32(&attr_count) || attr_count > d.left() / 6) {
      return bad(where + ": frames or attributes");
    }
    for (uint32_t a = 0; a < attr_count; ++a) {
      uint16_t nlen = 0;
      uint32_t vlen = 0;
      std::string name, value;
      if (!d.U16(&nlen) || !d.Bytes(nlen, &name) || !d.U32(&vlen) || !d.Bytes(vlen, &value)) {
        return bad(where + ": attribute " + std::to_string(a));
      }
      ep.attributes.emplace_back(std::move(name), std::move(value));
    }
    for (uint32_t k = 0; k < key_count; ++k) {
      KeyChunks kc;
      uint32_t chunk_count = 0;
      if (!d.U64(&kc.data_offset) || !d.U32(&kc.frames_per_chunk) || !d.U32(&chunk_count) ||
          kc.frames_per_chunk == 0) {
        return bad(where + " key " + index.schema[k].name);
      }
      uint64_t expect = (ep.frames + uint64_t{kc.frames_per_chunk} - 1) / kc.frames_per_chunk;
      if (chunk_count != expect || chunk_count > d.left() / 4) {
        return bad(where + " key " + index.schema[k].name + ": chunk count");
      }
      // Data of consecutive keys and episodes lies in order, inside the data region: this
      // both bounds every read and refuses overlapping chunks.
      uint64_t size = uint64_t{ep.frames} * frame_bytes[k];  // < 2^24 · 2^30, no overflow
      if (kc.data_offset < prev_end || kc.data_offset > data_end ||
          size > data_end - kc.data_offset) {
        return bad(where + " key " + index.schema[k].name + ": data outside the data region");
      }
      prev_end = kc.data_offset + size;
      kc.crcs.resize(chunk_count);
      for (uint32_t& c : kc.crcs) d.U32(&c);
      ep.keys.push_back(std::move(kc));
    }
    if (ep.frames > d.left() / 4) return bad(where + ": sample token counts");
    ep.sample_tokens.resize(ep.frames);
    for (uint32_t& t : ep.sample_tokens) d.U32(&t);
  }
  if (d.left() != 0) return bad(std::to_string(d.left()) + " trailing bytes");
  return index;
}

}  // namespace storage
