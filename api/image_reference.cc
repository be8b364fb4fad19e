#include "api/image_reference.h"

#include <string_view>

#include "common/parse_int.h"

namespace api {
namespace {

using common::InvalidArgument;

bool Lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
bool IsPathComponent(std::string_view s) {
  if (s.empty() || !Lower(s.front()) || !Lower(s.back())) return false;
  size_t i = 0;
  while (i < s.size()) {
    if (Lower(s[i])) {
      ++i;
      continue;
    }
    // A separator run between two alphanumerics.
    size_t j = i;
    while (j < s.size() && !Lower(s[j])) ++j;
    const std::string_view sep = s.substr(i, j - i);
    const bool ok = sep == "." || sep == "_" || sep == "__" ||
                    sep.find_first_not_of('-') == std::string_view::npos;
    if (!ok) return false;
    i = j;
  }
  return true;
}

// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
bool IsTag(std::string_view s) {
  if (s.empty() || s.size() > kMaxImageTagBytes) return false;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (!word(s.front())) return false;
  for (char c : s) {
    if (!word(c) && c != '.' && c != '-') return false;
  }
  return true;
}

bool IsSha256Digest(std::string_view s) {
  if (s.size() != 71 || s.substr(0, 7) != "sha256:") return false;
  for (char c : s.substr(7)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A DNS name or IPv4 address of letters, digits, '-' and '.', labels not starting or ending
// with '-', then an optional :PORT in 1..65535. Lower case only, so one registry has one text.
bool IsRegistryHost(std::string_view s) {
  if (s.empty() || s.size() > 253 + 6) return false;
  const size_t colon = s.find(':');
  std::string_view host = s.substr(0, colon);
  if (colon != std::string_view::npos) {
    if (!common::ParseInt(s.substr(colon + 1), 1, 65535).ok()) return false;
    if (s.substr(colon + 1).front() == '+' || s.substr(colon + 1).front() == '0') return false;
  }
  if (host.empty() || host.size() > 253) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    if (dot == std::string_view::npos) dot = host.size();
    const std::string_view label = host.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!Lower(c) && c != '-') return false;
    }
    start = dot + 1;
  }
  return true;
}

}  // namespace

bool IsImageRegistryName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !Lower(s.front())) return false;
  for (char c : s) {
    if (!Lower(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

common::Result<ImageRegistry> ParseRegistryUrl(const std::string& name, const std::string& url,
                                               const std::string& field) {
  ImageRegistry r;
  r.name = name;
  std::string_view rest = url;
  if (rest.rfind("https://", 0) == 0) {
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
    r.tls_verify = false;
  } else {
    return InvalidArgument(
        "a registry URL is https://HOST[:PORT] or http://HOST[:PORT], got '" + url + "'", field);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (!IsRegistryHost(rest)) {
    return InvalidArgument(
        "a registry URL is https://HOST[:PORT] or http://HOST[:PORT] (a lower-"
        "case host name or IPv4 address, no user, path or query), got '" +
            url + "'",
        field);
  }
  r.host = std::string(rest);
  return r;
}

common::Result<ImageRegistry> ParseImageRegistryFlag(const std::string& text,
                                                     const std::string& field) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return InvalidArgument(
        "expects NAME=URL (e.g. hub=https://registry.example.com), got '" + text + "'", field);
  }
  const std::string name = text.substr(0, eq);
  if (!IsImageRegistryName(name)) {
    return InvalidArgument(
        "a registry name is 1-63 lower-case letters, digits, '.', '_' or '-', "
        "starting with a letter or digit; got '" +
            name + "'",
        field);
  }
  return ParseRegistryUrl(name, text.substr(eq + 1), field);
}

common::Result<ImageReference> ParseImageReference(const std::string& text,
                                                   const std::string& field) {
  const std::string bad =
      "must be REPOSITORY:TAG or REPOSITORY@sha256:<64 hex> (lower-case path components of "
      "letters and digits joined by '.', '_' or '-', separated by '/')";
  ImageReference r;
  std::string_view rest = text;
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    if (!IsSha256Digest(rest.substr(at + 1))) {
      return InvalidArgument("a digest is sha256: and 64 lower-case hex characters", field);
    }
    r.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
  } else {
    // The tag follows the last ':' after the last '/'.
    const size_t slash = rest.rfind('/');
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || (slash != std::string_view::npos && colon < slash)) {
      return InvalidArgument(bad + "; name a tag or a digest, e.g. '" + text + ":latest'", field);
    }
    if (!IsTag(rest.substr(colon + 1))) {
      return InvalidArgument(
          "a tag is 1-128 letters, digits, '_', '.' or '-', not starting with "
          "'.' or '-'",
          field);
    }
    r.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  if (rest.empty() || rest.size() > kMaxImageRepositoryBytes) return InvalidArgument(bad, field);
  const size_t first_end = rest.find('/');
  if (first_end != std::string_view::npos) {
    const std::string_view first = rest.substr(0, first_end);
    if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
        first == "localhost") {
      return InvalidArgument("names a host ('" + std::string(first) +
                                 "'); the registry is given apart, by a name the operator "
                                 "configured, and the reference is the repository in it",
                             field);
    }
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string_view::npos) slash = rest.size();
    if (!IsPathComponent(rest.substr(start, slash - start))) return InvalidArgument(bad, field);
    start = slash + 1;
  }
  r.repository = std::string(rest);
  return r;
}

common::Result<ImageRegistry> FindImageRegistry(const std::vector<ImageRegistry>& registries,
                                                const std::string& text, const std::string& field) {
  for (const ImageRegistry& r : registries) {
    if (r.name == text) return r;
  }
  for (const ImageRegistry& r : registries) {
    if (r.host == text) return r;
  }
  if (registries.empty()) {
    return InvalidArgument(
        "this server pulls images from no registry (the operator names them "
        "with --image-registry); upload the image as an OCI layout tar instead",
        field);
  }
  std::string names;
  for (const ImageRegistry& r : registries) names += (names.empty() ? "" : ", ") + r.name;
  std::string shown = text.substr(0, 100);
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return InvalidArgument("'" + shown +
                             "' is not a registry this server pulls from; it pulls "
                             "from: " +
                             names,
                         field);
}

}  // namespace api
