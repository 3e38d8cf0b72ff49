// pipeplan_generate: writes the seeded synthetic inputs of the benchmarks as files, for
// end-to-end measurements of `pipeplan plan` (docs/performance.md).
//   pipeplan_generate model LAYERS [MICRO_BATCHES] > model.json
//   pipeplan_generate mixed-model LAYERS [MICRO_BATCHES [PARAMETER_SCALE]] > model.json
//   pipeplan_generate cluster NODES GPUS_PER_NODE > topo.json

#include <iostream>
#include <string>

#include "pipeplan/io/json.hpp"
#include "synthetic.hpp"

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "model" && argc >= 3) {
    pipeplan::model::Model model = pipeplan::bench::synthetic_model(std::stoi(argv[2]));
    if (argc >= 4) model.micro_batches = std::stoi(argv[3]);
    std::cout << pipeplan::io::dump_json(pipeplan::model::model_to_json(model));
    return 0;
  }
  if (what == "mixed-model" && argc >= 3) {
    pipeplan::model::Model model =
        pipeplan::bench::mixed_model(std::stoi(argv[2]), 1, argc >= 5 ? std::stod(argv[4]) : 1.0);
    if (argc >= 4) model.micro_batches = std::stoi(argv[3]);
    std::cout << pipeplan::io::dump_json(pipeplan::model::model_to_json(model));
    return 0;
  }
  if (what == "cluster" && argc >= 4) {
    nlohmann::ordered_json topo = {{"schema", "pipeplan/topology/v1"},
                                   {"name", std::string("synthetic ") + argv[2] + "x" + argv[3]},
                                   {"nodes",
                                    {{{"name", "node"},
                                      {"count", std::stoi(argv[2])},
                                      {"gpus", std::stoi(argv[3])},
                                      {"memory", argc >= 5 ? argv[4] : "80 GiB"},
                                      {"link", {{"bandwidth", "150 GB/s"}, {"latency", "2 us"}}}}}},
                                   {"network", {{"bandwidth", "25 GB/s"}, {"latency", "5 us"}}}};
    std::cout << pipeplan::io::dump_json(topo);
    return 0;
  }
  std::cerr << "usage: pipeplan_generate model LAYERS [MICRO_BATCHES] | mixed-model LAYERS "
               "[MICRO_BATCHES "
               "[PARAMETER_SCALE]] | cluster NODES GPUS_PER_NODE [MEMORY]\n";
  return 2;
}
