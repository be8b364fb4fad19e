#include "storage/checkpoint_dir_store.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "common/file_util.h"
#include "common/parse_int.h"
#include "common/time_util.h"

namespace storage {

using common::Result;
using common::Status;

namespace {
constexpr size_t kCopyBlock = 4 << 20;

std::string StepName(int64_t step, const char* ext) { return "step-" + std::to_string(step) + ext; }

Status CheckKey(int64_t job_id, int64_t step) {
  if (job_id <= 0) return common::InvalidArgument("job id must be positive");
  if (step < 0) return common::InvalidArgument("step must not be negative");
  return Status::Ok();
}
}  // namespace

Result<std::string> CopyAtomically(CheckpointSource& file, const std::string& path) {
  EMBODY_ASSIGN_OR_RETURN(out, common::Env::Default()->NewAtomicFile(path, {}));
  Sha256 h;
  for (int64_t off = 0; off < file.size(); off += kCopyBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, file.ReadAt(off, kCopyBlock));
    h.Update(block.data(), block.size());
    EMBODY_RETURN_IF_ERROR(out->Append(block));
  }
  EMBODY_RETURN_IF_ERROR(out->Commit());
  return h.FinalHex();
}

std::string DirCheckpointStore::JobDir(int64_t job_id) const {
  return root_ + "/job-" + std::to_string(job_id);
}

Result<CheckpointInfo> DirCheckpointStore::Put(int64_t job_id, int64_t step,
                                               const nlohmann::json& metrics,
                                               CheckpointSource& file) {
  EMBODY_RETURN_IF_ERROR(CheckKey(job_id, step));
  // null ({} in a call) means no metrics.
  if (!metrics.is_object() && !metrics.is_null()) {
    return common::InvalidArgument("metrics must be an object");
  }
  const nlohmann::json metrics_object = metrics.is_null() ? nlohmann::json::object() : metrics;
  const std::string dir = JobDir(job_id);
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(dir));
  // An older copy of the same step stops being listed before its data is replaced.
  ::unlink((dir + "/" + StepName(step, ".json")).c_str());
  EMBODY_ASSIGN_OR_RETURN(sha, CopyAtomically(file, dir + "/" + StepName(step, ".ckpt")));
  CheckpointInfo info;
  info.id = step;
  info.job_id = job_id;
  info.step = step;
  info.bytes = file.size();
  info.sha256 = sha;
  info.metrics = metrics_object;
  info.created_ms = common::NowMillis();
  nlohmann::json meta = {{"step", step},
                         {"bytes", info.bytes},
                         {"sha256", sha},
                         {"metrics", metrics_object},
                         {"created_ms", info.created_ms}};
  EMBODY_RETURN_IF_ERROR(
      common::WriteFileAtomic(dir + "/" + StepName(step, ".json"), meta.dump() + "\n"));
  return info;
}

Result<CheckpointInfo> DirCheckpointStore::ReadInfo(int64_t job_id, int64_t step) const {
  const std::string base = JobDir(job_id) + "/" + StepName(step, "");
  EMBODY_ASSIGN_OR_RETURN(text, common::ReadFile(base + ".json"));
  nlohmann::json meta = nlohmann::json::parse(text, nullptr, false);
  std::error_code ec;
  const auto size = std::filesystem::file_size(base + ".ckpt", ec);
  if (meta.is_discarded() || !meta.is_object() || ec ||
      meta.value("bytes", int64_t{-1}) != static_cast<int64_t>(size) ||
      meta.value("step", int64_t{-1}) != step) {
    return common::NotFound("checkpoint step " + std::to_string(step) + " of job " +
                            std::to_string(job_id) + " is incomplete");
  }
  CheckpointInfo info;
  info.id = step;
  info.job_id = job_id;
  info.step = step;
  info.bytes = static_cast<int64_t>(size);
  info.sha256 = meta.value("sha256", "");
  info.metrics = meta.value("metrics", nlohmann::json::object());
  info.created_ms = meta.value("created_ms", int64_t{0});
  return info;
}

Result<std::vector<CheckpointInfo>> DirCheckpointStore::List(int64_t job_id) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  static const std::regex kMeta(R"(step-(\d{1,18})\.json)");
  for (const auto& entry : std::filesystem::directory_iterator(JobDir(job_id), ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, kMeta)) continue;
    const auto step = common::ParseInt64(m[1].str(), 0);
    if (!step.ok()) continue;
    auto info = ReadInfo(job_id, *step);
    if (info.ok()) out.push_back(std::move(*info));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return out;
}

Result<CheckpointInfo> DirCheckpointStore::Get(int64_t job_id, int64_t id,
                                               const std::string& local_path) {
  EMBODY_RETURN_IF_ERROR(CheckKey(job_id, id));
  EMBODY_ASSIGN_OR_RETURN(info, ReadInfo(job_id, id));
  EMBODY_ASSIGN_OR_RETURN(
      src, CheckpointSource::OpenInDir(JobDir(job_id), StepName(id, ".ckpt"), kMaxCheckpointBytes));
  if (src->size() != info.bytes) return common::NotFound("checkpoint changed while being read");
  // Verified before it is renamed into place: a corrupt copy never appears at local_path.
  EMBODY_ASSIGN_OR_RETURN(out, common::Env::Default()->NewAtomicFile(local_path, {}));
  Sha256 h;
  for (int64_t off = 0; off < src->size(); off += kCopyBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, src->ReadAt(off, kCopyBlock));
    h.Update(block.data(), block.size());
    EMBODY_RETURN_IF_ERROR(out->Append(block));
  }
  if (h.FinalHex() != info.sha256) {
    return common::Status(common::Code::kFailedPrecondition,
                          "checkpoint step " + std::to_string(id) + " fails its SHA-256 check");
  }
  EMBODY_RETURN_IF_ERROR(out->Commit());
  return info;
}

Status DirCheckpointStore::Delete(int64_t job_id, int64_t id) {
  EMBODY_RETURN_IF_ERROR(CheckKey(job_id, id));
  const std::string base = JobDir(job_id) + "/" + StepName(id, "");
  // Metadata first: from then on the step is not listed, whatever happens to the data file.
  if (::unlink((base + ".json").c_str()) != 0 && errno != ENOENT) {
    return common::Internal("cannot delete " + base + ".json");
  }
  ::unlink((base + ".ckpt").c_str());
  return Status::Ok();
}

}  // namespace storage
