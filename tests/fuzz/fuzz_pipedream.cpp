// libFuzzer target: model::import_pipedream on arbitrary bytes (a PipeDream graph.txt).
//
// Bugs: any failure but an input error (exit 3); an imported model that is not a chain in
// topological order of the graph, or that pipeplan's own model reader refuses once written
// (`pipeplan import pipedream -o model.json` must always give a file pipeplan reads).

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/pipedream_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const io::Source source = io::source_from_text("graph.txt", fuzz::text_of(data, size));
  model::Model model;
  const bool read = fuzz::expect_only(
      {ExitCode::kInvalidInput}, [&] { model = model::import_pipedream(source, 1, std::nullopt); });
  if (!read) return 0;

  // The order: every edge goes forward, every node appears once.
  const model::PipedreamGraph graph = model::parse_pipedream_graph(source);
  if (graph.nodes.size() != model.layers.size()) fuzz::bug("layer count differs from node count");
  const std::vector<std::size_t> order = model::pipedream_topological_order(graph);
  std::vector<std::size_t> position(graph.nodes.size());
  for (std::size_t p = 0; p < order.size(); ++p) {
    position[order[p]] = p;
    if (model.layers[p].name != graph.nodes[order[p]].id) fuzz::bug("layer names out of order");
  }
  for (const model::PipedreamEdge& edge : graph.edges) {
    if (position[edge.from] >= position[edge.to]) fuzz::bug("an edge goes backwards");
  }
  if (model.layers.back().activation_bytes != 0) fuzz::bug("the last layer has a cut");

  const std::string written = io::dump_json(model::model_to_json(model));
  fuzz::expect_only({},
                    [&] { (void)model::read_model(io::source_from_text("model.json", written)); });
  return 0;
}
