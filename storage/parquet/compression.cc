#include "storage/parquet/compression.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include "storage/parquet/metadata.h"

namespace storage::parquet {

namespace {

using common::Status;

Status Corrupt(int32_t codec, const std::string& what) {
  return common::InvalidArgument(std::string(CodecName(codec)) + " page: " + what);
}

Status SizeMismatch(int32_t codec, size_t got, size_t want) {
  return Corrupt(codec, "decompresses to " + std::to_string(got) + " bytes, the header says " +
                            std::to_string(want));
}

Status Snappy(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  const char* src = reinterpret_cast<const char*>(in);
  size_t length = 0;
  if (!snappy::GetUncompressedLength(src, in_size, &length)) {
    return Corrupt(1, "not a Snappy block");
  }
  if (length != out_size) return SizeMismatch(1, length, out_size);
  // RawUncompress checks every copy against the input and the declared length, which we have
  // just matched to the buffer.
  if (!snappy::RawUncompress(src, in_size, reinterpret_cast<char*>(out))) {
    return Corrupt(1, "corrupt Snappy data");
  }
  return Status::Ok();
}

Status Zstd(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  const size_t n = ZSTD_decompress(out, out_size, in, in_size);
  if (ZSTD_isError(n)) return Corrupt(6, ZSTD_getErrorName(n));
  if (n != out_size) return SizeMismatch(6, n, out_size);
  return Status::Ok();
}

// Gzip members (and, leniently, zlib streams) back to back until the input ends.
Status Gzip(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return common::Internal("inflateInit2 failed");
  zs.next_in = const_cast<Bytef*>(in);
  zs.next_out = out;
  size_t produced = 0;
  Status status;
  // zlib counts in uInt; feed at most 1 GiB per call (pages are bounded below that anyway).
  constexpr size_t kStep = size_t{1} << 30;
  size_t in_left = in_size;
  while (true) {
    if (zs.avail_in == 0) {
      const size_t step = in_left < kStep ? in_left : kStep;
      zs.avail_in = static_cast<uInt>(step);
      in_left -= step;
    }
    const size_t out_left = out_size - produced;
    zs.avail_out = static_cast<uInt>(out_left < kStep ? out_left : kStep);
    const uInt avail_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += avail_before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && in_left == 0) break;
      // Another member follows.
      if (inflateReset(&zs) != Z_OK) {
        status = Corrupt(2, "cannot start the next gzip member");
        break;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && produced == out_size) {
      status = Corrupt(
          2, "decompresses to more than the header's " + std::to_string(out_size) + " bytes");
    } else if (rc == Z_BUF_ERROR) {
      status = Corrupt(2, "truncated gzip data");
    } else {
      status = Corrupt(2, zs.msg ? zs.msg : "inflate error " + std::to_string(rc));
    }
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  if (produced != out_size) return SizeMismatch(2, produced, out_size);
  return Status::Ok();
}

}  // namespace

bool CodecSupported(int32_t codec) { return codec == 0 || codec == 1 || codec == 2 || codec == 6; }

Status Decompress(int32_t codec, const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  switch (codec) {
    case 0:
      if (in_size != out_size) return SizeMismatch(0, in_size, out_size);
      if (out_size) std::memcpy(out, in, out_size);
      return Status::Ok();
    case 1:
      return Snappy(in, in_size, out, out_size);
    case 2:
      return Gzip(in, in_size, out, out_size);
    case 6:
      return Zstd(in, in_size, out, out_size);
    default:
      return Status(common::Code::kUnimplemented, std::string("compression codec ") +
                                                      CodecName(codec) + " (" +
                                                      std::to_string(codec) + ") is not supported");
  }
}

}  // namespace storage::parquet
