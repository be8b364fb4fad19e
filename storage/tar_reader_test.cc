// The tar reader: archives crafted byte by byte here (every refusal, each naming its member, the
// destination gone after and nothing written outside it), and archives written by two
// independent writers, GNU tar and Python's tarfile, in their ustar, pax and GNU formats, unpacked
// and compared file by file with the tree they were made from.
#include "storage/tar_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace storage {
namespace {

namespace fs = std::filesystem;

// ---- archives made here, header by header -------------------------------------------------

struct Header {
  std::string name = {};
  char type = '0';
  int64_t size = -1;  // -1: the data's size
  std::string prefix = {};
  std::string magic = std::string(
      "ustar\0"
      "00",
      8);
  bool bad_checksum = false;
  std::string raw_size = {};  // replaces the size field's 12 bytes when set
};

std::string Block(const Header& h, int64_t data_size) {
  std::string b(512, '\0');
  std::memcpy(b.data(), h.name.data(), std::min<size_t>(h.name.size(), 100));
  std::snprintf(b.data() + 100, 8, "%07o", 0644);
  std::snprintf(b.data() + 108, 8, "%07o", 0);
  std::snprintf(b.data() + 116, 8, "%07o", 0);
  std::snprintf(b.data() + 124, 12, "%011llo", static_cast<unsigned long long>(data_size));
  if (!h.raw_size.empty()) std::memcpy(b.data() + 124, h.raw_size.data(), 12);
  std::snprintf(b.data() + 136, 12, "%011o", 0);
  b[156] = h.type;
  std::memcpy(b.data() + 257, h.magic.data(), h.magic.size());
  std::memcpy(b.data() + 345, h.prefix.data(), std::min<size_t>(h.prefix.size(), 155));
  std::memset(b.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : b) sum += static_cast<unsigned char>(c);
  if (h.bad_checksum) sum += 1;
  std::snprintf(b.data() + 148, 8, "%06o", sum);
  return b;
}

std::string Pad(const std::string& data) {
  return data + std::string((512 - data.size() % 512) % 512, '\0');
}

class Archive {
 public:
  Archive& Add(const Header& h, const std::string& data = "") {
    bytes_ += Block(h, h.size >= 0 ? h.size : static_cast<int64_t>(data.size()));
    bytes_ += Pad(data);
    return *this;
  }
  Archive& File(const std::string& name, const std::string& data) {
    return Add(Header{.name = name}, data);
  }
  Archive& Dir(const std::string& name) { return Add(Header{.name = name, .type = '5'}); }
  Archive& Pax(const std::string& key, const std::string& value) {
    std::string rec = " " + key + "=" + value + "\n";
    size_t len = rec.size() + 1;
    while (std::to_string(len).size() + rec.size() != len) ++len;
    return Add(Header{.name = "PaxHeader", .type = 'x'}, std::to_string(len) + rec);
  }
  Archive& LongName(const std::string& name) {
    return Add(Header{.name = "././@LongLink", .type = 'L', .magic = std::string("ustar  \0", 8)},
               name + std::string(1, '\0'));
  }
  std::string End() const { return bytes_ + std::string(1024, '\0'); }
  std::string Unterminated() const { return bytes_; }

 private:
  std::string bytes_;
};

// ---- the file system ------------------------------------------------------------------------

class TarReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-tar-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // Extracts `bytes`; expects a refusal that says `says` and names `member`, and no trace of it.
  void ExpectRefused(const std::string& bytes, const std::string& says, const std::string& member,
                     const TarLimits& limits = {}) {
    const std::string archive = Write("hostile.tar", bytes), dest = dir_ + "/out";
    auto r = ExtractTar(archive, dest, limits);
    ASSERT_FALSE(r.ok()) << "accepted an archive that should say: " << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(member), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(archive), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(dest)) << "the destination is removed after a refusal";
    // Nothing was written beside the destination either (the usual escape targets).
    std::set<std::string> left;
    for (const auto& e : fs::directory_iterator(dir_)) left.insert(e.path().filename().string());
    EXPECT_EQ(left, std::set<std::string>{"hostile.tar"});
  }

  std::string dir_;
};

// path -> contents for files, "<dir>" for directories.
std::map<std::string, std::string> Tree(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = e.path().lexically_relative(root).string();
    if (e.is_symlink()) {
      out[rel] = "<link>";
    } else if (e.is_directory()) {
      out[rel] = "<dir>";
    } else {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      out[rel] = ss.str();
    }
  }
  return out;
}

TEST_F(TarReaderTest, UnpacksFilesAndDirectoriesWhateverTheNameForm) {
  const std::string long_dir(120, 'd');  // past ustar's 100-byte name field
  const std::string big(70000, 'x');
  const std::string archive = Write(
      "ok.tar", Archive()
                    .Dir("./")
                    .Dir("./meta/")
                    .File("./meta/info.json", "{\"fps\": 10}")
                    .File("data//chunk-000/./episode_000000.parquet", big)  // parents implied
                    .Add(Header{.name = "file-000.mp4", .prefix = "videos/top/chunk-000"}, "mp4")
                    .Pax("path", long_dir + "/from-pax.bin")
                    .File("truncated-name-ignored", "pax")
                    .LongName(long_dir + "/from-gnu.bin")
                    .Add(Header{.name = "ignored", .magic = std::string("ustar  \0", 8)}, "gnu")
                    .Add(Header{.name = "empty", .type = '\0'})
                    .End());
  auto r = ExtractTar(archive, dir_ + "/out");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files, 6);
  EXPECT_EQ(r->directories, 1);  // "./" is the destination itself
  EXPECT_EQ(r->bytes, 11 + 70000 + 3 + 3 + 3 + 0);
  const std::map<std::string, std::string> want = {
      {"meta", "<dir>"},
      {"meta/info.json", "{\"fps\": 10}"},
      {"data", "<dir>"},
      {"data/chunk-000", "<dir>"},
      {"data/chunk-000/episode_000000.parquet", big},
      {"videos", "<dir>"},
      {"videos/top", "<dir>"},
      {"videos/top/chunk-000", "<dir>"},
      {"videos/top/chunk-000/file-000.mp4", "mp4"},
      {long_dir, "<dir>"},
      {long_dir + "/from-pax.bin", "pax"},
      {long_dir + "/from-gnu.bin", "gnu"},
      {"empty", ""},
  };
  EXPECT_EQ(Tree(dir_ + "/out"), want);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/out/meta/info.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "modes in the archive are not applied";
  ASSERT_EQ(::stat((dir_ + "/out/meta").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(TarReaderTest, RefusesLinksDevicesAndFifos) {
  const std::pair<char, const char*> types[] = {
      {'1', "a hard link"},    {'2', "a symbolic link"}, {'3', "a character device"},
      {'4', "a block device"}, {'6', "a FIFO"},          {'S', "a sparse file"},
      {'K', "a link"},         {'Q', "is not supported"}};
  for (const auto& [type, says] : types) {
    SCOPED_TRACE(std::string("type ") + type);
    ExpectRefused(Archive().File("ok", "1").Add(Header{.name = "evil", .type = type}).End(), says,
                  "member #2 'evil'");
  }
  // A link's target is never looked at: refused whatever it names.
  Header link{.name = "meta", .type = '2'};
  ExpectRefused(Archive().Add(link).File("meta/info.json", "{}").End(), "symbolic link",
                "member #1 'meta'");
  // A pax header announcing a sparse file.
  ExpectRefused(Archive().Pax("GNU.sparse.major", "1").File("s", "x").End(), "sparse", "member #1");
}

TEST_F(TarReaderTest, RefusesNamesThatLeaveTheDirectory) {
  ExpectRefused(Archive().File("/etc/passwd", "x").End(), "absolute", "'/etc/passwd'");
  ExpectRefused(Archive().File("../escape", "x").End(), "'..'", "'../escape'");
  ExpectRefused(Archive().File("a/../../escape", "x").End(), "'..'", "'a/../../escape'");
  ExpectRefused(Archive().Dir("../").End(), "'..'", "'../'");
  ExpectRefused(Archive().Add(Header{.name = "..", .prefix = "ok"}, "x").End(), "'..'", "'ok/..'");
  ExpectRefused(Archive().Pax("path", "../escape").File("innocent", "x").End(), "'..'",
                "member #2 '../escape'");
  ExpectRefused(Archive().LongName("../../escape").File("innocent", "x").End(), "'..'",
                "member #2 '../../escape'");
  ExpectRefused(Archive().File("bad\nname", "x").End(), "control character", "'bad?name'");
  ExpectRefused(Archive().File(".", "x").End(), "root", "'.'");
  ExpectRefused(Archive().Pax("path", std::string(5000, 'a')).File("x", "x").End(),
                "longer than 4096", "member #2");
  ExpectRefused(Archive().Pax("path", "ok/" + std::string(256, 'c')).File("x", "x").End(),
                "longer than 255", "member #2");
}

TEST_F(TarReaderTest, RefusesDuplicatesAndWalksThroughFiles) {
  ExpectRefused(Archive().File("a", "1").File("a", "2").End(), "taken by an earlier member",
                "member #2 'a'");
  ExpectRefused(Archive().File("a", "1").File("a/b", "2").End(), "is a file of an earlier member",
                "member #2 'a/b'");
  ExpectRefused(Archive().File("a", "1").Dir("a/").End(), "is a file of an earlier member",
                "member #2 'a'");
  ExpectRefused(Archive().Dir("a/").File("a", "1").End(), "taken by an earlier member",
                "member #2 'a'");
}

TEST_F(TarReaderTest, RefusesPastTheLimitsBeforeWriting) {
  TarLimits small;
  small.max_file_bytes = 100;
  ExpectRefused(Archive().File("ok", "x").File("big", std::string(101, 'b')).End(),
                "101 bytes, more than the limit of 100 per file", "member #2 'big'", small);
  small = TarLimits();
  small.max_total_bytes = 150;
  ExpectRefused(Archive().File("a", std::string(100, 'a')).File("b", std::string(51, 'b')).End(),
                "more than the limit of 150 bytes", "member #2 'b'", small);
  small = TarLimits();
  small.max_members = 2;
  ExpectRefused(Archive().File("a", "").File("b", "").File("c", "").End(), "more than 2 members",
                "member #3 'c'", small);
  // A size that would not fit in memory is refused from the header, before any allocation.
  const std::string tib = "\x80" + std::string(5, '\0') + "\x01" + std::string(5, '\0');  // 2^40
  ExpectRefused(Archive().Add(Header{.name = "huge", .raw_size = tib}).End(),
                "1099511627776 bytes, more than the limit", "member #1 'huge'");
  ExpectRefused(Archive().Add(Header{.name = "PaxHeader", .type = 'x', .size = 2 << 20}).End(),
                "pax header of 2097152 bytes", "member #1");
  // GNU base-256: a negative size, and one past any bound.
  ExpectRefused(Archive().Add(Header{.name = "neg", .raw_size = std::string(12, '\xff')}).End(),
                "negative", "member #1 'neg'");
  ExpectRefused(
      Archive().Add(Header{.name = "vast", .raw_size = "\x80" + std::string(11, '\x7f')}).End(),
      "out of range", "member #1 'vast'");
}

TEST_F(TarReaderTest, RefusesDamagedAndCutShortArchives) {
  ExpectRefused(Archive().Add(Header{.name = "a", .bad_checksum = true}, "x").End(),
                "checksum mismatch", "member #1 'a'");
  ExpectRefused(Archive().Add(Header{.name = "a", .magic = std::string(8, 'z')}, "x").End(),
                "not a ustar, pax or GNU tar header", "member #1 'a'");
  ExpectRefused(Archive().Add(Header{.name = "a", .raw_size = "12x4        "}).End(),
                "not an octal number", "member #1 'a'");
  const std::string whole = Archive().File("a", std::string(1000, 'a')).End();
  ExpectRefused(whole.substr(0, 700), "cut short in the data", "member #1 'a'");
  ExpectRefused(whole.substr(0, 300), "cut short in a header", "hostile.tar");
  ExpectRefused(Archive().File("a", "x").Unterminated(), "without its end-of-archive block",
                "hostile.tar");
  ExpectRefused(Archive().Pax("path", "x").End(), "ends after a pax", "hostile.tar");
  ExpectRefused(Archive().Add(Header{.name = "PaxHeader", .type = 'x'}, "99 path=x\n").End(),
                "malformed pax record", "member #1");
  ExpectRefused(std::string(2048, 'j'), "not a ustar", "member #1");
}

TEST_F(TarReaderTest, TheReaderStreamsAndStopsAfterAnError) {
  const std::string bytes = Archive().File("a", "hello").File("b/../c", "x").End();
  size_t at = 0;
  TarReader r("mem.tar", [&](char* buf, size_t n) -> common::Result<size_t> {
    const size_t k = std::min(n, bytes.size() - at);
    std::memcpy(buf, bytes.data() + at, k);
    at += k;
    return k;
  });
  auto e = r.Next();
  ASSERT_TRUE(e.ok() && *e);
  EXPECT_EQ((*e)->path, "a");
  char buf[3];
  auto n = r.ReadData(buf, sizeof buf);  // part of the data, the rest skipped by Next
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "hel");
  auto bad = r.Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mem.tar: member #2 'b/../c'"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(r.Next().ok());
}

TEST_F(TarReaderTest, DestinationMustBeNew) {
  const std::string archive = Write("ok.tar", Archive().File("a", "x").End());
  fs::create_directories(dir_ + "/out");
  auto r = ExtractTar(archive, dir_ + "/out");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("File exists"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::exists(dir_ + "/out")) << "someone else's directory is left alone";
}

// ---- independent writers ------------------------------------------------------------------

bool Have(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

// A LeRobot-shaped tree with a name too long for ustar's fields and some binary data.
std::map<std::string, std::string> MakeTree(const std::string& root, bool long_names) {
  std::map<std::string, std::string> files = {
      {"meta/info.json", "{\"codebase_version\": \"v3.0\"}\n"},
      {"meta/episodes/chunk-000/file-000.parquet", std::string("PAR1\0\x01\x02", 7) + "PAR1"},
      {"data/chunk-000/file-000.parquet", std::string(3 * 512 + 17, '\x7f')},
      {"videos/observation.images.top/chunk-000/file-000.mp4", std::string(100000, '\x01')},
      {"empty.txt", ""},
  };
  if (long_names) {
    files[std::string(90, 'p') + "/" + std::string(90, 'q') + "/" + std::string(60, 'r') + ".bin"] =
        "deep";
  }
  for (const auto& [rel, data] : files) {
    fs::create_directories(fs::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel, std::ios::binary) << data;
  }
  fs::create_directories(root + "/videos/empty-dir");
  return Tree(root);
}

TEST_F(TarReaderTest, UnpacksWhatGnuTarWrites) {
  if (!Have("tar")) GTEST_SKIP() << "GNU tar is not installed (Debian package tar)";
  const std::string src = dir_ + "/src";
  const auto tree = MakeTree(src, true);
  struct Case {
    std::string flags;
    std::string what;  // what tar is told to archive
    std::string top;   // where the tree lands under the destination
    bool long_names;   // ustar cannot hold the long name
  };
  const Case cases[] = {{"--format=gnu", "-C " + src + " .", "", true},
                        {"--format=pax", "-C " + src + " .", "", true},
                        {"--format=posix", "-C " + dir_ + " src", "/src", true},
                        {"--format=ustar", "-C " + src + " meta data videos empty.txt", "", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags + " " + c.what);
    const std::string archive = dir_ + "/gnu.tar", dest = dir_ + "/out";
    ASSERT_EQ(Shell("tar -cf " + archive + " " + c.flags + " " + c.what), 0);
    auto r = ExtractTar(archive, dest);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto got = Tree(dest + c.top);
    auto want = tree;
    if (!c.long_names) {
      for (auto it = want.begin(); it != want.end();) {
        it = it->first[0] == 'p' ? want.erase(it) : std::next(it);
      }
    }
    EXPECT_EQ(got, want);
    fs::remove_all(dest);
    fs::remove(archive);
  }
  // A symbolic link GNU tar stores as a link: refused, naming it.
  fs::create_symlink("/etc/passwd", src + "/meta/stolen");
  ASSERT_EQ(Shell("tar -cf " + dir_ + "/link.tar -C " + src + " ."), 0);
  auto r = ExtractTar(dir_ + "/link.tar", dir_ + "/out");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'./meta/stolen': a symbolic link"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(dir_ + "/out"));
}

TEST_F(TarReaderTest, UnpacksWhatPythonsTarfileWrites) {
  if (!Have("python3")) GTEST_SKIP() << "python3 is not installed";
  const std::string src = dir_ + "/src";
  const auto tree = MakeTree(src, true);
  for (const std::string format : {"PAX_FORMAT", "GNU_FORMAT"}) {
    SCOPED_TRACE(format);
    const std::string archive = dir_ + "/py.tar", dest = dir_ + "/out";
    ASSERT_EQ(Shell("python3 -c 'import tarfile, sys\n"
                    "with tarfile.open(sys.argv[1], \"w\", format=tarfile." +
                    format + ") as t: t.add(sys.argv[2], arcname=\".\")' " + archive + " " + src),
              0);
    auto r = ExtractTar(archive, dest);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Tree(dest), tree);
    fs::remove_all(dest);
    fs::remove(archive);
  }
  // Hostile archives tarfile writes as readily: a member that climbs out, and a link.
  const std::string hostile = dir_ + "/evil.tar";
  ASSERT_EQ(Shell("python3 -c 'import tarfile, io, sys\n"
                  "with tarfile.open(sys.argv[1], \"w\") as t:\n"
                  "  i = tarfile.TarInfo(\"../../evil.sh\"); d = b\"rm -rf /\"; i.size = len(d)\n"
                  "  t.addfile(i, io.BytesIO(d))' " +
                  hostile),
            0);
  auto r = ExtractTar(hostile, dir_ + "/out");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'../../evil.sh': a '..' component"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(dir_ + "/out"));
  EXPECT_FALSE(fs::exists(fs::path(dir_).parent_path() / "evil.sh"));
  ASSERT_EQ(Shell("python3 -c 'import tarfile, sys\n"
                  "with tarfile.open(sys.argv[1], \"w\") as t:\n"
                  "  i = tarfile.TarInfo(\"meta\"); i.type = tarfile.SYMTYPE; i.linkname = \"/\"\n"
                  "  t.addfile(i)' " +
                  hostile),
            0);
  r = ExtractTar(hostile, dir_ + "/out");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("member #1 'meta': a symbolic link"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace storage
