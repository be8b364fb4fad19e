#include "storage/dataset_reader.h"

#include <algorithm>
#include <cstring>

namespace storage {

common::Result<std::unique_ptr<Dataset>> Dataset::Open(const std::string& dir,
                                                       DatasetReaderOptions options) {
  EMBODY_ASSIGN_OR_RETURN(manifest, ReadManifest(dir));
  std::unique_ptr<Dataset> ds(new Dataset(dir, std::move(manifest), std::move(options)));
  const DatasetManifest& m = ds->manifest_;
  ds->sample_begin_.push_back(0);
  for (size_t s = 0; s < m.shards.size(); ++s) {
    const ShardInfo& info = m.shards[s];
    EMBODY_ASSIGN_OR_RETURN(shard, ShardReader::Open(dir + "/" + info.file));
    uint64_t frames = 0;
    for (const EpisodeEntry& e : shard->index().episodes) frames += e.frames;
    if (shard->index_crc() != info.index_crc || shard->episodes() != info.episodes ||
        frames != info.frames || !(shard->schema() == m.schema)) {
      return common::FailedPrecondition(shard->path() +
                                        ": does not match the dataset manifest (index checksum, "
                                        "episode or frame counts, or schema differ)");
    }
    for (size_t e = 0; e < shard->episodes(); ++e) {
      ds->episode_shard_.push_back(static_cast<uint32_t>(s));
      ds->episode_local_.push_back(static_cast<uint32_t>(e));
      ds->sample_begin_.push_back(ds->sample_begin_.back() + shard->index().episodes[e].frames);
    }
    ds->shards_.push_back(std::move(shard));
  }
  for (size_t k = 0; k < m.schema.size(); ++k) {
    if (m.schema[k].name == ds->options_.action_key) ds->action_key_ = static_cast<int>(k);
  }
  return ds;
}

const EpisodeEntry& Dataset::Entry(uint64_t episode) const {
  return shards_[episode_shard_[episode]]->index().episodes[episode_local_[episode]];
}

uint32_t Dataset::EpisodeFrames(uint64_t episode) const { return Entry(episode).frames; }

const std::vector<std::pair<std::string, std::string>>& Dataset::EpisodeAttributes(
    uint64_t episode) const {
  return Entry(episode).attributes;
}

std::pair<uint64_t, uint32_t> Dataset::Locate(uint64_t sample) const {
  // sample_begin_ is sorted; the episode is the last one starting at or before `sample`.
  auto it = std::upper_bound(sample_begin_.begin(), sample_begin_.end(), sample);
  uint64_t episode = static_cast<uint64_t>(it - sample_begin_.begin()) - 1;
  return {episode, static_cast<uint32_t>(sample - sample_begin_[episode])};
}

uint32_t Dataset::SampleTokens(uint64_t sample) const {
  auto [episode, frame] = Locate(sample);
  return Entry(episode).sample_tokens[frame];
}

std::string Dataset::DescribeEpisode(uint64_t episode) const {
  return shards_[episode_shard_[episode]]->Describe(episode_local_[episode]);
}

common::Result<Episode> Dataset::ReadEpisode(uint64_t episode) const {
  if (episode >= episodes()) {
    return common::NotFound(dir_ + ": no episode " + std::to_string(episode) + " (dataset has " +
                            std::to_string(episodes()) + ")");
  }
  return shards_[episode_shard_[episode]]->ReadEpisode(episode_local_[episode]);
}

common::Status Dataset::ReadRows(uint64_t episode, size_t key, uint32_t begin, uint32_t end,
                                 uint8_t* out) const {
  uint32_t shard = episode_shard_[episode], local = episode_local_[episode];
  const KeyChunks& kc = Entry(episode).keys[key];
  uint64_t frame_bytes = static_cast<uint64_t>(manifest_.schema[key].FrameBytes());
  uint32_t t = begin;
  while (t < end) {
    uint32_t chunk = t / kc.frames_per_chunk;
    ChunkCache::Key ck{shard, local, static_cast<uint32_t>(key), chunk};
    ChunkCache::Chunk data = cache_.Get(ck);
    if (!data) {
      EMBODY_ASSIGN_OR_RETURN(bytes, shards_[shard]->ReadChunk(local, key, chunk));
      data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
      cache_.Put(ck, data);
    }
    uint32_t chunk_first = chunk * kc.frames_per_chunk;
    uint32_t n = std::min(end, chunk_first + kc.frames_per_chunk) - t;
    std::memcpy(out, data->data() + (t - chunk_first) * frame_bytes, n * frame_bytes);
    out += n * frame_bytes;
    t += n;
  }
  return common::Status::Ok();
}

common::Status Dataset::ReadKeyRows(uint64_t episode, size_t key, uint32_t begin, uint32_t end,
                                    uint8_t* out) const {
  if (episode >= episodes() || key >= manifest_.schema.size() || begin > end ||
      end > EpisodeFrames(episode)) {
    return common::InvalidArgument(dir_ + ": rows [" + std::to_string(begin) + ", " +
                                   std::to_string(end) + ") of key " + std::to_string(key) +
                                   " of episode " + std::to_string(episode) + " do not exist");
  }
  return ReadRows(episode, key, begin, end, out);
}

common::Result<Sample> Dataset::ReadSample(uint64_t sample) const {
  if (sample >= samples()) {
    return common::NotFound(dir_ + ": no sample " + std::to_string(sample) + " (dataset has " +
                            std::to_string(samples()) + ")");
  }
  Sample s;
  s.index = sample;
  std::tie(s.episode, s.frame) = Locate(sample);
  const EpisodeEntry& e = Entry(s.episode);
  s.tokens = e.sample_tokens[s.frame];
  for (size_t k = 0; k < manifest_.schema.size(); ++k) {
    Array a;
    a.spec = manifest_.schema[k];
    a.frames = 1;
    a.data.resize(static_cast<size_t>(a.spec.FrameBytes()));
    EMBODY_RETURN_IF_ERROR(ReadRows(s.episode, k, s.frame, s.frame + 1, a.data.data()));
    s.values.push_back(std::move(a));
  }
  if (action_key_ >= 0) {
    Array& a = s.action_chunk;
    a.spec = manifest_.schema[action_key_];
    uint32_t horizon = static_cast<uint32_t>(std::max(1, manifest_.mapping.action_horizon));
    uint32_t end = static_cast<uint32_t>(std::min<uint64_t>(e.frames, uint64_t{s.frame} + horizon));
    a.frames = end - s.frame;
    a.data.resize(static_cast<size_t>(a.frames * a.spec.FrameBytes()));
    EMBODY_RETURN_IF_ERROR(ReadRows(s.episode, action_key_, s.frame, end, a.data.data()));
  }
  return s;
}

common::Status Dataset::Verify(const std::function<void(uint64_t)>& progress) const {
  for (const auto& shard : shards_) EMBODY_RETURN_IF_ERROR(shard->VerifyAll(progress));
  return common::Status::Ok();
}

std::unique_ptr<ReadAhead<Sample>> StreamSamples(const Dataset& ds, std::vector<uint64_t> order,
                                                 ReadAheadOptions options) {
  uint64_t n = order.size();
  return std::make_unique<ReadAhead<Sample>>(
      n, [&ds, order = std::move(order)](uint64_t i) { return ds.ReadSample(order[i]); }, options);
}

}  // namespace storage
