// Human-readable quantities.

#include "pipeplan/io/format.hpp"

#include <cmath>
#include <cstdio>

namespace pipeplan::io {

std::string format_number(double value, int significant) {
  char buffer[64];
  if (std::fabs(value) >= 1e15 || (value != 0 && std::fabs(value) < 1e-6)) {
    std::snprintf(buffer, sizeof buffer, "%.*g", significant, value);
    return buffer;
  }
  // Fixed notation with `significant` significant digits (at least the integer part).
  int integer_digits =
      value == 0 ? 1 : static_cast<int>(std::floor(std::log10(std::fabs(value)))) + 1;
  int decimals = std::max(0, significant - integer_digits);
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  return format_number(bytes, unit == 0 ? 15 : 4) + " " + kUnits[unit];
}

std::string format_bandwidth(double bytes_per_s) {
  static const char* const kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  int unit = 0;
  while (std::fabs(bytes_per_s) >= 1000 && unit < 5) {
    bytes_per_s /= 1000;
    ++unit;
  }
  return format_number(bytes_per_s, 4) + " " + kUnits[unit];
}

std::string format_ms(double ms) {
  if (std::fabs(ms) >= 10000) return format_number(ms / 1000, 4) + " s";
  return format_number(ms, 4) + " ms";
}

namespace {

std::string joined(const std::vector<std::string>& items, const std::string& separator,
                   const std::string& last) {
  std::string out;
  for (std::size_t x = 0; x < items.size(); ++x) {
    if (x > 0) out += x + 1 == items.size() ? last : separator;
    out += items[x];
  }
  return out;
}

}  // namespace

std::string format_count(std::int64_t count, const std::string& one, const std::string& many) {
  std::string text = std::to_string(count);
  text += ' ';
  text += count == 1 ? one : many;
  return text;
}

std::string format_list(const std::vector<std::string>& items, const std::string& separator) {
  return joined(items, separator, separator);
}

std::string format_choices(const std::vector<std::string>& items) {
  return joined(items, ", ", " or ");
}

}  // namespace pipeplan::io
