// The tar stream of a directory (`embody datasets upload NAME DIR --format lerobot`): read back
// by two independent readers, GNU tar and Python's tarfile, which must find every file and
// directory with its bytes (long names through pax headers, linked files and directories as what
// they name); any offset reads the same bytes as a whole pass; the same directory gives the same
// bytes; link loops, FIFOs and a file that changes under the upload are refused.
#include "cli/directory_tar.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

namespace cli {
namespace {

namespace fs = std::filesystem;

class DirectoryTarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-dirtar-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    src_ = root_ + "/pusht";
  }
  void TearDown() override { fs::remove_all(root_); }

  void Put(const std::string& rel, const std::string& data) {
    fs::create_directories(fs::path(src_ + "/" + rel).parent_path());
    std::ofstream(src_ + "/" + rel, std::ios::binary) << data;
  }

  // The whole stream, read in pieces of `step` bytes.
  static std::string Stream(const DirectoryTar& tar, size_t step) {
    std::string all;
    for (int64_t off = 0; off < tar.size();) {
      auto part = tar.Read(off, step);
      EXPECT_TRUE(part.ok()) << part.status().message();
      if (!part.ok() || part->empty()) break;
      all += *part;
      off += static_cast<int64_t>(part->size());
    }
    return all;
  }

  std::string root_, src_;
};

// A file's bytes as a short, comparable text.
std::string Digest(const std::string& bytes) {
  return std::to_string(bytes.size()) + " bytes #" +
         std::to_string(std::hash<std::string>{}(bytes));
}

// path -> Digest of the contents (files), "<dir>" (directories).
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = e.path().lexically_relative(dir).string();
    if (e.is_directory()) {
      out[rel] = "<dir>";
    } else {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      out[rel] = Digest(ss.str());
    }
  }
  return out;
}

TEST_F(DirectoryTarTest, IndependentReadersFindEveryFileWithItsBytes) {
  Put("meta/info.json", "{\"codebase_version\": \"v3.0\"}");
  Put("data/chunk-000/file-000.parquet", std::string(5000, '\x7f') + std::string(1, '\0'));
  Put("videos/observation.images.top/chunk-000/file-000.mp4", std::string(1 << 20, '\x01'));
  Put("empty", "");
  // A name too long for ustar's fields, with a component too long to split at.
  const std::string deep = std::string(120, 'a') + "/" + std::string(130, 'b') + ".bin";
  Put(deep, "deep");
  fs::create_directories(src_ + "/videos/empty-dir");
  // A Hugging Face cache: files and directories that are links into a blob store elsewhere.
  fs::create_directories(root_ + "/blobs/sub");
  std::ofstream(root_ + "/blobs/abc", std::ios::binary) << "blob bytes";
  std::ofstream(root_ + "/blobs/sub/x", std::ios::binary) << "x";
  fs::create_symlink(root_ + "/blobs/abc", src_ + "/meta/tasks.parquet");
  fs::create_symlink(root_ + "/blobs/sub", src_ + "/linked-dir");
  std::map<std::string, std::string> want = Tree(src_);
  want["meta/tasks.parquet"] = Digest("blob bytes");
  want["linked-dir"] = "<dir>";
  want["linked-dir/x"] = Digest("x");

  auto tar = DirectoryTar::Open(src_);
  ASSERT_TRUE(tar.ok()) << tar.status().message();
  EXPECT_EQ((*tar)->files(), 7);
  const std::string bytes = Stream(**tar, 4 << 20);
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), (*tar)->size());
  EXPECT_EQ(bytes.size() % 512, 0u);
  const std::string archive = root_ + "/upload.tar";
  std::ofstream(archive, std::ios::binary) << bytes;

  if (std::system("command -v tar >/dev/null 2>&1") == 0) {
    fs::create_directories(root_ + "/gnu");
    ASSERT_EQ(std::system(("tar -xf " + archive + " -C " + root_ + "/gnu").c_str()), 0);
    EXPECT_EQ(Tree(root_ + "/gnu"), want);
  } else {
    ADD_FAILURE() << "GNU tar is not installed (Debian package tar): the stream is unchecked";
  }
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
    ASSERT_EQ(std::system(("python3 -c 'import tarfile, sys\n"
                           "with tarfile.open(sys.argv[1]) as t:\n"
                           "  for m in t.getmembers():\n"
                           "    assert m.isfile() or m.isdir(), m.name\n"
                           "    assert m.uid == 0 and m.gid == 0, m.name\n"
                           "  t.extractall(sys.argv[2])' " +
                           archive + " " + root_ + "/py")
                              .c_str()),
              0);
    EXPECT_EQ(Tree(root_ + "/py"), want);
  } else {
    GTEST_SKIP() << "python3 is not installed; GNU tar read the stream";
  }
}

TEST_F(DirectoryTarTest, AnyOffsetReadsTheSameBytesAndTheStreamIsReproducible) {
  Put("meta/info.json", "{}");
  Put("a/" + std::string(150, 'n') + "/f", std::string(1234, 'f'));
  Put("b", std::string(513, 'b'));
  auto tar = DirectoryTar::Open(src_);
  ASSERT_TRUE(tar.ok()) << tar.status().message();
  const std::string whole = Stream(**tar, 1 << 30);
  EXPECT_EQ(Stream(**tar, 7), whole);
  EXPECT_EQ(Stream(**tar, 512), whole);
  for (int64_t off : {int64_t{0}, int64_t{1}, int64_t{511}, int64_t{512}, int64_t{1000},
                      (*tar)->size() - 1025, (*tar)->size() - 1}) {
    auto part = (*tar)->Read(off, 777);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(*part, whole.substr(static_cast<size_t>(off), 777)) << "offset " << off;
  }
  EXPECT_TRUE((*tar)->Read((*tar)->size(), 10)->empty());
  // A second walk of the unchanged directory: the same bytes, so --resume finds its upload.
  auto again = DirectoryTar::Open(src_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Stream(**again, 1 << 20), whole);
}

TEST_F(DirectoryTarTest, RefusesLoopsSpecialFilesAndFilesThatChange) {
  Put("meta/info.json", "{}");
  fs::create_directory_symlink(src_, src_ + "/meta/loop");
  auto tar = DirectoryTar::Open(src_);
  ASSERT_FALSE(tar.ok());
  EXPECT_NE(tar.status().message().find("meta/loop is a symbolic link back into its own parents"),
            std::string::npos)
      << tar.status().message();
  fs::remove(src_ + "/meta/loop");

  ASSERT_EQ(::mkfifo((src_ + "/meta/pipe").c_str(), 0600), 0);
  tar = DirectoryTar::Open(src_);
  ASSERT_FALSE(tar.ok());
  EXPECT_NE(tar.status().message().find("meta/pipe is neither a regular file nor a directory"),
            std::string::npos)
      << tar.status().message();
  fs::remove(src_ + "/meta/pipe");

  tar = DirectoryTar::Open(src_);
  ASSERT_TRUE(tar.ok()) << tar.status().message();
  Put("meta/info.json", "{\"grown\": true}");
  auto read = (*tar)->Read(0, 1 << 20);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("meta/info.json changed while it was being uploaded"),
            std::string::npos)
      << read.status().message();

  fs::remove_all(src_);
  fs::create_directories(src_ + "/only/dirs");
  tar = DirectoryTar::Open(src_);
  ASSERT_FALSE(tar.ok());
  EXPECT_NE(tar.status().message().find("holds no files"), std::string::npos);
}

}  // namespace
}  // namespace cli
