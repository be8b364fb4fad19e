#include "storage/dataset_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/env.h"

namespace storage {

namespace fs = std::filesystem;

common::Result<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(const std::string& dir,
                                                                     DatasetWriterOptions options) {
  EMBODY_RETURN_IF_ERROR(options.mapping.Validate());
  if (options.shard_bytes == 0)
    return common::InvalidArgument("shard size must be > 0", "shard_bytes");
  std::string out = dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();  // "out/" names "out"
  std::error_code ec;
  if (fs::exists(out, ec)) {
    return common::Status(common::Code::kAlreadyExists, out + ": already exists");
  }
  std::string tmp = out + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);  // a leftover of a crashed run of this same pid
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    return common::Internal("mkdir " + tmp + ": " + std::strerror(errno));
  }
  return std::unique_ptr<DatasetWriter>(new DatasetWriter(out, tmp, options));
}

DatasetWriter::~DatasetWriter() {
  if (!done_) {
    shard_.reset();
    std::error_code ec;
    fs::remove_all(tmp_dir_, ec);
  }
}

uint64_t DatasetWriter::bytes() const { return finished_bytes_ + (shard_ ? shard_->size() : 0); }

common::Status DatasetWriter::CloseShard() {
  if (!shard_) return common::Status::Ok();
  ShardInfo& info = manifest_.shards.back();
  info.episodes = shard_->episodes();
  info.frames = shard_->frames();
  info.bytes = shard_->size();  // the final size, index and footer included
  EMBODY_ASSIGN_OR_RETURN(crc, shard_->Finish());
  info.index_crc = crc;
  finished_bytes_ += info.bytes;
  shard_.reset();
  return common::Status::Ok();
}

common::Status DatasetWriter::Add(const Episode& episode, const std::string& what) {
  if (done_) return common::FailedPrecondition("dataset writer already finished");
  EMBODY_RETURN_IF_ERROR(episode.Validate(what));
  if (manifest_.schema.empty()) manifest_.schema = episode.schema();
  std::vector<uint32_t> tokens = SampleTokenCounts(
      manifest_.schema, episode.frames(), episode.Attribute(kAttrLanguage), options_.mapping);
  uint64_t episode_bytes = 0;
  for (const Array& a : episode.arrays) episode_bytes += a.data.size();
  if (shard_ && shard_->episodes() > 0 && shard_->size() + episode_bytes > options_.shard_bytes) {
    EMBODY_RETURN_IF_ERROR(CloseShard());
  }
  if (!shard_) {
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%05zu.embs", manifest_.shards.size());
    EMBODY_ASSIGN_OR_RETURN(
        w, ShardWriter::Create(tmp_dir_ + "/" + name, manifest_.schema, options_.shard));
    shard_ = std::move(w);
    ShardInfo info;
    info.file = name;
    info.first_episode = stats_episodes_;
    manifest_.shards.push_back(info);
  }
  EMBODY_RETURN_IF_ERROR(shard_->Add(episode, tokens, what));
  stats_.Add(episode, tokens);
  stats_episodes_ += 1;
  stats_frames_ += static_cast<uint64_t>(episode.frames());
  return common::Status::Ok();
}

common::Result<DatasetManifest> DatasetWriter::Finish(nlohmann::json source) {
  if (done_) return common::FailedPrecondition("dataset writer already finished");
  if (stats_episodes_ == 0) return common::InvalidArgument(dir_ + ": no episodes to write");
  EMBODY_RETURN_IF_ERROR(CloseShard());
  manifest_.mapping = options_.mapping;
  manifest_.stats = stats_.Finish();
  manifest_.source = std::move(source);
  EMBODY_RETURN_IF_ERROR(WriteManifest(tmp_dir_, manifest_));
  EMBODY_RETURN_IF_ERROR(common::Env::Default()->SyncDir(tmp_dir_));
  EMBODY_RETURN_IF_ERROR(common::Env::Default()->Rename(tmp_dir_, dir_));  // syncs the parent
  done_ = true;
  return manifest_;
}

}  // namespace storage
