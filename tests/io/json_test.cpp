#include "pipeplan/io/json.hpp"

#include <gtest/gtest.h>

#include "pipeplan/error.hpp"

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

TEST(JsonTest, AcceptsLeadingByteOrderMark) {
  Document document = parse_json(source_from_text("in.json", "\xEF\xBB\xBF{\"a\": 1}"));
  EXPECT_EQ(document.root.at("a").get<int>(), 1);
}

TEST(JsonTest, RejectsDuplicateKeysWithPointer) {
  EXPECT_EQ(parse_error(R"({"a": {"b": 1, "b": 2}})"), "in.json: /a/b: duplicate key \"b\"");
}

TEST(JsonTest, RejectsMalformedText) {
  EXPECT_EQ(parse_error(R"({"a": [1, 2,]})"),
            "in.json: malformed JSON: at line 1, column 13: syntax error while parsing value - "
            "unexpected ']'; expected '[', '{', or a literal");
  EXPECT_EQ(parse_error(""),
            "in.json: malformed JSON: at line 1, column 1: syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal");
}

TEST(JsonTest, RejectsByteOrderMarkInsideText) {
  EXPECT_NE(parse_error("{\"a\": \xEF\xBB\xBF 1}").find("malformed JSON"), std::string::npos);
}

TEST(JsonTest, RejectsDeepNesting) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_EQ(parse_error(deep).substr(0, 9), "in.json: ");
  EXPECT_NE(parse_error(deep).find("nesting deeper than 128 levels"), std::string::npos);
}

TEST(JsonTest, RejectsOverflowingNumbers) {
  // The text is well-formed: the number is named by its pointer, like other bad numbers.
  EXPECT_EQ(parse_error(R"({"a": 1e400})"), "in.json: /a: must be a finite number, got 1e400");
  EXPECT_EQ(parse_error(R"({"a": [1, -1e999]})"),
            "in.json: /a/1: must be a finite number, got -1e999");
  EXPECT_EQ(parse_error("1e400"), "in.json: must be a finite number, got 1e400");
}

TEST(JsonTest, EscapesPointerTokens) { EXPECT_EQ(pointer_append("/x", "a/b~c"), "/x/a~1b~0c"); }

TEST(JsonTest, ObjectReaderRejectsUnknownKeysWithHint) {
  Document document = parse_json(source_from_text("m.json", R"({"forwrd_ms": 1, "x-note": 2})"));
  Node root(document, document.root, "");
  try {
    ObjectReader reader(root, {"forward_ms", "backward_ms"});
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "m.json: /forwrd_ms: unknown key (did you mean \"forward_ms\"?)");
  }
}

TEST(JsonTest, IntegerReadingChecksIntegralValues) {
  Document document = parse_json(source_from_text("m.json", R"([16.0, 1.5, -1, 1e30])"));
  auto elements = Node(document, document.root, "").elements();
  EXPECT_EQ(elements[0].as_integer(1, 100), 16);
  EXPECT_THROW((void)elements[1].as_integer(1, 100), InputError);
  EXPECT_THROW((void)elements[2].as_integer(1, 100), InputError);
  EXPECT_THROW((void)elements[3].as_integer(1, std::numeric_limits<std::int64_t>::max()),
               InputError);
}

}  // namespace
}  // namespace pipeplan::io
