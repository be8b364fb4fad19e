// Schema trees and the assembly of levels into rows, on hand-written schemas and levels: a
// nullable flat column, a LIST with null and empty lists and null elements, a list of lists,
// a legacy two-level list, and levels that contradict each other.
#include "storage/parquet/assemble.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/parquet/schema.h"

namespace storage::parquet {
namespace {

SchemaElement Group(std::string name, Repetition r, int children, bool list = false) {
  SchemaElement e;
  e.name = std::move(name);
  e.repetition = r;
  e.num_children = children;
  if (list) {
    e.converted_type = ConvertedType::kList;
    e.converted_type_raw = 3;
  }
  return e;
}

SchemaElement Leaf(std::string name, Repetition r, PhysicalType t) {
  SchemaElement e;
  e.name = std::move(name);
  e.repetition = r;
  e.type = t;
  return e;
}

SchemaElement Root(int children) {
  SchemaElement e;
  e.name = "schema";
  e.num_children = children;
  return e;
}

// optional group tags (LIST) { repeated group list { optional float element } }
// optional group nested (LIST) { repeated group list { optional group element (LIST) {
//     repeated group list { optional binary element } } } }
// required int64 id;   repeated int32 legacy
Schema TestSchema() {
  std::vector<SchemaElement> e = {
      Root(4),
      Group("tags", Repetition::kOptional, 1, true),
      Group("list", Repetition::kRepeated, 1),
      Leaf("element", Repetition::kOptional, PhysicalType::kFloat),
      Group("nested", Repetition::kOptional, 1, true),
      Group("list", Repetition::kRepeated, 1),
      Group("element", Repetition::kOptional, 1, true),
      Group("list", Repetition::kRepeated, 1),
      Leaf("element", Repetition::kOptional, PhysicalType::kByteArray),
      Leaf("id", Repetition::kRequired, PhysicalType::kInt64),
      Leaf("legacy", Repetition::kRepeated, PhysicalType::kInt32),
  };
  auto s = Schema::Build(e, 32);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

TEST(SchemaTest, LevelsPathsAndLookups) {
  Schema s = TestSchema();
  ASSERT_EQ(s.columns().size(), 4u);
  const ColumnDescriptor& tags = s.columns()[0];
  EXPECT_EQ(tags.DottedPath(), "tags.list.element");
  EXPECT_EQ(tags.max_def, 3);
  EXPECT_EQ(tags.max_rep, 1);
  EXPECT_EQ(tags.repeated_def, (std::vector<int>{2}));
  const ColumnDescriptor& nested = s.columns()[1];
  EXPECT_EQ(nested.max_def, 5);
  EXPECT_EQ(nested.max_rep, 2);
  EXPECT_EQ(nested.repeated_def, (std::vector<int>{2, 4}));
  EXPECT_EQ(s.columns()[2].max_def, 0);
  EXPECT_EQ(s.columns()[3].repeated_def, (std::vector<int>{1}));
  EXPECT_EQ(*s.FindColumn("tags"), 0);
  EXPECT_EQ(*s.FindColumn("nested"), 1);
  EXPECT_EQ(*s.FindColumn("tags.list.element"), 0);
  EXPECT_EQ(*s.FindColumn(std::vector<std::string>{"nested", "list"}), 1);
  EXPECT_EQ(s.FindColumn("nope").status().code(), common::Code::kNotFound);
}

TEST(SchemaTest, DottedTopLevelNamesWinOverPaths) {
  std::vector<SchemaElement> e = {
      Root(2), Leaf("observation.state", Repetition::kRequired, PhysicalType::kFloat),
      Group("observation", Repetition::kRequired, 1),
      Leaf("state", Repetition::kRequired, PhysicalType::kDouble)};
  auto s = Schema::Build(e, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s->FindColumn("observation.state"), 0);
  EXPECT_EQ(*s->FindColumn(std::vector<std::string>{"observation", "state"}), 1);
}

TEST(SchemaTest, MalformedTreesAreRefused) {
  auto build = [](std::vector<SchemaElement> e, int depth = 32) {
    return Schema::Build(e, depth).status();
  };
  EXPECT_FALSE(build({}).ok());
  EXPECT_FALSE(build({Root(2), Leaf("a", Repetition::kRequired, PhysicalType::kInt32)}).ok());
  EXPECT_FALSE(build({Root(1), Leaf("a", Repetition::kRequired, PhysicalType::kInt32),
                      Leaf("b", Repetition::kRequired, PhysicalType::kInt32)})
                   .ok());
  SchemaElement no_rep = Leaf("a", Repetition::kRequired, PhysicalType::kInt32);
  no_rep.repetition.reset();
  EXPECT_FALSE(build({Root(1), no_rep}).ok());
  SchemaElement flba = Leaf("a", Repetition::kRequired, PhysicalType::kFixedLenByteArray);
  EXPECT_FALSE(build({Root(1), flba}).ok());
  // A group that claims a million children.
  EXPECT_FALSE(build({Root(1), Group("g", Repetition::kRequired, 1000000),
                      Leaf("a", Repetition::kRequired, PhysicalType::kInt32)})
                   .ok());
  // 40 nested groups against a limit of 32.
  std::vector<SchemaElement> deep = {Root(1)};
  for (int i = 0; i < 40; ++i) deep.push_back(Group("g", Repetition::kOptional, 1));
  deep.push_back(Leaf("a", Repetition::kOptional, PhysicalType::kInt32));
  common::Status s = build(deep);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deeper than 32"), std::string::npos) << s.message();
  EXPECT_TRUE(build(deep, 64).ok());
}

ColumnData Data(const ColumnDescriptor& c, std::vector<uint8_t> def, std::vector<uint8_t> rep) {
  ColumnData d;
  d.column = c.index;
  d.max_def = c.max_def;
  d.max_rep = c.max_rep;
  d.num_levels = static_cast<int64_t>(std::max(def.size(), rep.size()));
  d.def_levels = std::move(def);
  if (c.max_rep == 1) {
    // One level of lists keeps its levels as row starts (column_chunk.h).
    for (size_t i = 0; i < rep.size(); ++i) {
      if (rep[i] == 0) d.row_starts.push_back(static_cast<int64_t>(i));
    }
    if (!rep.empty() && rep[0] != 0) d.row_starts.insert(d.row_starts.begin(), 99);  // invalid
  } else {
    d.rep_levels = std::move(rep);
  }
  d.values.Reset(c.type, c.type_length);
  return d;
}

TEST(AssembleTest, ListWithNullEmptyAndNullElements) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[0];
  // Rows: [1, null, 2], null, [], [3]
  ColumnData d = Data(c, {3, 2, 3, 0, 1, 3}, {0, 1, 1, 0, 0, 0});
  d.values.f32 = {1, 2, 3};
  NestedColumn n;
  ASSERT_TRUE(Assemble(std::move(d), c, &n).ok());
  EXPECT_EQ(n.num_rows, 4);
  ASSERT_EQ(n.lists.size(), 1u);
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 3, 3, 3, 4}));
  EXPECT_EQ(n.lists[0].valid, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(n.values.f32, (std::vector<float>{1, 0, 2, 3}));
  EXPECT_EQ(n.valid, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(n.FixedListLength(), -1);
}

TEST(AssembleTest, DenseFixedLengthListTakesTheValuesWithoutNulls) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[0];
  std::vector<uint8_t> def, rep;
  for (int row = 0; row < 3; ++row) {
    for (int k = 0; k < 4; ++k) {
      def.push_back(3);
      rep.push_back(k == 0 ? 0 : 1);
    }
  }
  ColumnData d = Data(c, def, rep);
  for (int i = 0; i < 12; ++i) d.values.f32.push_back(static_cast<float>(i));
  const float* before = d.values.f32.data();
  NestedColumn n;
  ASSERT_TRUE(Assemble(std::move(d), c, &n).ok());
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 4, 8, 12}));
  EXPECT_TRUE(n.lists[0].valid.empty());
  EXPECT_TRUE(n.valid.empty());
  EXPECT_EQ(n.values.f32.data(), before);  // moved, not copied
  EXPECT_EQ(n.FixedListLength(), 4);
}

TEST(AssembleTest, ListOfListsOfStrings) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[1];
  // Rows: [["a", null], null, []], null, [], [["b"]]
  //   "a":     r0 d5      null elem: r2 d4     null inner list: r1 d2    empty inner: r1 d3
  //   null row: r0 d0     empty row: r0 d1     "b": r0 d5
  ColumnData d = Data(c, {5, 4, 2, 3, 0, 1, 5}, {0, 2, 1, 1, 0, 0, 0});
  d.values.bytes = "ab";
  d.values.offsets = {0, 1, 2};
  NestedColumn n;
  ASSERT_TRUE(Assemble(std::move(d), c, &n).ok());
  EXPECT_EQ(n.num_rows, 4);
  ASSERT_EQ(n.lists.size(), 2u);
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 3, 3, 3, 4}));
  EXPECT_EQ(n.lists[0].valid, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(n.lists[1].offsets, (std::vector<int64_t>{0, 2, 2, 2, 3}));
  EXPECT_EQ(n.lists[1].valid, (std::vector<uint8_t>{1, 0, 1, 1}));
  ASSERT_EQ(n.values.size(), 3);
  EXPECT_EQ(n.values.View(0), "a");
  EXPECT_EQ(n.values.View(1), "");
  EXPECT_EQ(n.values.View(2), "b");
  EXPECT_EQ(n.valid, (std::vector<uint8_t>{1, 0, 1}));
}

TEST(AssembleTest, FlatNullableAndLegacyRepeatedColumns) {
  std::vector<SchemaElement> e = {Root(2), Leaf("x", Repetition::kOptional, PhysicalType::kInt64),
                                  Leaf("r", Repetition::kRepeated, PhysicalType::kInt32)};
  auto s = Schema::Build(e, 8);
  ASSERT_TRUE(s.ok());
  ColumnData x = Data(s->columns()[0], {1, 0, 1}, {});
  x.values.i64 = {7, 9};
  NestedColumn n;
  ASSERT_TRUE(Assemble(std::move(x), s->columns()[0], &n).ok());
  EXPECT_EQ(n.num_rows, 3);
  EXPECT_EQ(n.values.i64, (std::vector<int64_t>{7, 0, 9}));
  EXPECT_EQ(n.valid, (std::vector<uint8_t>{1, 0, 1}));
  // A repeated leaf is a list of required values; definition level 0 is an empty list.
  ColumnData r = Data(s->columns()[1], {1, 1, 0, 1}, {0, 1, 0, 0});
  r.values.i32 = {1, 2, 3};
  ASSERT_TRUE(Assemble(std::move(r), s->columns()[1], &n).ok());
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_TRUE(n.lists[0].valid.empty());
}

TEST(AssembleTest, EmptyDefinitionLevelsMeanEveryEntryIsPresent) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[0];
  ColumnData d = Data(c, {}, {0, 1, 0});
  d.values.f32 = {1, 2, 3};
  NestedColumn n;
  ASSERT_TRUE(Assemble(std::move(d), c, &n).ok());
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 2, 3}));
  // ... which a missing value contradicts.
  ColumnData short_values = Data(c, {}, {0, 1, 0});
  short_values.values.f32 = {1, 2};
  EXPECT_FALSE(Assemble(std::move(short_values), c, &n).ok());
  // And for a list of lists, through the general path.
  ColumnData nested = Data(s.columns()[1], {}, {0, 2, 1, 0});
  nested.values.bytes = "abcd";
  nested.values.offsets = {0, 1, 2, 3, 4};
  ASSERT_TRUE(Assemble(std::move(nested), s.columns()[1], &n).ok());
  EXPECT_EQ(n.lists[0].offsets, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(n.lists[1].offsets, (std::vector<int64_t>{0, 2, 3, 4}));
}

TEST(AssembleTest, ContradictoryLevelsAreErrors) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[0];
  NestedColumn n;
  // Continuing a list (r1) with an entry that says the list is empty (d1).
  ColumnData a = Data(c, {3, 1}, {0, 1});
  a.values.f32 = {1};
  EXPECT_FALSE(Assemble(std::move(a), c, &n).ok());
  // A first entry that does not start a row.
  ColumnData b = Data(c, {3, 3}, {1, 0});
  b.values.f32 = {1, 2};
  EXPECT_FALSE(Assemble(std::move(b), c, &n).ok());
  // More values than present leaves.
  ColumnData v = Data(c, {3, 2}, {0, 1});
  v.values.f32 = {1, 2};
  EXPECT_FALSE(Assemble(std::move(v), c, &n).ok());
  // Levels of the wrong length.
  ColumnData l = Data(c, {3}, {0, 1});
  l.values.f32 = {1, 2};
  EXPECT_FALSE(Assemble(std::move(l), c, &n).ok());
}

TEST(AssembleTest, AppendRowsShiftsOffsetsAndMergesValidity) {
  Schema s = TestSchema();
  const ColumnDescriptor& c = s.columns()[0];
  ColumnData a = Data(c, {3, 3}, {0, 1});
  a.values.f32 = {1, 2};
  ColumnData b = Data(c, {0, 3}, {0, 0});
  b.values.f32 = {3};
  NestedColumn na, nb;
  ASSERT_TRUE(Assemble(std::move(a), c, &na).ok());
  ASSERT_TRUE(Assemble(std::move(b), c, &nb).ok());
  AppendRows(std::move(nb), &na);
  EXPECT_EQ(na.num_rows, 3);
  EXPECT_EQ(na.lists[0].offsets, (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(na.lists[0].valid, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(na.values.f32, (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace storage::parquet
