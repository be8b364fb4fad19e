#include "storage/shard_reader.h"

#include <algorithm>

namespace storage {

common::Result<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path) {
  EMBODY_ASSIGN_OR_RETURN(file, RandomAccessFile::Open(path));
  uint64_t size = file->size();
  if (size < kHeaderSize + kFooterSize) {
    return common::FailedPrecondition(path + ": truncated shard (" + std::to_string(size) +
                                      " bytes, smaller than header and footer)");
  }
  std::string header(kHeaderSize, '\0');
  EMBODY_RETURN_IF_ERROR(file->Read(0, header.size(), header.data()));
  EMBODY_RETURN_IF_ERROR(CheckHeader(header, path));
  std::string footer_bytes(kFooterSize, '\0');
  EMBODY_RETURN_IF_ERROR(file->Read(size - kFooterSize, kFooterSize, footer_bytes.data()));
  EMBODY_ASSIGN_OR_RETURN(footer, DecodeFooter(footer_bytes, size, path));
  std::string index_bytes(footer.index_size, '\0');
  EMBODY_RETURN_IF_ERROR(file->Read(footer.index_offset, index_bytes.size(), index_bytes.data()));
  if (Crc32(index_bytes.data(), index_bytes.size()) != footer.index_crc) {
    return common::FailedPrecondition(path + ": index checksum mismatch (damaged shard)");
  }
  EMBODY_ASSIGN_OR_RETURN(index, DecodeIndex(index_bytes, footer.index_offset, path));
  return std::unique_ptr<ShardReader>(
      new ShardReader(std::move(file), std::move(index), footer.index_crc));
}

std::string ShardReader::Describe(size_t episode) const {
  std::string s = path() + " episode " + std::to_string(episode);
  if (episode < index_.episodes.size()) {
    for (const auto& [k, v] : index_.episodes[episode].attributes) {
      if (k == kAttrDemoName) s += " (" + v + ")";
    }
  }
  return s;
}

common::Status ShardReader::CheckChunk(size_t episode, size_t key, size_t chunk,
                                       const uint8_t* data, size_t size, uint64_t offset) const {
  uint32_t want = index_.episodes[episode].keys[key].crcs[chunk];
  if (Crc32(data, size) != want) {
    return common::FailedPrecondition(Describe(episode) + ": checksum mismatch in key " +
                                      index_.schema[key].name + " chunk " + std::to_string(chunk) +
                                      " (bytes " + std::to_string(offset) + ".." +
                                      std::to_string(offset + size) + ")");
  }
  return common::Status::Ok();
}

common::Result<std::vector<uint8_t>> ShardReader::ReadChunk(size_t episode, size_t key,
                                                            size_t chunk) const {
  if (episode >= index_.episodes.size() || key >= index_.schema.size()) {
    return common::NotFound(path() + ": no episode " + std::to_string(episode) + " key " +
                            std::to_string(key));
  }
  const EpisodeEntry& e = index_.episodes[episode];
  const KeyChunks& kc = e.keys[key];
  if (chunk >= kc.crcs.size()) {
    return common::NotFound(Describe(episode) + ": no chunk " + std::to_string(chunk));
  }
  uint64_t frame_bytes = static_cast<uint64_t>(index_.schema[key].FrameBytes());
  uint64_t first = uint64_t{chunk} * kc.frames_per_chunk;
  uint64_t n = std::min<uint64_t>(kc.frames_per_chunk, e.frames - first);
  uint64_t offset = kc.data_offset + first * frame_bytes;
  std::vector<uint8_t> out(n * frame_bytes);
  EMBODY_RETURN_IF_ERROR(file_->Read(offset, out.size(), out.data()));
  EMBODY_RETURN_IF_ERROR(CheckChunk(episode, key, chunk, out.data(), out.size(), offset));
  return out;
}

common::Result<Episode> ShardReader::ReadEpisode(size_t episode) const {
  if (episode >= index_.episodes.size()) {
    return common::NotFound(path() + ": no episode " + std::to_string(episode));
  }
  const EpisodeEntry& e = index_.episodes[episode];
  Episode out;
  out.attributes = e.attributes;
  for (size_t k = 0; k < index_.schema.size(); ++k) {
    const KeyChunks& kc = e.keys[k];
    Array a;
    a.spec = index_.schema[k];
    a.frames = e.frames;
    uint64_t frame_bytes = static_cast<uint64_t>(a.spec.FrameBytes());
    a.data.resize(e.frames * frame_bytes);
    // One read per key; chunks are then checked in place.
    EMBODY_RETURN_IF_ERROR(file_->Read(kc.data_offset, a.data.size(), a.data.data()));
    uint64_t chunk_bytes = uint64_t{kc.frames_per_chunk} * frame_bytes;
    for (size_t c = 0; c < kc.crcs.size(); ++c) {
      uint64_t at = c * chunk_bytes;
      uint64_t n = std::min<uint64_t>(chunk_bytes, a.data.size() - at);
      EMBODY_RETURN_IF_ERROR(CheckChunk(episode, k, c, a.data.data() + at, n, kc.data_offset + at));
    }
    out.arrays.push_back(std::move(a));
  }
  return out;
}

common::Status ShardReader::VerifyAll(const std::function<void(uint64_t)>& progress) const {
  for (size_t e = 0; e < index_.episodes.size(); ++e) {
    for (size_t k = 0; k < index_.schema.size(); ++k) {
      for (size_t c = 0; c < index_.episodes[e].keys[k].crcs.size(); ++c) {
        EMBODY_ASSIGN_OR_RETURN(bytes, ReadChunk(e, k, c));
        if (progress) progress(bytes.size());
      }
    }
  }
  return common::Status::Ok();
}

}  // namespace storage
