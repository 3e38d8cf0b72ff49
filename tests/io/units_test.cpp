#include "pipeplan/io/units.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pipeplan::io {
namespace {

struct UnitCase {
  const char* text;
  QuantityKind kind;
  double expected;
};

TEST(UnitsTest, ParsesEveryUnit) {
  const UnitCase cases[] = {
      {"25 GB/s", QuantityKind::kBandwidth, 25e9},
      {"25GB/s", QuantityKind::kBandwidth, 25e9},
      {"100 Gbit/s", QuantityKind::kBandwidth, 12.5e9},
      {"100 Gb/s", QuantityKind::kBandwidth, 12.5e9},  // bits, not bytes
      {"100 Gbps", QuantityKind::kBandwidth, 12.5e9},
      {"8 bit/s", QuantityKind::kBandwidth, 1},
      {"8 b/s", QuantityKind::kBandwidth, 1},
      {"8 bps", QuantityKind::kBandwidth, 1},
      {"1 kB/s", QuantityKind::kBandwidth, 1e3},
      {"1 KiB/s", QuantityKind::kBandwidth, 1024},
      {"1 MiB/s", QuantityKind::kBandwidth, 1048576},
      {"1 GiB/s", QuantityKind::kBandwidth, 1073741824},
      {"1 TB/s", QuantityKind::kBandwidth, 1e12},
      {"1.5e3 MB/s", QuantityKind::kBandwidth, 1.5e9},
      {"1 Tbit/s", QuantityKind::kBandwidth, 1.25e11},
      {"2 us", QuantityKind::kLatency, 2e-6},
      {"2 \xC2\xB5s", QuantityKind::kLatency, 2e-6},
      {"2 \xCE\xBCs", QuantityKind::kLatency, 2e-6},
      {"10 ms", QuantityKind::kLatency, 1e-2},
      {"5 ns", QuantityKind::kLatency, 5e-9},
      {"0.5 s", QuantityKind::kLatency, 0.5},
      {"32 GiB", QuantityKind::kMemory, 34359738368.0},
      {"16 GB", QuantityKind::kMemory, 16e9},
      {"1 TiB", QuantityKind::kMemory, 1099511627776.0},
      {"512 B", QuantityKind::kMemory, 512},
      {".5 KiB", QuantityKind::kMemory, 512},
  };
  for (const auto& c : cases) {
    EXPECT_DOUBLE_EQ(parse_quantity(c.text, c.kind), c.expected) << c.text;
  }
}

std::string quantity_error(const char* text, QuantityKind kind) {
  try {
    parse_quantity(text, kind);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no error";
}

TEST(UnitsTest, RejectsCaseMistakesAndMissingUnits) {
  EXPECT_EQ(quantity_error("25 gb/s", QuantityKind::kBandwidth),
            "unknown bandwidth unit in \"25 gb/s\"; accepted: B/s kB/s MB/s GB/s TB/s KiB/s MiB/s "
            "GiB/s bit/s kbit/s Mbit/s Gbit/s Tbit/s b/s kb/s Mb/s Gb/s Tb/s bps kbps Mbps Gbps "
            "Tbps");
  EXPECT_EQ(quantity_error("100", QuantityKind::kMemory),
            "\"100\" has no unit; accepted: B kB MB GB TB KiB MiB GiB TiB");
  EXPECT_EQ(quantity_error("fast", QuantityKind::kBandwidth),
            "not a quantity: \"fast\"; expected a number and a bandwidth unit such as \"25 GB/s\"");
  EXPECT_EQ(quantity_error("-3 GB", QuantityKind::kMemory),
            "not a quantity: \"-3 GB\"; expected a number and a memory unit such as \"32 GiB\"");
  EXPECT_EQ(quantity_error("2 GB/s", QuantityKind::kMemory),
            "unknown memory unit in \"2 GB/s\"; accepted: B kB MB GB TB KiB MiB GiB TiB");
  EXPECT_EQ(quantity_error("1e400 GB", QuantityKind::kMemory), "\"1e400 GB\" is out of range");
}

}  // namespace
}  // namespace pipeplan::io
