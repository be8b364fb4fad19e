#include "controlplane/http/blob_response.h"

#include <algorithm>

namespace controlplane::http {
namespace {
constexpr size_t kDownloadBlock = 1 << 20;
}  // namespace

void RespondWithBlob(const httplib::Request& req, httplib::Response& res,
                     std::shared_ptr<service::BlobReader> reader, const std::string& sha_header,
                     const std::string& sha256) {
  if (!sha_header.empty()) res.set_header(sha_header, sha256);
  res.set_header("Accept-Ranges", "bytes");
  if (!req.ranges.empty()) res.status = 206;
  const size_t size = static_cast<size_t>(reader->size());
  res.set_content_provider(size, "application/octet-stream",
                           [reader = std::move(reader)](size_t offset, size_t length,
                                                        httplib::DataSink& sink) {
                             auto block = reader->Read(static_cast<int64_t>(offset),
                                                       std::min(length, kDownloadBlock));
                             if (!block.ok() || block->empty()) return false;
                             sink.write(block->data(), block->size());
                             return true;
                           });
}

}  // namespace controlplane::http
