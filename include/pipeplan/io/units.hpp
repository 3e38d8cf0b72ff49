#pragma once
/// \file
/// Quantities with units in topology files (spec section 2): bandwidths, latencies and
/// memory sizes, given as plain JSON numbers in base SI units or as strings such as
/// `"25 GB/s"`, `"2 us"`, `"32 GiB"`.

#include <string>
#include <string_view>

#include "pipeplan/io/json.hpp"

namespace pipeplan::io {

/// What a quantity measures; it decides the accepted units and the base unit.
enum class QuantityKind {
  kBandwidth,  ///< Bytes per second.
  kLatency,    ///< Seconds.
  kMemory,     ///< Bytes.
};

/// The accepted unit strings of a kind, space-separated, for messages.
std::string accepted_units(QuantityKind kind);

/// Parses `"<unsigned decimal number>[spaces]<unit>"` into base SI units (bytes per second,
/// seconds, bytes). Units are case-sensitive (`Gb/s` is bits, `GB/s` bytes). Throws
/// `std::invalid_argument` with a message that lists the accepted units.
double parse_quantity(std::string_view text, QuantityKind kind);

/// Reads a quantity at `node`: a finite JSON number in base SI units, or a string parsed by
/// `parse_quantity`. The value is only checked to be finite and >= 0; callers check `> 0`
/// where the spec asks for it. Throws `InputError` with the node's pointer.
double read_quantity(const Node& node, QuantityKind kind);

}  // namespace pipeplan::io
