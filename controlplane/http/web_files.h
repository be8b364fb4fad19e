// The dashboard's static files as the server sees them: which file a request path names, with
// what content type and caching. Pure functions over a directory laid out by web/build.mjs:
//
//   DIR/index.html           the single page; every non-API path answers with it (client-side
//                            routing), revalidated on every load (Cache-Control: no-cache)
//   DIR/assets/NAME-HASH.EXT content-hashed bundles, cached for a year as immutable
//
// Nothing outside DIR/assets/ and DIR/index.html is ever served: an asset name is one path
// component of [A-Za-z0-9._-] not starting with '.', and symbolic links are refused.
//
// Not here: the HTTP route (web_routes.cc), the build of the files (web/).
#pragma once

#include <string>

#include "common/status.h"

namespace controlplane::http {

struct WebFile {
  std::string path;  // absolute or relative to the server's working directory
  std::string content_type;
  std::string cache_control;
};

constexpr char kImmutableCache[] = "public, max-age=31536000, immutable";
constexpr char kRevalidateCache[] = "no-cache";

// Paths that belong to the API and never to the dashboard: /v1 and below, /metrics, /healthz,
// /readyz.
bool IsApiPath(const std::string& request_path);

// The file `request_path` (already URL-decoded, as httplib gives it) names under `web_dir`.
// not_found for an asset that is absent or whose name is not allowed; index.html for every other
// path. The file is not read here; index.html may be missing (the dashboard was not built).
common::Result<WebFile> ResolveWebPath(const std::string& web_dir,
                                       const std::string& request_path);

// By file extension; application/octet-stream when unknown.
std::string ContentTypeFor(const std::string& file_name);

}  // namespace controlplane::http
