#include "agent/jobs/job_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "agent/images/peer_images.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/parse_int.h"

namespace agent {

bool JobPreparer::NeedsFetch(const api::Command& launch) const {
  if (UploadOf(launch.spec)) return static_cast<bool>(options_.fetch_upload);
  if (IsRegistryPull(launch.spec)) return static_cast<bool>(options_.pull_image);
  const api::CheckpointRef& ref = launch.resume_checkpoint;
  if (ref.id == 0 || !options_.fetch_checkpoint) return false;
  // The job's own checkpoint at resume_from, still readable here (the same node, or storage
  // both nodes see) and at least as new as the uploaded one (uploads trail the engine), wins;
  // the start checks again that the job's uid can read it.
  if (ref.job_id != launch.job_id || launch.resume_from.empty()) return true;
  static const std::regex kStep(R"(step-(\d{1,18})\.ckpt)");
  std::smatch m;
  const std::string name = std::filesystem::path(launch.resume_from).filename().string();
  if (!std::regex_match(name, m, kStep)) return true;
  auto step = common::ParseInt64(m[1].str());
  return !(step.ok() && *step >= ref.step && ::access(launch.resume_from.c_str(), R_OK) == 0);
}

common::Result<std::unique_ptr<ImageUse>> JobPreparer::AcquireImage(int64_t job_id,
                                                                    const ImageRef& image) const {
  common::Result<std::unique_ptr<ImageUse>> use =
      common::FailedPrecondition("this node runs no images (its agent has no image cache)");
  if (options_.images != nullptr) {
    common::LogInfo(
        "preparing image",
        {{"job", std::to_string(job_id)}, {"image", image.name}, {"digest", image.digest}});
    use = options_.images->Acquire(image.digest, image.path);
  }
  if (!use.ok()) {
    return common::Status(use.status().code(),
                          "cannot prepare image " + image.name + ": " + use.status().message());
  }
  return use;
}

common::Status JobPreparer::WaitForPeerImages(int64_t job_id, const api::Command& launch,
                                              const ImageRef& image,
                                              const std::function<bool()>& stop) const {
  // Every other node unpacks the image itself (agent/rsh/rsh_bridge.h): mpirun starts once all
  // have it, or the job fails naming the node that cannot.
  PeerImageWait wait;
  wait.nodes.assign(launch.hosts.begin() + 1, launch.hosts.end());
  wait.job_id = job_id;
  wait.job_token = launch.job_token;
  wait.ca_file = options_.jobs.ca_file;
  wait.image = image.name;
  return WaitForImageOnNodes(wait, stop);  // "node NAME: cannot prepare image ...: why"
}

JobPreparer::Fetched JobPreparer::Fetch(int64_t job_id, api::Command launch,
                                        const std::function<bool()>& stop) const {
  if (auto up = UploadOf(launch.spec)) return FetchUpload(job_id, std::move(launch), *up);
  if (IsRegistryPull(launch.spec)) return Pull(job_id, std::move(launch), stop);
  return FetchCheckpoint(job_id, std::move(launch));
}

JobPreparer::Fetched JobPreparer::FetchUpload(int64_t job_id, api::Command launch,
                                              const UploadRef& ref) const {
  // Root's private directory: no job of this node reads the copy before it is the job's own.
  const std::string dir = options_.jobs.DownloadDir(job_id);
  Fetched out;
  out.upload_fetched = dir + "/" + UploadFileName(launch.spec);
  out.upload_copy = options_.jobs.JobDir(job_id) + "/" + UploadFileName(launch.spec);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  common::Status st = common::MakeDirs(dir);
  if (st.ok() && ::chmod(dir.c_str(), 0700) != 0) st = common::Internal("cannot chmod " + dir);
  if (st.ok()) {
    common::LogInfo("fetching dataset upload", {{"job", std::to_string(job_id)},
                                                {"dataset", std::to_string(ref.dataset_id)},
                                                {"bytes", std::to_string(ref.bytes)}});
    st = options_.fetch_upload(ref, out.upload_fetched);
  }
  if (st.ok()) {
    launch.spec = SpecReadingCopy(launch.spec, out.upload_copy);
  } else {
    out.log_message = "cannot fetch dataset upload";
    out.reason = "cannot fetch the upload of dataset " + std::to_string(ref.dataset_id) + ": " +
                 st.message();
  }
  out.status = st;
  out.launch = std::move(launch);
  return out;
}

JobPreparer::Fetched JobPreparer::Pull(int64_t job_id, api::Command launch,
                                       const std::function<bool()>& stop) const {
  // As an upload: root's directory until the archive is the job's own; passable (0711) so that
  // skopeo, under a uid of its own, reaches its private directory inside (registry_pull.h).
  const std::string dir = options_.jobs.DownloadDir(job_id);
  Fetched out;
  out.upload_fetched = dir + "/" + UploadFileName(launch.spec);
  out.upload_copy = options_.jobs.JobDir(job_id) + "/" + UploadFileName(launch.spec);
  auto pull = RegistryPullOf(launch.spec);
  common::Status st = pull.status();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (st.ok()) st = common::MakeDirs(dir);
  if (st.ok() && ::chmod(dir.c_str(), 0711) != 0) st = common::Internal("cannot chmod " + dir);
  std::string what = "the image";
  if (st.ok()) {
    what = pull->registry.name + "/" + pull->reference.ToString();
    common::LogInfo("pulling image", {{"job", std::to_string(job_id)},
                                      {"dataset", std::to_string(pull->dataset_id)},
                                      {"registry", pull->registry.Url()},
                                      {"reference", pull->reference.ToString()}});
    st = options_.pull_image(*pull, out.upload_fetched, stop);
  }
  if (st.ok()) {
    launch.spec = SpecReadingCopy(launch.spec, out.upload_copy);
  } else {
    out.log_message = "cannot pull image";
    out.reason = "cannot pull " + what + ": " + st.message();
  }
  out.status = st;
  out.launch = std::move(launch);
  return out;
}

JobPreparer::Fetched JobPreparer::FetchCheckpoint(int64_t job_id, api::Command launch) const {
  const api::CheckpointRef ref = launch.resume_checkpoint;
  const std::string id = std::to_string(job_id);
  const std::string dir = options_.jobs.DownloadDir(job_id);
  const std::string path = dir + "/step-" + std::to_string(ref.step) + ".ckpt";
  common::Status st = common::MakeDirs(dir);
  // Root's directory, traversable: the job reads the file, and cannot replace it.
  if (st.ok() && ::chmod(dir.c_str(), 0711) != 0) st = common::Internal("cannot chmod " + dir);
  if (st.ok()) {
    common::LogInfo("fetching checkpoint", {{"job", id},
                                            {"checkpoint", std::to_string(ref.id)},
                                            {"step", std::to_string(ref.step)},
                                            {"bytes", std::to_string(ref.bytes)}});
    st = options_.fetch_checkpoint(ref, path);
  }
  Fetched out;
  if (st.ok()) {
    launch.resume_from = path;
  } else {
    out.log_message = "cannot fetch checkpoint";
    out.reason = "cannot fetch checkpoint " + std::to_string(ref.id) + " (step " +
                 std::to_string(ref.step) + "): " + st.message();
  }
  out.status = st;
  out.launch = std::move(launch);
  return out;
}

}  // namespace agent
