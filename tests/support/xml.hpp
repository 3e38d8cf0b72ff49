#pragma once
// A small, strict XML well-formedness checker and tree for tests of the SVG export: an
// optional XML declaration, comments, elements with quoted attributes (no duplicates), text
// and the predefined and numeric entity references; anything else throws.

#include <cctype>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan::testing {

/// One element: its name, attributes, direct text (entities decoded) and children.
struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;
  std::vector<XmlElement> children;

  /// The attribute `key`, or "" when absent.
  [[nodiscard]] std::string attribute(const std::string& key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? std::string() : it->second;
  }
  /// Every element of the subtree (this one included) for which `keep` holds, in document order.
  void collect(const std::function<bool(const XmlElement&)>& keep,
               std::vector<const XmlElement*>& out) const {
    if (keep(*this)) out.push_back(this);
    for (const XmlElement& child : children) child.collect(keep, out);
  }
  /// The elements named `element` whose class is `css_class` (any class when empty).
  [[nodiscard]] std::vector<const XmlElement*> find(const std::string& element,
                                                    const std::string& css_class = {}) const {
    std::vector<const XmlElement*> out;
    collect(
        [&](const XmlElement& e) {
          return e.name == element && (css_class.empty() || e.attribute("class") == css_class);
        },
        out);
    return out;
  }
};

/// Parses `text` as a well-formed XML document and returns its root element. Throws
/// `std::runtime_error` naming the byte offset of the first problem.
class XmlParser {
 public:
  explicit XmlParser(std::string_view text) : text_(text) {}

  XmlElement document() {
    if (starts("<?xml")) skip_past("?>");
    skip_misc();
    XmlElement root = element();
    skip_misc();
    if (at_ < text_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("XML: " + what + " at offset " + std::to_string(at_));
  }
  [[nodiscard]] bool starts(std::string_view prefix) const {
    return text_.substr(at_, prefix.size()) == prefix;
  }
  void skip_past(std::string_view end) {
    const auto found = text_.find(end, at_);
    if (found == std::string_view::npos) fail("unterminated construct");
    at_ = found + end.size();
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        skip_past("-->");
      } else {
        return;
      }
    }
  }
  static bool name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  }
  static bool name_char(char c) {
    return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  }
  std::string name() {
    if (at_ >= text_.size() || !name_start(text_[at_])) fail("expected a name");
    const std::size_t begin = at_;
    while (at_ < text_.size() && name_char(text_[at_])) ++at_;
    return std::string(text_.substr(begin, at_ - begin));
  }
  static void append_utf8(std::string& out, unsigned long code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }
  // Decodes text up to (not including) `stop`, checking entity references.
  std::string decoded(char stop) {
    std::string out;
    while (at_ < text_.size() && text_[at_] != stop) {
      const char c = text_[at_];
      if (c == '<') fail("'<' inside text or an attribute value");
      if (c != '&') {
        out += c;
        ++at_;
        continue;
      }
      const auto end = text_.find(';', at_);
      if (end == std::string_view::npos || end - at_ > 10) fail("bad entity reference");
      const std::string_view entity = text_.substr(at_ + 1, end - at_ - 1);
      if (entity == "amp") {
        out += '&';
      } else if (entity == "lt") {
        out += '<';
      } else if (entity == "gt") {
        out += '>';
      } else if (entity == "quot") {
        out += '"';
      } else if (entity == "apos") {
        out += '\'';
      } else if (entity.size() > 1 && entity[0] == '#') {
        const bool hex = entity[1] == 'x';
        const std::string digits(entity.substr(hex ? 2 : 1));
        if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF"
                                                           : "0123456789") != std::string::npos) {
          fail("bad character reference");
        }
        append_utf8(out, std::stoul(digits, nullptr, hex ? 16 : 10));
      } else {
        fail("unknown entity &" + std::string(entity) + ";");
      }
      at_ = end + 1;
    }
    return out;
  }
  XmlElement element() {
    if (!starts("<")) fail("expected an element");
    ++at_;
    XmlElement out;
    out.name = name();
    for (;;) {
      const std::size_t before = at_;
      skip_space();
      if (starts("/>")) {
        at_ += 2;
        return out;
      }
      if (starts(">")) {
        ++at_;
        break;
      }
      if (at_ == before) fail("expected whitespace before an attribute");
      std::string key = name();
      skip_space();
      if (!starts("=")) fail("expected '=' after attribute " + key);
      ++at_;
      skip_space();
      if (at_ >= text_.size() || (text_[at_] != '"' && text_[at_] != '\'')) {
        fail("expected a quoted value");
      }
      const char quote = text_[at_++];
      std::string value = decoded(quote);
      if (at_ >= text_.size()) fail("unterminated attribute value");
      ++at_;
      if (!out.attributes.emplace(key, value).second) fail("duplicate attribute " + key);
    }
    for (;;) {
      if (at_ >= text_.size()) fail("element <" + out.name + "> is not closed");
      if (starts("</")) {
        at_ += 2;
        const std::string closing = name();
        if (closing != out.name) fail("</" + closing + "> closes <" + out.name + ">");
        skip_space();
        if (!starts(">")) fail("expected '>'");
        ++at_;
        return out;
      }
      if (starts("<!--")) {
        skip_past("-->");
      } else if (starts("<")) {
        out.children.push_back(element());
      } else {
        out.text += decoded('<');
      }
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

/// Parses a whole XML document; see `XmlParser`.
inline XmlElement parse_xml(std::string_view text) { return XmlParser(text).document(); }

}  // namespace pipeplan::testing
