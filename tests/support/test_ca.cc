#include "tests/support/test_ca.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdio>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace embody_test {
namespace {

std::string Errors(const std::string& what) {
  std::string out = what;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += std::string(": ") + buf;
  }
  return out;
}

bool IsIp(const std::string& name) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key`, named `common_name`, signed by `issuer_key` as `issuer` (itself when
// null), with `extensions` (nid, value).
X509* MakeCert(EVP_PKEY* key, const std::string& common_name, long serial, X509* issuer,
               EVP_PKEY* issuer_key, const std::vector<std::pair<int, std::string>>& extensions) {
  X509* cert = X509_new();
  if (cert == nullptr) return nullptr;
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 30L * 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
  for (const auto& [nid, value] : extensions) {
    if (!AddExtension(cert, issuer ? issuer : cert, nid, value)) {
      X509_free(cert);
      return nullptr;
    }
  }
  if (X509_sign(cert, issuer_key, EVP_sha256()) == 0) {
    X509_free(cert);
    return nullptr;
  }
  return cert;
}

bool WritePem(const std::string& path, X509* first, X509* second, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  ::fchmod(fileno(f), key ? 0600 : 0644);
  bool ok = true;
  if (first) ok = ok && PEM_write_X509(f, first) == 1;
  if (second) ok = ok && PEM_write_X509(f, second) == 1;
  if (key) ok = ok && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

TestCa::TestCa(std::string dir, void* key, void* cert)
    : dir_(std::move(dir)), key_(key), cert_(cert) {}

TestCa::~TestCa() {
  EVP_PKEY_free(static_cast<EVP_PKEY*>(key_));
  X509_free(static_cast<X509*>(cert_));
}

common::Result<std::unique_ptr<TestCa>> TestCa::Create(const std::string& dir,
                                                       const std::string& stem) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return common::Internal(Errors("cannot make a CA key"));
  X509* cert = MakeCert(key, stem + " CA", 1, nullptr, key,
                        {{NID_basic_constraints, "critical,CA:TRUE"},
                         {NID_key_usage, "critical,keyCertSign,cRLSign"},
                         {NID_subject_key_identifier, "hash"}});
  if (cert == nullptr) {
    EVP_PKEY_free(key);
    return common::Internal(Errors("cannot make the CA certificate"));
  }
  std::unique_ptr<TestCa> ca(new TestCa(dir, key, cert));
  ca->ca_file_ = dir + "/" + stem + "-ca.pem";
  if (!WritePem(ca->ca_file_, cert, nullptr, nullptr)) {
    return common::Internal("cannot write " + ca->ca_file_);
  }
  return ca;
}

common::Result<IssuedCert> TestCa::Issue(const std::string& stem,
                                         const std::vector<std::string>& names,
                                         const std::string& common_name) {
  if (names.empty()) return common::InvalidArgument("a certificate needs a name");
  std::string san;
  for (const std::string& n : names) {
    san += (san.empty() ? "" : ",") + std::string(IsIp(n) ? "IP:" : "DNS:") + n;
  }
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return common::Internal(Errors("cannot make a key"));
  auto* ca_cert = static_cast<X509*>(cert_);
  X509* cert = MakeCert(key, common_name.empty() ? names[0] : common_name, serial_++, ca_cert,
                        static_cast<EVP_PKEY*>(key_),
                        {{NID_basic_constraints, "critical,CA:FALSE"},
                         {NID_key_usage, "critical,digitalSignature"},
                         {NID_ext_key_usage, "serverAuth"},
                         {NID_subject_alt_name, san},
                         {NID_authority_key_identifier, "keyid:always"}});
  IssuedCert out{dir_ + "/" + stem + ".pem", dir_ + "/" + stem + ".key"};
  const bool written = cert != nullptr && WritePem(out.cert_file, cert, ca_cert, nullptr) &&
                       WritePem(out.key_file, nullptr, nullptr, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  if (!written) return common::Internal(Errors("cannot make or write " + out.cert_file));
  return out;
}

}  // namespace embody_test
