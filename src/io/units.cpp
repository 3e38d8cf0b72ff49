// Quantity strings with units. O(length of the string).

#include "pipeplan/io/units.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace pipeplan::io {
namespace {

struct Unit {
  std::string_view name;
  double factor;  // to the base SI unit
};

constexpr double kKilo = 1e3, kMega = 1e6, kGiga = 1e9, kTera = 1e12;
constexpr double kKibi = 1024.0, kMebi = kKibi * 1024, kGibi = kMebi * 1024, kTebi = kGibi * 1024;

// Bit rates are divided by 8 to give bytes per second.
constexpr std::array kBandwidthUnits = {
    Unit{"B/s", 1},
    Unit{"kB/s", kKilo},
    Unit{"MB/s", kMega},
    Unit{"GB/s", kGiga},
    Unit{"TB/s", kTera},
    Unit{"KiB/s", kKibi},
    Unit{"MiB/s", kMebi},
    Unit{"GiB/s", kGibi},
    Unit{"bit/s", 1.0 / 8},
    Unit{"kbit/s", kKilo / 8},
    Unit{"Mbit/s", kMega / 8},
    Unit{"Gbit/s", kGiga / 8},
    Unit{"Tbit/s", kTera / 8},
    Unit{"b/s", 1.0 / 8},
    Unit{"kb/s", kKilo / 8},
    Unit{"Mb/s", kMega / 8},
    Unit{"Gb/s", kGiga / 8},
    Unit{"Tb/s", kTera / 8},
    Unit{"bps", 1.0 / 8},
    Unit{"kbps", kKilo / 8},
    Unit{"Mbps", kMega / 8},
    Unit{"Gbps", kGiga / 8},
    Unit{"Tbps", kTera / 8},
};
constexpr std::array kLatencyUnits = {
    Unit{"s", 1},
    Unit{"ms", 1e-3},
    Unit{"us", 1e-6},
    Unit{"\xC2\xB5s", 1e-6},  // µs (micro sign)
    Unit{"\xCE\xBCs", 1e-6},  // μs (Greek mu)
    Unit{"ns", 1e-9},
};
constexpr std::array kMemoryUnits = {
    Unit{"B", 1},       Unit{"kB", kKilo},  Unit{"MB", kMega},
    Unit{"GB", kGiga},  Unit{"TB", kTera},  Unit{"KiB", kKibi},
    Unit{"MiB", kMebi}, Unit{"GiB", kGibi}, Unit{"TiB", kTebi},
};

template <std::size_t N>
std::string join(const std::array<Unit, N>& units) {
  std::string out;
  for (const auto& unit : units) {
    if (!out.empty()) out += ' ';
    out += unit.name;
  }
  return out;
}

template <std::size_t N>
const Unit* find_unit(const std::array<Unit, N>& units, std::string_view name) {
  for (const auto& unit : units) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

const char* kind_name(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::kBandwidth:
      return "bandwidth";
    case QuantityKind::kLatency:
      return "latency";
    case QuantityKind::kMemory:
      return "memory";
  }
  return "quantity";
}

const char* kind_example(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::kBandwidth:
      return "\"25 GB/s\"";
    case QuantityKind::kLatency:
      return "\"2 us\"";
    case QuantityKind::kMemory:
      return "\"32 GiB\"";
  }
  return "";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::string accepted_units(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::kBandwidth:
      return join(kBandwidthUnits);
    case QuantityKind::kLatency:
      return join(kLatencyUnits);
    case QuantityKind::kMemory:
      return join(kMemoryUnits);
  }
  return "";
}

double parse_quantity(std::string_view text, QuantityKind kind) {
  const std::string quoted = quote_for_message(text);
  const std::string expected = std::string("expected a number and a ") + kind_name(kind) +
                               " unit such as " + kind_example(kind);
  // Number: digits [ '.' digits ] | '.' digits, then an optional exponent.
  std::size_t pos = 0;
  std::size_t digits = 0;
  while (pos < text.size() && is_digit(text[pos])) ++pos, ++digits;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos, ++digits;
  }
  if (digits == 0) throw std::invalid_argument("not a quantity: " + quoted + "; " + expected);
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    std::size_t exponent = pos + 1;
    if (exponent < text.size() && (text[exponent] == '+' || text[exponent] == '-')) ++exponent;
    if (exponent < text.size() && is_digit(text[exponent])) {
      pos = exponent;
      while (pos < text.size() && is_digit(text[pos])) ++pos;
    }
  }
  std::string number(text.substr(0, pos));
  while (pos < text.size() && text[pos] == ' ') ++pos;
  std::string_view unit_name = text.substr(pos);
  const std::string accepted = "accepted: " + accepted_units(kind);
  if (unit_name.empty()) {
    throw std::invalid_argument(quoted + " has no unit; " + accepted);
  }
  const Unit* unit = nullptr;
  switch (kind) {
    case QuantityKind::kBandwidth:
      unit = find_unit(kBandwidthUnits, unit_name);
      break;
    case QuantityKind::kLatency:
      unit = find_unit(kLatencyUnits, unit_name);
      break;
    case QuantityKind::kMemory:
      unit = find_unit(kMemoryUnits, unit_name);
      break;
  }
  if (unit == nullptr) {
    throw std::invalid_argument(std::string("unknown ") + kind_name(kind) + " unit in " + quoted +
                                "; " + accepted);
  }
  double value = std::strtod(number.c_str(), nullptr) * unit->factor;
  if (!std::isfinite(value)) throw std::invalid_argument(quoted + " is out of range");
  return value;
}

double read_quantity(const Node& node, QuantityKind kind) {
  const auto& value = node.json();
  if (value.is_number()) {
    double number = value.get<double>();
    if (!std::isfinite(number) || number < 0) {
      node.fail(std::string("must be a ") + kind_name(kind) + " >= 0, got " +
                describe_value(value));
    }
    return number;
  }
  if (!value.is_string()) {
    // null, objects and arrays describe themselves; the others need their type.
    std::string got = value.is_null() || value.is_object() || value.is_array()
                          ? describe_value(value)
                          : std::string(Node::type_name(value)) + " " + describe_value(value);
    node.fail(std::string("must be a number or a string with a unit such as ") +
              kind_example(kind) + ", got " + got);
  }
  try {
    return parse_quantity(value.get<std::string>(), kind);
  } catch (const std::invalid_argument& error) {
    node.fail(error.what());
  }
}

}  // namespace pipeplan::io
