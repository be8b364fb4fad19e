// Page decompression: UNCOMPRESSED, SNAPPY (libsnappy), GZIP (zlib) and ZSTD (libzstd). The
// caller knows the page's uncompressed size from its header and gives a buffer of exactly that
// size; output that would not fill it exactly, or would overflow it, is an error, so a page
// header cannot make the decoder write or allocate more than it said. LZO, LZ4, LZ4_RAW and
// BROTLI pages are refused as unimplemented, naming the codec.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace storage::parquet {

bool CodecSupported(int32_t codec);

common::Status Decompress(int32_t codec, const uint8_t* in, size_t in_size, uint8_t* out,
                          size_t out_size);

}  // namespace storage::parquet
