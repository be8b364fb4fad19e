// ParsePageHeader: a page's header (data page v1 and v2, dictionary page) from its Thrift
// compact bytes, with the required fields and sizes checked.
#include <string>

#include "storage/parquet/metadata.h"
#include "storage/parquet/metadata_internal.h"
#include "storage/parquet/thrift_compact.h"

namespace storage::parquet {

using common::Status;
using metadata_internal::In;
using metadata_internal::Seen;

Status ParsePageHeader(const uint8_t* data, size_t size, PageHeader* out, size_t* header_size) {
  CompactReader r(data, size);
  Seen seen;
  Status s = r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    int32_t crc = 0;
    switch (id) {
      case 1:
        return r.ReadI32(t, &out->type);
      case 2:
        return r.ReadI32(t, &out->uncompressed_page_size);
      case 3:
        return r.ReadI32(t, &out->compressed_page_size);
      case 4:
        EMBODY_RETURN_IF_ERROR(r.ReadI32(t, &crc));
        out->crc = crc;
        return Status::Ok();
      case 5: {
        if (t != ThriftType::kStruct) return r.Skip(t);
        DataPageHeader& h = out->data_page.emplace();
        Seen inner;
        EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t fid, ThriftType ft) -> Status {
          inner.Mark(fid);
          switch (fid) {
            case 1:
              return r.ReadI32(ft, &h.num_values);
            case 2:
              return r.ReadI32(ft, &h.encoding);
            case 3:
              return r.ReadI32(ft, &h.definition_level_encoding);
            case 4:
              return r.ReadI32(ft, &h.repetition_level_encoding);
            default:
              return r.Skip(ft);
          }
        }));
        return inner.Require("a data page header", {{1, "num_values"},
                                                    {2, "encoding"},
                                                    {3, "definition_level_encoding"},
                                                    {4, "repetition_level_encoding"}});
      }
      case 7: {
        if (t != ThriftType::kStruct) return r.Skip(t);
        DictionaryPageHeader& h = out->dictionary_page.emplace();
        Seen inner;
        EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t fid, ThriftType ft) -> Status {
          inner.Mark(fid);
          switch (fid) {
            case 1:
              return r.ReadI32(ft, &h.num_values);
            case 2:
              return r.ReadI32(ft, &h.encoding);
            case 3:
              return r.ReadBool(ft, &h.is_sorted);
            default:
              return r.Skip(ft);
          }
        }));
        return inner.Require("a dictionary page header", {{1, "num_values"}, {2, "encoding"}});
      }
      case 8: {
        if (t != ThriftType::kStruct) return r.Skip(t);
        DataPageHeaderV2& h = out->data_page_v2.emplace();
        Seen inner;
        EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t fid, ThriftType ft) -> Status {
          inner.Mark(fid);
          switch (fid) {
            case 1:
              return r.ReadI32(ft, &h.num_values);
            case 2:
              return r.ReadI32(ft, &h.num_nulls);
            case 3:
              return r.ReadI32(ft, &h.num_rows);
            case 4:
              return r.ReadI32(ft, &h.encoding);
            case 5:
              return r.ReadI32(ft, &h.definition_levels_byte_length);
            case 6:
              return r.ReadI32(ft, &h.repetition_levels_byte_length);
            case 7:
              return r.ReadBool(ft, &h.is_compressed);
            default:
              return r.Skip(ft);
          }
        }));
        return inner.Require("a data page v2 header", {{1, "num_values"},
                                                       {2, "num_nulls"},
                                                       {3, "num_rows"},
                                                       {4, "encoding"},
                                                       {5, "definition_levels_byte_length"},
                                                       {6, "repetition_levels_byte_length"}});
      }
      default:
        return r.Skip(t);
    }
  });
  EMBODY_RETURN_IF_ERROR(In("page header", s));
  EMBODY_RETURN_IF_ERROR(
      In("page header",
         seen.Require("a page header",
                      {{1, "type"}, {2, "uncompressed_page_size"}, {3, "compressed_page_size"}})));
  if (out->uncompressed_page_size < 0 || out->compressed_page_size < 0) {
    return common::InvalidArgument("page header: negative page size");
  }
  if (out->data_page && out->data_page->num_values < 0) {
    return common::InvalidArgument("page header: negative num_values");
  }
  if (out->dictionary_page && out->dictionary_page->num_values < 0) {
    return common::InvalidArgument("page header: negative dictionary num_values");
  }
  if (out->data_page_v2) {
    const DataPageHeaderV2& h = *out->data_page_v2;
    if (h.num_values < 0 || h.num_nulls < 0 || h.num_rows < 0 ||
        h.definition_levels_byte_length < 0 || h.repetition_levels_byte_length < 0) {
      return common::InvalidArgument("page header: a negative count or length in the v2 header");
    }
  }
  *header_size = r.position();
  return Status::Ok();
}

}  // namespace storage::parquet
