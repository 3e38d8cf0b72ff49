#include "pipeplan/io/json.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

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

// What append_json must write: dump_json's text without its last newline, its other newlines
// followed by the indent.
std::string indented_dump(const nlohmann::ordered_json& value, const std::string& newline) {
  std::string dumped = dump_json(value);
  dumped.pop_back();
  std::string out;
  for (const char c : dumped) {
    if (c == '\n') {
      out += newline;
    } else {
      out += c;
    }
  }
  return out;
}

std::string appended(const nlohmann::ordered_json& value) {
  std::string text = "x";
  append_json(text, value, "\n    ");
  return text.substr(1);
}

// The direct writing of scalars (append_json, and the typed writers a plan's schedule uses) is
// the serializer's, byte for byte: seeded doubles over every
// magnitude (bit patterns, so subnormals, huge values and integers too), the special values,
// integers at their limits, strings that need escaping or are not ASCII, and values it leaves
// to the serializer (arrays and objects, indented).
TEST(JsonTest, AppendJsonWritesWhatDumpJsonWrites) {
  std::mt19937_64 rng(20261205);
  std::vector<nlohmann::ordered_json> values;
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t bits = rng();
    double x = 0;
    std::memcpy(&x, &bits, sizeof x);
    values.emplace_back(x);  // NaN and infinities included: null
    values.emplace_back(static_cast<double>(static_cast<std::int64_t>(bits % 100000)) / 1000);
    values.emplace_back(json_number(static_cast<double>(bits % 1000000007)));
  }
  for (const double x :
       {0.0, -0.0, 1.0, -1.0, 0.1, 1e300, -1e-300, 5e-324, 1e21, 1e22,
        std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
        std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    values.emplace_back(x);
  }
  values.emplace_back(std::numeric_limits<std::int64_t>::min());
  values.emplace_back(std::numeric_limits<std::int64_t>::max());
  values.emplace_back(std::numeric_limits<std::uint64_t>::max());
  for (const char* text : {"", "node0/gpu0", "a\"b", "back\\slash", "tab\there", "\x7f",
                           "caf\xc3\xa9", "bad \xff utf-8", "\x01"}) {
    values.emplace_back(text);
  }
  values.emplace_back(true);
  values.emplace_back(false);
  values.emplace_back(nullptr);
  values.emplace_back(nlohmann::ordered_json::array({"g0", "g1"}));
  values.emplace_back(nlohmann::ordered_json{{"a", 1.5}, {"b", nullptr}});
  for (const nlohmann::ordered_json& value : values) {
    const std::string expected = indented_dump(value, "\n    ");
    ASSERT_EQ(appended(value), expected) << value.dump();
    // The typed writers, which skip the JSON value, write the same.
    std::string typed;
    if (value.is_number_float()) append_json_number(typed, value.get<double>());
    if (value.is_number_integer() && !value.is_number_unsigned()) {
      append_json_integer(typed, value.get<std::int64_t>());
    }
    if (value.is_string()) append_json_string(typed, value.get<std::string>());
    if (!typed.empty()) {
      ASSERT_EQ(typed, expected) << value.dump();
    }
  }
}

}  // namespace
}  // namespace pipeplan::io
