#include "storage/parquet/schema.h"

#include <utility>

namespace storage::parquet {

namespace {

bool IsStringAnnotated(const SchemaElement& e) {
  return e.converted_type == ConvertedType::kUtf8 || e.converted_type == ConvertedType::kEnum ||
         e.converted_type == ConvertedType::kJson || e.logical_type == LogicalType::kString ||
         e.logical_type == LogicalType::kEnum || e.logical_type == LogicalType::kJson;
}

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    if (i) s += '.';
    s += parts[i];
  }
  return s;
}

}  // namespace

std::string ColumnDescriptor::DottedPath() const { return Join(path, path.size()); }

common::Result<Schema> Schema::Build(const std::vector<SchemaElement>& elements, int max_depth) {
  if (elements.empty()) return common::InvalidArgument("schema: no elements");
  const SchemaElement& root = elements[0];
  if (root.num_children <= 0 || root.type) {
    return common::InvalidArgument("schema: the root '" + root.name + "' is not a group");
  }
  Schema schema;
  schema.nodes_.reserve(elements.size());
  SchemaNode r;
  r.name = root.name;
  schema.nodes_.push_back(std::move(r));

  // Open groups and how many children each still expects; the tree is depth-first.
  std::vector<std::pair<int, int32_t>> open = {{0, root.num_children}};
  for (size_t i = 1; i < elements.size(); ++i) {
    if (open.empty()) {
      return common::InvalidArgument("schema: " + std::to_string(elements.size() - i) +
                                     " elements after the root's children");
    }
    const SchemaElement& e = elements[i];
    const int parent = open.back().first;
    --open.back().second;

    SchemaNode n;
    n.name = e.name;
    if (!e.repetition) {
      return common::InvalidArgument("schema: element '" + e.name + "' has no repetition type");
    }
    n.repetition = *e.repetition;
    n.converted_type = e.converted_type;
    n.logical_type = e.logical_type;
    n.parent = parent;
    const SchemaNode& p = schema.nodes_[static_cast<size_t>(parent)];
    n.max_def = p.max_def + (n.repetition != Repetition::kRequired ? 1 : 0);
    n.max_rep = p.max_rep + (n.repetition == Repetition::kRepeated ? 1 : 0);
    const int index = static_cast<int>(schema.nodes_.size());

    if (e.num_children > 0) {
      if (e.type) {
        return common::InvalidArgument("schema: group '" + e.name + "' has a physical type");
      }
      if (static_cast<int>(open.size()) >= max_depth) {
        return common::InvalidArgument("schema: nesting deeper than " + std::to_string(max_depth) +
                                       " levels at '" + e.name + "'");
      }
      open.emplace_back(index, e.num_children);
    } else if (e.type) {
      n.is_leaf = true;
      n.type = *e.type;
      n.type_length = e.type_length;
      if (n.type == PhysicalType::kFixedLenByteArray && n.type_length <= 0) {
        return common::InvalidArgument("schema: fixed-length column '" + e.name +
                                       "' has no positive type_length");
      }
      ColumnDescriptor c;
      c.index = static_cast<int>(schema.columns_.size());
      c.node = index;
      c.type = n.type;
      c.type_length = n.type_length;
      c.is_string = IsStringAnnotated(e);
      c.max_def = n.max_def;
      c.max_rep = n.max_rep;
      n.column = c.index;
      schema.columns_.push_back(std::move(c));
    }
    // A group without children and without a type is an empty group: it holds no columns.
    schema.nodes_[static_cast<size_t>(parent)].children.push_back(index);
    schema.nodes_.push_back(std::move(n));
    while (!open.empty() && open.back().second == 0) open.pop_back();
  }
  if (!open.empty()) {
    return common::InvalidArgument("schema: '" +
                                   schema.nodes_[static_cast<size_t>(open.back().first)].name +
                                   "' claims more children than the schema has elements");
  }
  if (schema.columns_.empty()) return common::InvalidArgument("schema: no leaf columns");

  // Paths and repeated-node levels, walking each leaf's ancestors.
  for (ColumnDescriptor& c : schema.columns_) {
    std::vector<int> chain;
    for (int n = c.node; n > 0; n = schema.nodes_[static_cast<size_t>(n)].parent) {
      chain.push_back(n);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const SchemaNode& n = schema.nodes_[static_cast<size_t>(*it)];
      c.path.push_back(n.name);
      if (n.repetition == Repetition::kRepeated) c.repeated_def.push_back(n.max_def);
    }
  }
  return schema;
}

common::Result<int> Schema::FindColumn(const std::vector<std::string>& path) const {
  int node = 0;
  for (size_t i = 0; i < path.size(); ++i) {
    int found = -1;
    for (int child : nodes_[static_cast<size_t>(node)].children) {
      if (nodes_[static_cast<size_t>(child)].name == path[i]) {
        found = child;
        break;
      }
    }
    if (found < 0) {
      return common::NotFound("no column '" + Join(path, i + 1) + "' in the schema");
    }
    node = found;
  }
  // Down through groups with one child (a LIST's repeated group and its element).
  while (!nodes_[static_cast<size_t>(node)].is_leaf) {
    const SchemaNode& n = nodes_[static_cast<size_t>(node)];
    if (n.children.size() != 1) {
      std::string leaves;
      for (const ColumnDescriptor& c : columns_) {
        bool under = false;
        for (int a = c.node; a >= 0; a = nodes_[static_cast<size_t>(a)].parent) {
          if (a == node) under = true;
        }
        if (under) leaves += (leaves.empty() ? "" : ", ") + c.DottedPath();
      }
      return common::InvalidArgument("'" + Join(path, path.size()) + "' is a group of " +
                                     std::to_string(n.children.size()) +
                                     " fields; name one of its leaves: " + leaves);
    }
    node = n.children[0];
  }
  return nodes_[static_cast<size_t>(node)].column;
}

common::Result<int> Schema::FindColumn(const std::string& name) const {
  for (int child : root().children) {
    if (nodes_[static_cast<size_t>(child)].name == name) return FindColumn(std::vector{name});
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return FindColumn(parts);
}

std::string Schema::ToString() const {
  std::string out;
  // Iterative depth-first walk; depth is bounded by Build, but no recursion is needed anyway.
  std::vector<std::pair<int, int>> stack = {{0, 0}};
  while (!stack.empty()) {
    auto [index, depth] = stack.back();
    stack.pop_back();
    const SchemaNode& n = nodes_[static_cast<size_t>(index)];
    out.append(static_cast<size_t>(2 * depth), ' ');
    if (index != 0) {
      out += n.repetition == Repetition::kRequired   ? "required "
             : n.repetition == Repetition::kOptional ? "optional "
                                                     : "repeated ";
    }
    out += n.is_leaf ? PhysicalTypeName(n.type) : "group";
    out += " " + n.name;
    if (n.converted_type == ConvertedType::kList || n.logical_type == LogicalType::kList) {
      out += " (LIST)";
    }
    if (n.is_leaf && columns_[static_cast<size_t>(n.column)].is_string) out += " (STRING)";
    out += "\n";
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) {
      stack.emplace_back(*it, depth + 1);
    }
  }
  return out;
}

}  // namespace storage::parquet
