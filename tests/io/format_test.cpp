// Number and list formatting for messages (io/format.hpp).

#include "pipeplan/io/format.hpp"

#include <gtest/gtest.h>

namespace pipeplan::io {
namespace {

TEST(FormatTest, FormatsQuantities) {
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_ms(412.7), "412.7 ms");
  EXPECT_EQ(format_number(6.0), "6");
}

TEST(FormatTest, CountsTakeTheNounTheirNumberAsks) {
  EXPECT_EQ(format_count(1, "layer", "layers"), "1 layer");
  EXPECT_EQ(format_count(0, "layer", "layers"), "0 layers");
  EXPECT_EQ(format_count(2, "micro-batch", "micro-batches"), "2 micro-batches");
}

TEST(FormatTest, ListsJoinEveryItemBySeparator) {
  EXPECT_EQ(format_list({}), "");
  EXPECT_EQ(format_list({"a"}), "a");
  EXPECT_EQ(format_list({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(format_list({"0", "1", "2"}, ","), "0,1,2");
}

TEST(FormatTest, ChoicesJoinTheLastTwoByOr) {
  EXPECT_EQ(format_choices({"a"}), "a");
  EXPECT_EQ(format_choices({"a", "b"}), "a or b");
  EXPECT_EQ(format_choices({"list", "1f1b", "gpipe"}), "list, 1f1b or gpipe");
}

}  // namespace
}  // namespace pipeplan::io
