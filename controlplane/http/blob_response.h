// Answering GET with the bytes of a stored blob (a checkpoint, an uploaded dataset file): one
// place for the Range handling and the read-as-sent streaming that both downloads use.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "controlplane/service/blob_files.h"

namespace controlplane::http {

// Streams `reader`'s bytes in blocks of at most 1 MiB, with `sha_header: sha256` (none when
// sha_header is empty) and
// Accept-Ranges. A single Range is cut by httplib (206, Content-Range), asking for absolute
// offsets, so bytes past it are never read.
void RespondWithBlob(const httplib::Request& req, httplib::Response& res,
                     std::shared_ptr<service::BlobReader> reader, const std::string& sha_header,
                     const std::string& sha256);

}  // namespace controlplane::http
