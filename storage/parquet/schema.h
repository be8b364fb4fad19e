// A Parquet schema as a tree, built from the footer's flat, depth-first list of schema elements,
// and the leaf columns with what reading them needs: the path of names, the physical type and
// the maximum definition and repetition levels (the Dremel encoding of nulls and lists).
//
// Building checks that the list is a tree (every num_children satisfied, nothing left over),
// that nesting stays within a depth limit (levels are kept in one byte each, so the limit is
// also what keeps them small), that leaves have a physical type and groups do not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/parquet/metadata.h"

namespace storage::parquet {

struct SchemaNode {
  std::string name;
  Repetition repetition = Repetition::kRequired;  // the root is required
  bool is_leaf = false;
  PhysicalType type = PhysicalType::kBoolean;  // leaves only
  int32_t type_length = 0;                     // FIXED_LEN_BYTE_ARRAY width
  ConvertedType converted_type = ConvertedType::kNone;
  LogicalType logical_type = LogicalType::kNone;
  int parent = -1;
  std::vector<int> children;
  // Maximum levels at this node: how many optional-or-repeated (definition) and repeated
  // (repetition) nodes lie on the path from the root to here, this node included.
  int max_def = 0;
  int max_rep = 0;
  int column = -1;  // leaf column index
};

struct ColumnDescriptor {
  int index = 0;  // among the leaves, the order of column chunks in a row group
  int node = 0;
  std::vector<std::string> path;  // names from the top-level field down to the leaf
  PhysicalType type = PhysicalType::kBoolean;
  int32_t type_length = 0;
  bool is_string = false;  // annotated UTF8 / STRING / ENUM / JSON
  int max_def = 0;
  int max_rep = 0;
  // The definition level of each repeated node on the path, outermost first (size max_rep). An
  // entry whose definition level reaches repeated_def[i] has an element in the i-th list; one
  // at repeated_def[i] - 1 is an empty list, and below that the list is null (or an ancestor is).
  std::vector<int> repeated_def;

  // The path joined with '.', for messages ("observation.state.list.element").
  std::string DottedPath() const;
};

class Schema {
 public:
  // `max_depth` bounds nesting below the root (a LIST of 26 floats is 3 deep).
  static common::Result<Schema> Build(const std::vector<SchemaElement>& elements, int max_depth);

  const std::vector<SchemaNode>& nodes() const { return nodes_; }
  const SchemaNode& root() const { return nodes_[0]; }
  const std::vector<ColumnDescriptor>& columns() const { return columns_; }

  // The leaf column named by `path`, from a top-level field down. The path may stop at a group
  // with a single leaf below it, so {"observation.state"} finds
  // observation.state.list.element; a group with several leaves (a map, a struct) is an error
  // that lists them. Names are compared exactly; dots are part of names.
  common::Result<int> FindColumn(const std::vector<std::string>& path) const;
  // As above for one name: the top-level field of that name or, when there is none, the name
  // split at dots.
  common::Result<int> FindColumn(const std::string& name) const;

  // The tree as indented text, one node a line (for tools and error messages).
  std::string ToString() const;

 private:
  std::vector<SchemaNode> nodes_;
  std::vector<ColumnDescriptor> columns_;
};

}  // namespace storage::parquet
