// Video decoding: mp4 files encoded here with libavcodec (MPEG-4 Part 2 always, H.264 where
// libx264 is linked) decode back to frames within a small tolerance of what went in, resized on
// request, by random access too; missing, truncated and undecodable files and every bound give
// an error naming the file.
#include "storage/video_import.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using testing::BlockFrames;
using testing::CompareBlockFrames;
using testing::VideoWriteOptions;
using testing::WriteVideo;

constexpr int kH = 48, kW = 64, kFrames = 20;

class VideoImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("video_import_test");
    frames_ = BlockFrames(7, kFrames, kH, kW);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Write(const std::string& name, VideoWriteOptions o = {}) {
    std::string path = root_ + "/" + name;
    common::Status st = WriteVideo(path, frames_.data(), kFrames, kH, kW, o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return path;
  }
  void ExpectRefused(const std::string& path, const std::string& reason,
                     const VideoDecodeOptions& o = {}) {
    auto v = DecodeVideo(path, o);
    ASSERT_FALSE(v.ok()) << "decoded, expected: " << reason;
    EXPECT_NE(v.status().message().find(path + ":"), std::string::npos) << v.status().message();
    EXPECT_NE(v.status().message().find(reason), std::string::npos) << v.status().message();
  }
  void ExpectCloseToSource(const DecodedVideo& v, const std::string& codec) {
    EXPECT_EQ(v.codec, codec);
    ASSERT_EQ(v.frames, kFrames);
    ASSERT_EQ(v.height, kH);
    ASSERT_EQ(v.width, kW);
    EXPECT_DOUBLE_EQ(v.fps, 10.0);
    ASSERT_EQ(v.rgb.size(), frames_.size());
    auto d = CompareBlockFrames(v.rgb.data(), frames_.data(), kFrames, kH, kW);
    // Lossy coding and 4:2:0 chroma blur block edges a little; block centres stay within a few
    // levels. Consecutive frames differ by 29 levels, so a frame out of order would fail.
    EXPECT_LT(d.mean, 4.0);
    EXPECT_LE(d.max_block_centre, 10);
  }

  std::string root_;
  std::vector<uint8_t> frames_;
};

TEST_F(VideoImportTest, Mpeg4DecodesCloseToTheSourceFrames) {
  auto v = DecodeVideo(Write("a.mp4"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ExpectCloseToSource(*v, "mpeg4");
}

TEST_F(VideoImportTest, H264DecodesCloseToTheSourceFrames) {
  if (!testing::HasVideoEncoder("libx264")) GTEST_SKIP() << "no libx264 encoder in libavcodec";
  // x264's default reorders frames (B-frames): presentation order must come back.
  auto v = DecodeVideo(Write("a.mp4", {.codec = "libx264"}));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ExpectCloseToSource(*v, "h264");
}

TEST_F(VideoImportTest, ResizesToTheRequestedSize) {
  auto v = DecodeVideo(Write("a.mp4"), {.width = 32, .height = 24});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->height, 24);
  ASSERT_EQ(v->width, 32);
  ASSERT_EQ(v->rgb.size(), size_t{kFrames} * 24 * 32 * 3);
  // Half size: each 16×16 block is now 8×8; its centre keeps the block's colour.
  int worst = 0;
  for (int f = 0; f < kFrames; ++f) {
    for (int y = 4; y < 24; y += 8) {
      for (int x = 4; x < 32; x += 8) {
        for (int c = 0; c < 3; ++c) {
          int got = v->rgb[((f * 24 + y) * 32 + x) * 3 + c];
          int want = frames_[((f * kH + 2 * y) * kW + 2 * x) * 3 + c];
          worst = std::max(worst, std::abs(got - want));
        }
      }
    }
  }
  EXPECT_LE(worst, 12);
}

TEST_F(VideoImportTest, RandomAccessGivesTheSameFramesAsSequentialDecoding) {
  std::string path = Write("a.mp4", {.gop = 6});
  auto all = DecodeVideo(path);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  auto r = VideoFrameReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->height(), kH);
  ASSERT_EQ((*r)->width(), kW);
  const size_t fb = size_t{kH} * kW * 3;
  std::vector<uint8_t> frame(fb);
  // Backwards, forwards across key frames, the next frame (no seek), the first and the last.
  for (int64_t i : {17, 3, 4, 5, 0, 19, 11, 12, 6, 1}) {
    ASSERT_TRUE((*r)->ReadFrame(i, frame.data()).ok()) << "frame " << i;
    EXPECT_TRUE(std::equal(frame.begin(), frame.end(), all->rgb.begin() + i * fb))
        << "frame " << i << " differs from sequential decoding";
  }
  auto past = (*r)->ReadFrame(kFrames, frame.data());
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find(path), std::string::npos) << past.message();
  EXPECT_NE(past.message().find("no frame 20"), std::string::npos) << past.message();
  // The reader still works after running off the end.
  ASSERT_TRUE((*r)->ReadFrame(2, frame.data()).ok());
  EXPECT_TRUE(std::equal(frame.begin(), frame.end(), all->rgb.begin() + 2 * fb));
}

TEST_F(VideoImportTest, MissingGarbageAndTruncatedFilesAreRefusedNamingTheFile) {
  ExpectRefused(root_ + "/none.mp4", "no such video file");

  std::string garbage = root_ + "/garbage.mp4";
  std::ofstream(garbage) << std::string(4096, 'x');
  ExpectRefused(garbage, "not a readable video");

  // The muxer's default puts the index after the data: cut short, the index is gone.
  std::string cut = Write("cut.mp4");
  fs::resize_file(cut, fs::file_size(cut) / 2);
  ExpectRefused(cut, "not a readable video");

  // Index first: the file opens, and the frames it lists do not all decode.
  std::string cut_fast = Write("cut_fast.mp4", {.faststart = true});
  fs::resize_file(cut_fast, fs::file_size(cut_fast) * 6 / 10);
  auto v = DecodeVideo(cut_fast);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find(cut_fast + ":"), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find("but only"), std::string::npos) << v.status().message();
}

TEST_F(VideoImportTest, BoundsOnFramesPixelsAndBytes) {
  std::string path = Write("a.mp4");
  ExpectRefused(path, "more than 19 frames", {.max_frames = 19});
  ExpectRefused(path, "pixels", {.max_frame_pixels = kH * kW - 1});
  ExpectRefused(path, "pixels", {.width = 4000, .height = 4000});
  ExpectRefused(path, "exceed the limit", {.max_bytes = uint64_t{kH} * kW * 3 * 5});
  auto v = DecodeVideo(path, {.width = 32});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("both width and height"), std::string::npos);
  auto ok = DecodeVideo(path, {.max_frames = kFrames});
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace storage
