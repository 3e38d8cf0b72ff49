#pragma once
/// \file
/// Strict JSON input: parsing that rejects duplicate keys and absurd nesting, and small
/// readers that check types, ranges and unknown keys while tracking the JSON pointer of
/// every value, so that every input error names its file and pointer (spec section 7).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/io/files.hpp"

namespace pipeplan::io {

/// Deepest nesting of arrays and objects accepted in an input document.
inline constexpr int kMaxJsonDepth = 128;

/// Most values (numbers, strings, literals, arrays and objects, each counted once) in an input
/// document: 2^25. A parsed value takes 16 to about 100 bytes, so this bounds a document's
/// memory to a few GiB whatever its shape; the largest plan the planners may write
/// (`planners::kMaxPlanTasks` tasks of at most 9 values each) stays below it.
inline constexpr std::size_t kMaxJsonValues = std::size_t{1} << 25;

/// A parsed JSON document and the name of the file it came from.
struct Document {
  std::string file;     ///< Display name used in messages (the path as given, or `<stdin>`).
  nlohmann::json root;  ///< The parsed value.
};

/// Parses `source` as strict JSON: a leading UTF-8 byte-order mark is skipped; malformed text,
/// invalid UTF-8, duplicate object keys, numbers out of range, nesting deeper than
/// `kMaxJsonDepth` and more than `kMaxJsonValues` values throw `InputError` naming the file
/// (and the pointer, where one exists).
Document parse_json(const Source& source);

/// `parse_json` with another bound on the number of values (tests use small ones).
Document parse_json(const Source& source, std::size_t max_values);

/// Appends `key` to a JSON pointer, escaping `~` and `/` (RFC 6901).
std::string pointer_append(const std::string& pointer, std::string_view key);
/// Appends an array index to a JSON pointer.
std::string pointer_append(const std::string& pointer, std::size_t index);

/// A JSON number for output: an integer when `value` is integral and exactly representable
/// (so byte counts print as `125018112`, not `125018112.0`), else the double, which
/// nlohmann prints in its shortest round-tripping form.
nlohmann::ordered_json json_number(double value);

/// An output array holding `values`, built in one step. With `JSON_DIAGNOSTICS`, every
/// `push_back` on an `ordered_json` array re-links all its elements to their parent, so an
/// array built element by element costs O(n^2); this costs O(n).
nlohmann::ordered_json json_array(std::vector<nlohmann::ordered_json> values);

/// Serialises output JSON deterministically: `indent` spaces (or one line for -1), a final
/// newline, invalid UTF-8 replaced.
std::string dump_json(const nlohmann::ordered_json& value, int indent = 2);

/// `dump_json(value)` appended to `text` without its final newline, every line after the first
/// starting with `newline` (a value inside a larger document): the same bytes, with integers,
/// finite numbers, booleans and plain ASCII strings written directly, without a serializer.
/// O(size).
void append_json(std::string& text, const nlohmann::ordered_json& value, const char* newline);
/// `append_json` of an integer, a double (`null` when not finite) or a string, without making
/// its JSON value: the same bytes.
void append_json_integer(std::string& text, std::int64_t value);
void append_json_number(std::string& text, double value);
void append_json_string(std::string& text, std::string_view value);

/// `text` in double quotes, non-printable bytes escaped, cut to about 40 bytes.
std::string quote_for_message(std::string_view text);

/// `text` as one printable line for a message: line ends become spaces; every other control
/// byte, DEL and every byte that is not part of valid UTF-8 is written `\xNN` (so an ESC in a
/// file name cannot drive the terminal); valid UTF-8 is kept.
std::string printable_line(std::string_view text);

/// The candidate closest to `word` in edit distance when it is plausibly a typo (distance at
/// most 2), else empty: the "did you mean" of unknown keys and commands.
std::string_view nearest(std::string_view word, const std::vector<std::string_view>& candidates);

/// A compact, printable rendering of a JSON value for error messages (at most ~40 bytes).
std::string describe_value(const nlohmann::json& value);

/// One value inside a document together with its JSON pointer. Every accessor either
/// returns a value that satisfies its stated condition or throws `InputError`
/// `file: pointer: message`.
class Node {
 public:
  Node(const Document& document, const nlohmann::json& value, std::string pointer)
      : document_(&document), value_(&value), pointer_(std::move(pointer)) {}

  /// The raw value.
  [[nodiscard]] const nlohmann::json& json() const { return *value_; }
  /// The JSON pointer of this value (empty for the root).
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  /// The display name of the file.
  [[nodiscard]] const std::string& file() const { return document_->file; }
  /// The document this value belongs to.
  [[nodiscard]] const Document* document_ptr() const { return document_; }

  /// Throws `InputError` `file: pointer: message`.
  [[noreturn]] void fail(const std::string& message) const;

  /// Requires an array and returns its elements as nodes.
  [[nodiscard]] std::vector<Node> elements() const;
  /// Requires a string.
  [[nodiscard]] std::string as_string() const;
  /// Requires a non-empty string.
  [[nodiscard]] std::string as_nonempty_string() const;
  /// Requires a finite JSON number.
  [[nodiscard]] double as_number() const;
  /// Requires a finite JSON number >= 0.
  [[nodiscard]] double as_nonnegative() const;
  /// Requires a finite JSON number > 0.
  [[nodiscard]] double as_positive() const;
  /// Requires a JSON number with an integral value in [min, max] (`16.0` is accepted).
  [[nodiscard]] std::int64_t as_integer(std::int64_t min, std::int64_t max) const;
  /// Requires `true` or `false`.
  [[nodiscard]] bool as_bool() const;

  /// The JSON type name used in messages: object, array, string, number, boolean, null.
  [[nodiscard]] static const char* type_name(const nlohmann::json& value);

 private:
  const Document* document_;
  const nlohmann::json* value_;
  std::string pointer_;
};

/// Reads the members of one JSON object whose keys are known in advance. Construction
/// rejects the first key (in byte order of the keys) that is not known, except keys starting
/// with `x-`, which every pipeplan input may carry; so a typo is reported as an unknown key
/// (with a "did you mean" hint) before it can cause a missing-key error.
class ObjectReader {
 public:
  /// Requires `node` to be an object whose keys are all in `known_keys` or start with `x-`.
  ObjectReader(const Node& node, std::initializer_list<std::string_view> known_keys);

  /// The member `key`, or a `missing required key` error on the object.
  [[nodiscard]] Node required(std::string_view key) const;
  /// The member `key` if present.
  [[nodiscard]] std::optional<Node> optional(std::string_view key) const;
  /// The object itself.
  [[nodiscard]] const Node& node() const { return node_; }

 private:
  Node node_;
};

}  // namespace pipeplan::io
