#pragma once
// For the fuzz targets: the fixed model and topology of tests/fuzz/fixtures, read once.

#include <fstream>
#include <sstream>
#include <string>

#include "fuzz_support.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::fuzz {

/// The text of `tests/fuzz/fixtures/<name>`; aborts when it cannot be read.
inline io::Source fixture(const std::string& name) {
  const std::string path = std::string(PIPEPLAN_FUZZ_FIXTURES) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) bug("cannot read the fixture " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return io::source_from_text(name, text.str());
}

/// The fixture model (4 layers, 16 GB GPUs nearly full) and topology (5 GPUs on 3 nodes).
struct Fixtures {
  model::Model model = model::read_model(fixture("model.json"));
  topology::Topology topology = topology::read_topology(fixture("topo.json"));
};

/// Read on first use.
inline const Fixtures& fixtures() {
  static const Fixtures instance;
  return instance;
}

}  // namespace pipeplan::fuzz
