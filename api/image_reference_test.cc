#include "api/image_reference.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/dataset_ref.h"

namespace api {
namespace {

using nlohmann::json;

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST(ImageReferenceTest, TagsAndDigestsParse) {
  auto r = ParseImageReference("embody/probe:1", "reference");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->repository, "embody/probe");
  EXPECT_EQ(r->tag, "1");
  EXPECT_EQ(r->ToString(), "embody/probe:1");
  r = ParseImageReference("a.b/c-d/e__f:v1.2-rc_3", "reference");
  ASSERT_FALSE(r.ok());  // a.b is a host
  r = ParseImageReference("ab/c-d/e__f:v1.2-rc_3", "reference");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tag, "v1.2-rc_3");
  r = ParseImageReference("torch.env@" + kDigest, "reference");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->repository, "torch.env");
  EXPECT_EQ(r->digest, kDigest);
  EXPECT_EQ(r->ToString(), "torch.env@" + kDigest);
}

TEST(ImageReferenceTest, AnythingElseIsRefused) {
  for (const std::string& bad : std::vector<std::string>{"",
                                                         "probe",
                                                         "-probe:1",
                                                         "--src-creds=x:1",
                                                         "probe:-1",
                                                         "probe:.1",
                                                         "Probe:1",
                                                         "probe:1 --debug",
                                                         "probe :1",
                                                         "/probe:1",
                                                         "probe/:1",
                                                         "a//b:1",
                                                         "a-:1",
                                                         "a..b:1",
                                                         "a._b:1",
                                                         "ghcr.io/x/y:1",
                                                         "localhost/x:1",
                                                         "127.0.0.1:5000/x:1",
                                                         "x@sha256:abc",
                                                         "x@md5:" + std::string(32, 'a'),
                                                         "x:1@" + kDigest,
                                                         "x:" + std::string(129, 'a'),
                                                         "docker://x/y:1",
                                                         "x/y:1\n",
                                                         std::string(256, 'a') + ":1",
                                                         "x:t\x01"}) {
    EXPECT_FALSE(ParseImageReference(bad, "source.reference").ok()) << bad;
  }
  auto refused = ParseImageReference("ghcr.io/x/y:1", "source.reference");
  EXPECT_EQ(refused.status().field(), "source.reference");
  EXPECT_NE(refused.status().message().find("host"), std::string::npos);
}

TEST(ImageReferenceTest, RegistryFlags) {
  auto r = ParseImageRegistryFlag("hub=https://registry.example.com:5443", "--image-registry");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "hub");
  EXPECT_EQ(r->host, "registry.example.com:5443");
  EXPECT_TRUE(r->tls_verify);
  EXPECT_EQ(r->Url(), "https://registry.example.com:5443");
  r = ParseImageRegistryFlag("local=http://127.0.0.1:5000/", "--image-registry");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->tls_verify);
  EXPECT_EQ(r->host, "127.0.0.1:5000");
  for (const std::string& bad : std::vector<std::string>{
           "hub", "=https://a", "Hub=https://a", "-x=https://a", "hub=ftp://a", "hub=a:5000",
           "hub=https://user@a", "hub=https://a/path", "hub=https://a?x", "hub=https://a:0",
           "hub=https://a:65536", "hub=https://A", "hub=https://-a", "hub=https://",
           "hub=https://a b", "hub=https://[::1]:5000"}) {
    EXPECT_FALSE(ParseImageRegistryFlag(bad, "--image-registry").ok()) << bad;
  }
}

TEST(ImageReferenceTest, ATenantNamesAConfiguredRegistryByNameOrHost) {
  std::vector<ImageRegistry> regs;
  regs.push_back(*ParseImageRegistryFlag("local=http://127.0.0.1:5000", "f"));
  regs.push_back(*ParseImageRegistryFlag("hub=https://registry.example.com", "f"));
  EXPECT_EQ(FindImageRegistry(regs, "hub", "source.registry")->host, "registry.example.com");
  EXPECT_EQ(FindImageRegistry(regs, "127.0.0.1:5000", "source.registry")->name, "local");
  auto other = FindImageRegistry(regs, "ghcr.io", "source.registry");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().field(), "source.registry");
  EXPECT_NE(other.status().message().find("local, hub"), std::string::npos);
  EXPECT_FALSE(FindImageRegistry({}, "hub", "source.registry").ok());
}

TEST(ImageReferenceTest, APullIsAnOciSourceWhoseUrlOnlyTheServerWrites) {
  json pull{{"format", "oci"}, {"registry", "local"}, {"reference", "embody/probe:1"}};
  auto s = ParseImportSource(pull, "source");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->is_pull());
  EXPECT_EQ(ToJson(*s), pull);
  // A tenant cannot say where the registry is; the import job's spec must.
  json with_url = pull;
  with_url["registry_url"] = "http://10.0.0.1:80";
  EXPECT_EQ(ParseImportSource(with_url, "source").status().field(), "source.registry_url");
  EXPECT_FALSE(ParseImportSource(pull, "import.source", ImportSourceFrom::kServer).ok());
  auto job = ParseImportSource(with_url, "import.source", ImportSourceFrom::kServer);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(ToJson(*job), with_url);
  with_url["registry_url"] = "file:///etc";
  EXPECT_FALSE(ParseImportSource(with_url, "import.source", ImportSourceFrom::kServer).ok());

  EXPECT_EQ(ParseImportSource(json{{"registry", "local"}, {"reference", "x:1"}}, "source")
                .status()
                .field(),
            "source.format");
  EXPECT_FALSE(ParseImportSource(json{{"format", "oci"}, {"registry", "local"}}, "source").ok());
  json both = pull;
  both["path"] = "/srv/x.tar";
  EXPECT_EQ(ParseImportSource(both, "source").status().field(), "source.path");
  for (const std::string& reg : std::vector<std::string>{"-local", "a b", "x/y", ""}) {
    json bad = pull;
    bad["registry"] = reg;
    EXPECT_EQ(ParseImportSource(bad, "source").status().field(), "source.registry") << reg;
  }
  json injected = pull;
  injected["reference"] = "--src-creds=me:pw";
  EXPECT_EQ(ParseImportSource(injected, "source").status().field(), "source.reference");
}

}  // namespace
}  // namespace api
