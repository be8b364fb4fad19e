// ParseFileMetaData: the file's footer (schema elements, row groups, column chunks with their
// meta data and statistics, key/value metadata). Page headers are parsed in
// metadata_page_header.cc, the names of types, encodings and codecs are in metadata_names.cc.
#include "storage/parquet/metadata.h"

#include <string>
#include <vector>

#include "storage/parquet/metadata_internal.h"
#include "storage/parquet/thrift_compact.h"

namespace storage::parquet {

namespace {

using common::Status;
using metadata_internal::In;
using metadata_internal::NotNegative;
using metadata_internal::ReadEnum;
using metadata_internal::Seen;

Status ParseStatistics(CompactReader& r, Statistics* s) {
  std::string bytes;
  int64_t n = 0;
  return r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    switch (id) {
      case 1:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &bytes));
        s->max = bytes;
        return Status::Ok();
      case 2:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &bytes));
        s->min = bytes;
        return Status::Ok();
      case 3:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        s->null_count = n;
        return Status::Ok();
      case 4:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        s->distinct_count = n;
        return Status::Ok();
      case 5:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &bytes));
        s->max_value = bytes;
        return Status::Ok();
      case 6:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &bytes));
        s->min_value = bytes;
        return Status::Ok();
      default:
        return r.Skip(t);
    }
  });
}

// The LogicalType union: the member's field id is what we keep.
Status ParseLogicalType(CompactReader& r, LogicalType* out) {
  *out = LogicalType::kNone;
  return r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    if (t != ThriftType::kStruct) return r.Skip(t);
    switch (id) {
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6:
      case 7:
      case 8:
      case 10:
      case 11:
      case 12:
      case 13:
      case 14:
      case 15:
        *out = static_cast<LogicalType>(id);
        break;
      default:
        *out = LogicalType::kOther;
    }
    return r.Skip(t);
  });
}

Status ParseSchemaElement(CompactReader& r, SchemaElement* e) {
  Seen seen;
  int32_t v = 0;
  EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    switch (id) {
      case 1:
        EMBODY_RETURN_IF_ERROR(ReadEnum(r, t, 0, 7, "physical type", &v));
        e->type = static_cast<PhysicalType>(v);
        return Status::Ok();
      case 2:
        return r.ReadI32(t, &e->type_length);
      case 3:
        EMBODY_RETURN_IF_ERROR(ReadEnum(r, t, 0, 2, "repetition type", &v));
        e->repetition = static_cast<Repetition>(v);
        return Status::Ok();
      case 4:
        return r.ReadBinary(t, &e->name);
      case 5:
        return r.ReadI32(t, &e->num_children);
      case 6:
        EMBODY_RETURN_IF_ERROR(r.ReadI32(t, &e->converted_type_raw));
        switch (e->converted_type_raw) {
          case 0:
          case 1:
          case 2:
          case 3:
          case 4:
          case 5:
          case 19:
            e->converted_type = static_cast<ConvertedType>(e->converted_type_raw);
            break;
          default:
            e->converted_type = ConvertedType::kNone;
        }
        return Status::Ok();
      case 7:
        return r.ReadI32(t, &e->scale);
      case 8:
        return r.ReadI32(t, &e->precision);
      case 9:
        EMBODY_RETURN_IF_ERROR(r.ReadI32(t, &v));
        e->field_id = v;
        return Status::Ok();
      case 10:
        return ParseLogicalType(r, &e->logical_type);
      default:
        return r.Skip(t);
    }
  }));
  EMBODY_RETURN_IF_ERROR(seen.Require("a schema element", {{4, "name"}}));
  if (e->num_children < 0)
    return common::InvalidArgument("schema element '" + e->name + "' has a negative num_children");
  return Status::Ok();
}

Status ParseStringList(CompactReader& r, ThriftType t, std::vector<std::string>* out) {
  return r.ReadList(t, [&](ThriftType et) -> Status {
    out->emplace_back();
    return r.ReadBinary(et, &out->back());
  });
}

Status ParseColumnMetaData(CompactReader& r, ColumnMetaData* m) {
  Seen seen;
  int32_t v = 0;
  EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    int64_t n = 0;
    switch (id) {
      case 1:
        EMBODY_RETURN_IF_ERROR(ReadEnum(r, t, 0, 7, "physical type", &v));
        m->type = static_cast<PhysicalType>(v);
        return Status::Ok();
      case 2:
        return r.ReadList(t, [&](ThriftType et) -> Status {
          EMBODY_RETURN_IF_ERROR(r.ReadI32(et, &v));
          m->encodings.push_back(v);
          return Status::Ok();
        });
      case 3:
        return ParseStringList(r, t, &m->path_in_schema);
      case 4:
        return r.ReadI32(t, &m->codec);
      case 5:
        return r.ReadI64(t, &m->num_values);
      case 6:
        return r.ReadI64(t, &m->total_uncompressed_size);
      case 7:
        return r.ReadI64(t, &m->total_compressed_size);
      case 9:
        return r.ReadI64(t, &m->data_page_offset);
      case 10:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        m->index_page_offset = n;
        return Status::Ok();
      case 11:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        m->dictionary_page_offset = n;
        return Status::Ok();
      case 12:
        if (t != ThriftType::kStruct) return r.Skip(t);
        m->statistics.emplace();
        return ParseStatistics(r, &*m->statistics);
      default:
        return r.Skip(t);
    }
  }));
  EMBODY_RETURN_IF_ERROR(seen.Require("column meta data", {{1, "type"},
                                                           {2, "encodings"},
                                                           {3, "path_in_schema"},
                                                           {4, "codec"},
                                                           {5, "num_values"},
                                                           {6, "total_uncompressed_size"},
                                                           {7, "total_compressed_size"},
                                                           {9, "data_page_offset"}}));
  EMBODY_RETURN_IF_ERROR(NotNegative("column num_values", m->num_values));
  EMBODY_RETURN_IF_ERROR(NotNegative("column total_compressed_size", m->total_compressed_size));
  EMBODY_RETURN_IF_ERROR(NotNegative("column total_uncompressed_size", m->total_uncompressed_size));
  EMBODY_RETURN_IF_ERROR(NotNegative("column data_page_offset", m->data_page_offset));
  return Status::Ok();
}

Status ParseColumnChunk(CompactReader& r, ColumnChunk* c) {
  EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    std::string path;
    switch (id) {
      case 1:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &path));
        c->file_path = path;
        return Status::Ok();
      case 2:
        return r.ReadI64(t, &c->file_offset);
      case 3:
        if (t != ThriftType::kStruct) return r.Skip(t);
        c->meta_data.emplace();
        return ParseColumnMetaData(r, &*c->meta_data);
      case 8:
      case 9:
        c->encrypted = true;
        return r.Skip(t);
      default:
        return r.Skip(t);
    }
  }));
  return Status::Ok();
}

Status ParseRowGroup(CompactReader& r, RowGroup* g) {
  Seen seen;
  EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    int64_t n = 0;
    switch (id) {
      case 1:
        return r.ReadList(t, [&](ThriftType et) -> Status {
          if (et != ThriftType::kStruct)
            return common::InvalidArgument("a column chunk is not a struct");
          g->columns.emplace_back();
          return ParseColumnChunk(r, &g->columns.back());
        });
      case 2:
        return r.ReadI64(t, &g->total_byte_size);
      case 3:
        return r.ReadI64(t, &g->num_rows);
      case 5:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        g->file_offset = n;
        return Status::Ok();
      case 6:
        EMBODY_RETURN_IF_ERROR(r.ReadI64(t, &n));
        g->total_compressed_size = n;
        return Status::Ok();
      default:
        return r.Skip(t);
    }
  }));
  EMBODY_RETURN_IF_ERROR(
      seen.Require("a row group", {{1, "columns"}, {2, "total_byte_size"}, {3, "num_rows"}}));
  return NotNegative("row group num_rows", g->num_rows);
}

Status ParseKeyValue(CompactReader& r, KeyValue* kv) {
  Seen seen;
  EMBODY_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    std::string value;
    switch (id) {
      case 1:
        return r.ReadBinary(t, &kv->key);
      case 2:
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &value));
        kv->value = std::move(value);
        return Status::Ok();
      default:
        return r.Skip(t);
    }
  }));
  return seen.Require("a key/value pair", {{1, "key"}});
}

}  // namespace

Status ParseFileMetaData(const uint8_t* data, size_t size, FileMetaData* out) {
  CompactReader r(data, size);
  Seen seen;
  Status s = r.ReadStruct([&](int16_t id, ThriftType t) -> Status {
    seen.Mark(id);
    switch (id) {
      case 1:
        return r.ReadI32(t, &out->version);
      case 2:
        return r.ReadList(t, [&](ThriftType et) -> Status {
          if (et != ThriftType::kStruct) {
            return common::InvalidArgument("a schema element is not a struct");
          }
          out->schema.emplace_back();
          return ParseSchemaElement(r, &out->schema.back());
        });
      case 3:
        return r.ReadI64(t, &out->num_rows);
      case 4:
        return r.ReadList(t, [&](ThriftType et) -> Status {
          if (et != ThriftType::kStruct)
            return common::InvalidArgument("a row group is not a struct");
          out->row_groups.emplace_back();
          return ParseRowGroup(r, &out->row_groups.back());
        });
      case 5:
        return r.ReadList(t, [&](ThriftType et) -> Status {
          if (et != ThriftType::kStruct)
            return common::InvalidArgument("a key/value is not a struct");
          out->key_value_metadata.emplace_back();
          return ParseKeyValue(r, &out->key_value_metadata.back());
        });
      case 6: {
        std::string created_by;
        EMBODY_RETURN_IF_ERROR(r.ReadBinary(t, &created_by));
        out->created_by = std::move(created_by);
        return Status::Ok();
      }
      case 8:
        out->encrypted = true;
        return r.Skip(t);
      default:
        return r.Skip(t);
    }
  });
  EMBODY_RETURN_IF_ERROR(In("file metadata", s));
  EMBODY_RETURN_IF_ERROR(
      In("file metadata",
         seen.Require("file metadata",
                      {{1, "version"}, {2, "schema"}, {3, "num_rows"}, {4, "row_groups"}})));
  return In("file metadata", NotNegative("num_rows", out->num_rows));
}

}  // namespace storage::parquet
