// The readers' own bounds on an input's size: bytes, JSON values, byte-order marks, and
// json_array's linear building.

#include <gtest/gtest.h>

#include <sstream>
#include <streambuf>

#include "pipeplan/error.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/io/json.hpp"

namespace pipeplan::io {
namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_json(source_from_text("in.json", text));
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// `[0,0,...,0]` with `count` zeros.
std::string zeros(std::size_t count) {
  std::string text = "[";
  text.reserve(2 * count + 2);
  for (std::size_t i = 0; i < count; ++i) text += i == 0 ? "0" : ",0";
  return text + "]";
}

std::string parse_error(const std::string& text, std::size_t max_values) {
  try {
    parse_json(source_from_text("in.json", text), max_values);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(InputLimitsTest, JsonValuesAreCounted) {
  // Every value counts, containers and keys' values included: the array and 9 zeros fit in
  // 10, one more zero does not.
  EXPECT_EQ(parse_error(zeros(9), 10), "no error");
  EXPECT_EQ(parse_error(zeros(10), 10), "in.json: too large: more than 10 JSON values");
  EXPECT_EQ(parse_error(R"({"a": [1, {"b": null}], "c": "d"})", 6), "no error");
  EXPECT_EQ(parse_error(R"({"a": [1, {"b": null}], "c": "d"})", 5),
            "in.json: too large: more than 5 JSON values");
  // The readers use kMaxJsonValues.
  EXPECT_EQ(kMaxJsonValues, std::size_t{1} << 25);
  EXPECT_EQ(parse_error(zeros(100000)), "no error");
}

TEST(InputLimitsTest, OnlyOneByteOrderMark) {
  EXPECT_EQ(parse_error("\xEF\xBB\xBF[1]"), "no error");
  EXPECT_EQ(parse_error("\xEF\xBB\xBF\xEF\xBB\xBF[1]"),
            "in.json: malformed JSON: at line 1, column 4: a second byte-order mark (only one may "
            "start the file)");
}

// An endless stream of spaces, produced on demand.
class Spaces : public std::streambuf {
 public:
  Spaces() { setg(buffer_, buffer_, buffer_ + sizeof buffer_); }

 protected:
  int_type underflow() override {
    std::fill(std::begin(buffer_), std::end(buffer_), ' ');
    setg(buffer_, buffer_, buffer_ + sizeof buffer_);
    return traits_type::to_int_type(' ');
  }

 private:
  char buffer_[1 << 16] = {};
};

TEST(InputLimitsTest, InputBytesAreCapped) {
  Spaces spaces;
  std::istream endless(&spaces);
  try {
    read_source("-", endless);
    FAIL() << "an endless input was read";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "<stdin>: larger than 1 GiB, refusing to read it");
  }
}

TEST(InputLimitsTest, JsonArrayKeepsItsElementsInOrder) {
  std::vector<nlohmann::ordered_json> values;
  for (int i = 0; i < 100000; ++i) values.emplace_back(i);
  const nlohmann::ordered_json array = json_array(std::move(values));
  ASSERT_EQ(array.size(), 100000u);
  EXPECT_EQ(array.front(), 0);
  EXPECT_EQ(array.back(), 99999);
  EXPECT_EQ(dump_json(json_array({}), -1), "[]\n");
}

}  // namespace
}  // namespace pipeplan::io
