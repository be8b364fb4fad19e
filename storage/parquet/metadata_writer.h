// Serializes the metadata structs of metadata.h into Thrift compact bytes: the inverse of
// ParseFileMetaData and ParsePageHeader. Every field the struct holds is written as it is, so a
// test can state a footer that lies (sizes, counts) and see the reader refuse it; the writer
// (writer.h) states only true ones. Fields the reader does not keep are never written.
#pragma once

#include <string>

#include "storage/parquet/metadata.h"

namespace storage::parquet {

std::string SerializeFileMetaData(const FileMetaData& m);
std::string SerializePageHeader(const PageHeader& h);

}  // namespace storage::parquet
