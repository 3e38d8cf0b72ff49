#pragma once
/// \file
/// Human-readable formatting of quantities for summaries and messages: below every module
/// that writes a message (simulate, schedule, planners) as well as the reports.

#include <cstdint>
#include <string>
#include <vector>

namespace pipeplan::io {

/// Bytes with a binary prefix: `512 B`, `1.5 KiB`, `32 GiB`.
std::string format_bytes(double bytes);
/// Bytes per second with a decimal prefix: `25 GB/s`, `12.5 Gbit/s` is never used.
std::string format_bandwidth(double bytes_per_s);
/// Milliseconds with sensible precision: `0.0125 ms`, `9.1 ms`, `412.7 ms`, `12.3 s`.
std::string format_ms(double ms);
/// A number with up to `significant` significant digits, trailing zeros removed.
std::string format_number(double value, int significant = 4);
/// A count and its noun: `1 layer`, `2 layers`. O(1).
std::string format_count(std::int64_t count, const std::string& one, const std::string& many);
/// `items` joined by `separator`: `a, b, c`. O(total length).
std::string format_list(const std::vector<std::string>& items, const std::string& separator = ", ");
/// `items` as alternatives in prose: `a, b or c`. O(total length).
std::string format_choices(const std::vector<std::string>& items);

}  // namespace pipeplan::io
