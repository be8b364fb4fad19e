#include "storage/testing/lerobot_fixture.h"

#include <filesystem>
#include <fstream>

#include "storage/testing/video_file.h"

namespace storage::testing {

namespace fs = std::filesystem;

common::Result<LerobotFixtures> FindLerobotFixtures(const std::string& dir) {
  const fs::path unavailable = fs::path(dir).parent_path() / "UNAVAILABLE";
  if (fs::exists(unavailable)) {
    std::ifstream in(unavailable);
    std::string reason;
    std::getline(in, reason);
    return common::FailedPrecondition("LeRobot datasets from parquet-wasm were not generated: " +
                                      reason);
  }
  if (!fs::exists(fs::path(dir) / "expected.json")) {
    return common::FailedPrecondition(
        "LeRobot datasets from parquet-wasm were not generated (build the target "
        "parquet_fixtures): " +
        dir);
  }
  std::ifstream in(fs::path(dir) / "expected.json");
  LerobotFixtures f;
  f.dir = dir;
  f.expected = nlohmann::json::parse(in, nullptr, false);
  if (f.expected.is_discarded()) return common::Internal(dir + "/expected.json is not JSON");
  return f;
}

common::Status MakeLerobotDataset(const LerobotFixtures& f, const std::string& version,
                                  const std::string& dest) {
  std::error_code ec;
  fs::copy(fs::path(f.dir) / version, dest, fs::copy_options::recursive, ec);
  if (ec) return common::Internal("cannot copy " + f.dir + "/" + version + ": " + ec.message());
  const int h = f.expected["height"].get<int>(), w = f.expected["width"].get<int>();
  VideoWriteOptions o;
  o.fps = f.expected["fps"].get<int>();
  for (const nlohmann::json& v : f.expected["videos"][version]) {
    std::vector<uint8_t> rgb;
    int64_t frames = 0;
    for (const nlohmann::json& e : v["episodes"]) {
      const int64_t n = f.expected["episodes"][e.get<size_t>()]["length"].get<int64_t>();
      auto block = BlockFrames(e.get<uint64_t>() + 1, n, h, w);
      rgb.insert(rgb.end(), block.begin(), block.end());
      frames += n;
    }
    const std::string path = dest + "/" + v["path"].get<std::string>();
    fs::create_directories(fs::path(path).parent_path(), ec);
    EMBODY_RETURN_IF_ERROR(WriteVideo(path, rgb.data(), frames, h, w, o));
  }
  return common::Status::Ok();
}

}  // namespace storage::testing
