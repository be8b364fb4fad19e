#include "storage/shard_writer.h"

#include <algorithm>

namespace storage {

common::Result<std::unique_ptr<ShardWriter>> ShardWriter::Create(const std::string& path,
                                                                 Schema schema,
                                                                 ShardWriterOptions options) {
  if (schema.empty() || schema.size() > kMaxKeys) {
    return common::InvalidArgument(path + ": a shard needs 1.." + std::to_string(kMaxKeys) +
                                   " keys");
  }
  for (const KeySpec& k : schema) {
    if (k.name.empty() || k.name.size() > UINT16_MAX || k.frame_shape.size() > kMaxRank ||
        static_cast<uint64_t>(k.FrameBytes()) > kMaxFrameBytes) {
      return common::InvalidArgument(path + ": key " + k.ToString() + " cannot be stored");
    }
  }
  if (options.chunk_bytes == 0) return common::InvalidArgument("chunk size must be > 0");
  EMBODY_ASSIGN_OR_RETURN(file, CreateAtomicFile(path));
  EMBODY_RETURN_IF_ERROR(file->Append(EncodeHeader()));
  return std::unique_ptr<ShardWriter>(new ShardWriter(std::move(file), std::move(schema), options));
}

ShardWriter::ShardWriter(std::unique_ptr<common::AtomicWritableFile> file, Schema schema,
                         ShardWriterOptions options)
    : file_(std::move(file)), options_(options) {
  index_.schema = std::move(schema);
  ShardIndex empty{index_.schema, {}};
  index_bytes_ = EncodeIndex(empty).size();
}

uint64_t ShardWriter::size() const { return file_->size() + index_bytes_ + kFooterSize; }

common::Status ShardWriter::Add(const Episode& episode, std::vector<uint32_t> sample_tokens,
                                const std::string& what) {
  EMBODY_RETURN_IF_ERROR(episode.Validate(what));
  const Schema& schema = index_.schema;
  if (episode.arrays.size() != schema.size()) {
    return common::InvalidArgument(what + ": has " + std::to_string(episode.arrays.size()) +
                                   " keys, the shard's schema has " +
                                   std::to_string(schema.size()));
  }
  for (size_t k = 0; k < schema.size(); ++k) {
    if (!(episode.arrays[k].spec == schema[k])) {
      return common::InvalidArgument(what + ": key " + episode.arrays[k].spec.ToString() +
                                     " differs from the dataset's " + schema[k].ToString());
    }
  }
  if (episode.frames() > kMaxEpisodeFrames) {
    return common::InvalidArgument(what + ": more than " + std::to_string(kMaxEpisodeFrames) +
                                   " frames");
  }
  if (sample_tokens.size() != static_cast<size_t>(episode.frames())) {
    return common::InvalidArgument(what + ": one token count per frame is needed");
  }
  for (const auto& [name, value] : episode.attributes) {
    if (name.size() > UINT16_MAX || value.size() > (64u << 20)) {
      return common::InvalidArgument(what + ": attribute " + name.substr(0, 64) + " is too long");
    }
  }

  EpisodeEntry entry;
  entry.frames = static_cast<uint32_t>(episode.frames());
  entry.attributes = episode.attributes;
  entry.sample_tokens = std::move(sample_tokens);
  static const char kZeros[kDataAlignment] = {};
  for (const Array& a : episode.arrays) {
    uint64_t pad = (kDataAlignment - file_->size() % kDataAlignment) % kDataAlignment;
    EMBODY_RETURN_IF_ERROR(file_->Append(kZeros, pad));
    KeyChunks kc;
    kc.data_offset = file_->size();
    uint64_t frame_bytes = static_cast<uint64_t>(a.spec.FrameBytes());
    uint64_t fpc = std::max<uint64_t>(1, options_.chunk_bytes / frame_bytes);
    kc.frames_per_chunk = static_cast<uint32_t>(std::min<uint64_t>(fpc, entry.frames));
    for (uint64_t f = 0; f < entry.frames; f += kc.frames_per_chunk) {
      uint64_t n = std::min<uint64_t>(kc.frames_per_chunk, entry.frames - f);
      kc.crcs.push_back(Crc32(a.data.data() + f * frame_bytes, n * frame_bytes));
    }
    EMBODY_RETURN_IF_ERROR(file_->Append(a.data.data(), a.data.size()));
    entry.keys.push_back(std::move(kc));
  }
  ShardIndex one{{}, {entry}};
  index_bytes_ += EncodeIndex(one).size() - 8;  // minus the two empty counts of `one`
  frames_ += entry.frames;
  index_.episodes.push_back(std::move(entry));
  return common::Status::Ok();
}

common::Result<uint32_t> ShardWriter::Finish() {
  std::string index = EncodeIndex(index_);
  Footer footer;
  footer.index_offset = file_->size();
  footer.index_size = index.size();
  footer.index_crc = Crc32(index.data(), index.size());
  footer.version = kFormatVersion;
  EMBODY_RETURN_IF_ERROR(file_->Append(index));
  EMBODY_RETURN_IF_ERROR(file_->Append(EncodeFooter(footer)));
  EMBODY_RETURN_IF_ERROR(file_->Commit());
  return footer.index_crc;
}

}  // namespace storage
