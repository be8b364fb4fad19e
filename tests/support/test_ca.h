// A private certificate authority made at test time, for the tests of TLS listeners and clients:
// a self-signed CA and server certificates it signs for the names a test asks for (EC P-256 keys,
// valid from an hour ago for 30 days), written as PEM files in a directory of the test's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace embody_test {

struct IssuedCert {
  std::string cert_file;  // the certificate, then the CA's (a chain as a server sends it)
  std::string key_file;
};

class TestCa {
 public:
  // Writes `dir`/`stem`-ca.pem, the CA's certificate, which clients trust.
  static common::Result<std::unique_ptr<TestCa>> Create(const std::string& dir,
                                                        const std::string& stem = "test");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  // A server certificate for `names`, each a DNS name or an IP address, all in its
  // subjectAltName: `dir`/`stem`.pem and `stem`.key. Its common name is `common_name`, or the
  // first name.
  common::Result<IssuedCert> Issue(const std::string& stem, const std::vector<std::string>& names,
                                   const std::string& common_name = "");

  const std::string& ca_file() const { return ca_file_; }

 private:
  TestCa(std::string dir, void* key, void* cert);

  const std::string dir_;
  void* const key_;   // EVP_PKEY
  void* const cert_;  // X509
  std::string ca_file_;
  long serial_ = 2;
};

}  // namespace embody_test
