// Strict JSON parsing (a SAX handler that builds the DOM, rejecting duplicate keys, deep
// nesting and overflowing numbers) and typed readers that track JSON pointers.
// Parsing is O(n) in the text size; key lookups in ObjectReader are O(k) per object of k keys.

#include "pipeplan/io/json.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "pipeplan/error.hpp"

namespace pipeplan::io {

using nlohmann::json;

namespace {

// Escapes bytes that would break a one-line message (control characters, non-ASCII).
std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(c));
      out += buf;
    }
  }
  return out;
}

// Builds a json value from SAX events. nlohmann's own DOM parser silently keeps the last of
// two equal keys; this one reports the duplicate with its pointer.
class StrictSaxBuilder {
 public:
  StrictSaxBuilder(json& root, std::size_t max_values) : root_(root), max_values_(max_values) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool value) { return put(json(value)); }
  bool number_integer(json::number_integer_t value) { return put(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return put(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    if (!std::isfinite(value)) return fail(pointer(), "number out of range: " + printable(text));
    return put(json(value));
  }
  bool string(json::string_t& value) { return put(json(std::move(value))); }
  bool binary(json::binary_t& /*value*/) { return fail(pointer(), "binary values are not JSON"); }
  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool key(json::string_t& key) {
    Frame& top = stack_.back();
    if (top.value->contains(key)) {
      return fail(pointer_append(top.pointer, key), "duplicate key " + quote_for_message(key));
    }
    top.key = std::move(key);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t /*position*/, const std::string& last_token,
                   const nlohmann::detail::exception& error) {
    // out_of_range.406: a number too large for a double (`1e400`). The text is well-formed, so
    // the value has a pointer, like every other bad number.
    if (error.id == 406) {
      return fail(pointer(), "must be a finite number, got " + printable(last_token));
    }
    std::string message = error.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 12: syntax error ..."
    if (auto close_bracket = message.find("] "); close_bracket != std::string::npos) {
      message.erase(0, close_bracket + 2);
    }
    if (message.rfind("parse error ", 0) == 0) message.erase(0, 12);
    // nlohmann quotes the whole token read so far, which can be a megabyte-long string.
    message = printable(message);
    if (message.size() > 240) message = message.substr(0, 237) + "...";
    return fail("", "malformed JSON: " + message);
  }

  [[nodiscard]] bool failed() const { return !error_.empty(); }
  [[nodiscard]] const std::string& error_pointer() const { return error_pointer_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    std::string pointer;
    std::string key;  // pending key when value is an object
  };

  std::string pointer() const {
    if (stack_.empty()) return "";
    const Frame& top = stack_.back();
    return top.value->is_object() ? pointer_append(top.pointer, top.key)
                                  : pointer_append(top.pointer, top.value->size());
  }

  // Stores a value at the current position and returns where it landed.
  json* place(json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_object()) {
      auto [it, inserted] =
          top.value->get_ref<json::object_t&>().emplace(top.key, std::move(value));
      return &it->second;
    }
    auto& array = top.value->get_ref<json::array_t&>();
    array.push_back(std::move(value));
    return &array.back();
  }

  // Counts a value against the bound (kMaxJsonValues), which bounds the document's memory.
  bool count() {
    if (++values_ <= max_values_) return true;
    return fail("", "too large: more than " + std::to_string(max_values_) + " JSON values");
  }

  bool put(json&& value) {
    if (!count()) return false;
    place(std::move(value));
    return true;
  }

  bool open(json&& container) {
    if (!count()) return false;
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
      return fail(pointer(), "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    std::string where = pointer();
    json* slot = place(std::move(container));
    stack_.push_back(Frame{slot, std::move(where), {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  bool fail(std::string where, std::string message) {
    if (error_.empty()) {
      error_pointer_ = std::move(where);
      error_ = std::move(message);
    }
    return false;
  }

  json& root_;
  std::vector<Frame> stack_;
  std::size_t max_values_;
  std::size_t values_ = 0;
  std::string error_pointer_;
  std::string error_;
};

// A JSON pointer as shown in messages: printable, and cut when absurdly long (a key can be
// megabytes of arbitrary text).
std::string display_pointer(const std::string& pointer) {
  constexpr std::size_t kMaxShown = 320;
  std::string shown = printable(pointer);
  if (shown.size() > kMaxShown) shown = shown.substr(0, kMaxShown - 3) + "...";
  return shown;
}

std::string format_number(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  // Prefer the shortest representation that round-trips.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[40];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buf;
}

// Levenshtein distance, for "did you mean" hints on unknown keys. O(|a| |b|).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string_view nearest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string printable_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(c));
    out += buf;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\r') {
      out += ' ';
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      escape(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, no
    // overlong forms, surrogates or values beyond U+10FFFF (RFC 3629).
    std::size_t length = c >= 0xC2 && c <= 0xDF   ? 2
                         : c >= 0xE0 && c <= 0xEF ? 3
                         : c >= 0xF0 && c <= 0xF4 ? 4
                                                  : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (valid && length >= 3) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      valid = !(c == 0xE0 && second < 0xA0) && !(c == 0xED && second > 0x9F) &&
              !(c == 0xF0 && second < 0x90) && !(c == 0xF4 && second > 0x8F);
    }
    if (!valid) {
      escape(c);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

Document parse_json(const Source& source) { return parse_json(source, kMaxJsonValues); }

Document parse_json(const Source& source, std::size_t max_values) {
  Document document{source.name, nullptr};
  std::string_view text = source.text;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  // nlohmann's lexer would skip a second mark as well; only the first is the file's.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    throw InputError(source.name, "",
                     "malformed JSON: at line 1, column 4: a second byte-order mark (only one may "
                     "start the file)");
  }
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore what follows.
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    std::size_t line_start = text.rfind('\n', nul);
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw InputError(source.name, "",
                     "malformed JSON: at line " + std::to_string(line) + ", column " +
                         std::to_string(nul - line_start + 1) + ": NUL byte");
  }
  StrictSaxBuilder builder(document.root, max_values);
  bool ok = json::sax_parse(text, &builder, json::input_format_t::json, /*strict=*/true,
                            /*ignore_comments=*/false);
  if (!ok || builder.failed()) {
    throw InputError(source.name, display_pointer(builder.error_pointer()),
                     builder.failed() ? builder.error() : "malformed JSON");
  }
  return document;
}

std::string pointer_append(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string pointer_append(const std::string& pointer, std::size_t index) {
  return pointer + "/" + std::to_string(index);
}

std::string quote_for_message(std::string_view text) {
  std::string quoted = "\"" + printable(text) + "\"";
  if (quoted.size() > 40) quoted = quoted.substr(0, 36) + "...\"";
  return quoted;
}

std::string describe_value(const json& value) {
  std::string text;
  if (value.is_string()) return quote_for_message(value.get_ref<const std::string&>());
  if (value.is_number_float()) {
    text = format_number(value.get<double>());
  } else if (value.is_object()) {
    text = "an object";
  } else if (value.is_array()) {
    text = "an array";
  } else {
    text = value.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  }
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return printable(text);
}

nlohmann::ordered_json json_number(double value) {
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (value == 0) return 0;                      // also folds -0.0
  if (std::floor(value) == value && std::fabs(value) < kExact) {
    return static_cast<std::int64_t>(value);
  }
  return value;
}

nlohmann::ordered_json json_array(std::vector<nlohmann::ordered_json> values) {
  return nlohmann::ordered_json(std::move(values));
}

std::string dump_json(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

namespace {

// `dumped` (dump_json's text, ending with a newline) appended to `text` without that last
// newline, every line after its first starting with `newline`. O(size).
void append_indented(std::string& text, const std::string& dumped, const char* newline) {
  const std::size_t last = dumped.size() - 1;
  std::size_t line = 0;
  for (std::size_t end = dumped.find('\n'); end < last; end = dumped.find('\n', line)) {
    text.append(dumped, line, end - line);
    text += newline;
    line = end + 1;
  }
  text.append(dumped, line, last - line);
}

// Whether dump_json writes `text` between quotes as it is: printable ASCII without a quote or
// a backslash (it escapes control characters, quotes and backslashes, and checks UTF-8 beyond
// ASCII). O(size).
bool verbatim(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; });
}

}  // namespace

void append_json_integer(std::string& text, std::int64_t value) { text += std::to_string(value); }

void append_json_number(std::string& text, double value) {
  if (!std::isfinite(value)) {
    text += "null";
    return;
  }
  // The serializer's own digits (serializer::dump_float: Grisu2 into a 64-byte buffer).
  std::array<char, 64> digits{};
  const char* end = nlohmann::detail::to_chars(digits.data(), digits.data() + digits.size(), value);
  text.append(digits.data(), static_cast<std::size_t>(end - digits.data()));
}

void append_json_string(std::string& text, std::string_view value) {
  if (!verbatim(value)) {
    append_indented(text, dump_json(nlohmann::ordered_json(std::string(value))), "");
    return;
  }
  text += '"';
  text += value;
  text += '"';
}

void append_json(std::string& text, const nlohmann::ordered_json& value, const char* newline) {
  using Type = nlohmann::ordered_json::value_t;
  switch (value.type()) {
    case Type::number_integer:
      append_json_integer(text, value.get<std::int64_t>());
      return;
    case Type::number_unsigned:
      text += std::to_string(value.get<std::uint64_t>());
      return;
    case Type::number_float:
      append_json_number(text, value.get<double>());
      return;
    case Type::string:
      append_json_string(text, value.get_ref<const std::string&>());
      return;
    case Type::boolean:
      text += value.get<bool>() ? "true" : "false";
      return;
    default:
      append_indented(text, dump_json(value), newline);
  }
}

namespace {

// The type and value of a wrong-typed value: `string "16"`, `boolean true`, `null`,
// `an object`.
std::string describe_typed(const json& value) {
  if (value.is_null() || value.is_object() || value.is_array()) return describe_value(value);
  return std::string(Node::type_name(value)) + " " + describe_value(value);
}

}  // namespace

void Node::fail(const std::string& message) const {
  throw InputError(document_->file, display_pointer(pointer_), message);
}

const char* Node::type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "number";
    default:
      return "binary";
  }
}

std::vector<Node> Node::elements() const {
  if (!value_->is_array()) fail(std::string("must be an array, got ") + type_name(*value_));
  std::vector<Node> out;
  out.reserve(value_->size());
  for (std::size_t i = 0; i < value_->size(); ++i) {
    out.emplace_back(*document_, (*value_)[i], pointer_append(pointer_, i));
  }
  return out;
}

std::string Node::as_string() const {
  if (!value_->is_string()) {
    fail(std::string("must be a string, got ") + describe_typed(*value_));
  }
  return value_->get<std::string>();
}

std::string Node::as_nonempty_string() const {
  std::string text = as_string();
  if (text.empty()) fail("must be a non-empty string");
  return text;
}

double Node::as_number() const {
  if (!value_->is_number()) {
    fail(std::string("must be a number, got ") + describe_typed(*value_));
  }
  return value_->get<double>();
}

double Node::as_nonnegative() const {
  if (!value_->is_number()) fail("must be a finite number >= 0, got " + describe_typed(*value_));
  double number = value_->get<double>();
  if (!(number >= 0) || !std::isfinite(number)) {
    fail("must be a finite number >= 0, got " + describe_value(*value_));
  }
  return number;
}

double Node::as_positive() const {
  if (!value_->is_number()) fail("must be a finite number > 0, got " + describe_typed(*value_));
  double number = value_->get<double>();
  if (!(number > 0) || !std::isfinite(number)) {
    fail("must be a finite number > 0, got " + describe_value(*value_));
  }
  return number;
}

std::int64_t Node::as_integer(std::int64_t min, std::int64_t max) const {
  std::string want = "must be an integer";
  if (max == std::numeric_limits<std::int64_t>::max()) {
    want += " >= " + std::to_string(min);
  } else {
    want += " from " + std::to_string(min) + " to " + std::to_string(max);
  }
  if (!value_->is_number()) {
    fail(want + ", got " + describe_typed(*value_));
  }
  if (value_->is_number_integer() && !value_->is_number_unsigned()) {
    auto number = value_->get<std::int64_t>();
    if (number < min || number > max) fail(want + ", got " + describe_value(*value_));
    return number;
  }
  if (value_->is_number_unsigned()) {
    auto number = value_->get<std::uint64_t>();
    if (number > static_cast<std::uint64_t>(max)) fail(want + ", got " + describe_value(*value_));
    auto signed_number = static_cast<std::int64_t>(number);
    if (signed_number < min) fail(want + ", got " + describe_value(*value_));
    return signed_number;
  }
  double number = value_->get<double>();
  // 2^63 is exactly representable; anything at or beyond it cannot be an int64.
  if (std::floor(number) != number || number < static_cast<double>(min) ||
      number >= 9223372036854775808.0 || number > static_cast<double>(max)) {
    fail(want + ", got " + describe_value(*value_));
  }
  return static_cast<std::int64_t>(number);
}

bool Node::as_bool() const {
  if (!value_->is_boolean()) {
    fail(std::string("must be true or false, got ") + describe_typed(*value_));
  }
  return value_->get<bool>();
}

ObjectReader::ObjectReader(const Node& node, std::initializer_list<std::string_view> known_keys)
    : node_(node) {
  if (!node.json().is_object()) {
    node.fail(std::string("must be an object, got ") + Node::type_name(node.json()));
  }
  for (const auto& [key, value] : node.json().items()) {
    if (key.rfind("x-", 0) == 0) continue;
    if (std::find(known_keys.begin(), known_keys.end(), key) != known_keys.end()) continue;
    std::string message = "unknown key";
    const std::string_view best =
        nearest(key, std::vector<std::string_view>(known_keys.begin(), known_keys.end()));
    if (!best.empty()) message += " (did you mean \"" + std::string(best) + "\"?)";
    Node(*node.document_ptr(), value, pointer_append(node.pointer(), key)).fail(message);
  }
}

Node ObjectReader::required(std::string_view key) const {
  auto member = optional(key);
  if (!member) node_.fail("missing required key \"" + std::string(key) + "\"");
  return *member;
}

std::optional<Node> ObjectReader::optional(std::string_view key) const {
  const auto& object = node_.json();
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  return Node(*node_.document_ptr(), *it, pointer_append(node_.pointer(), key));
}

}  // namespace pipeplan::io
