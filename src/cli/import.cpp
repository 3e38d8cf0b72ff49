// `pipeplan import pipedream GRAPH --batch-size N [--micro-batches M] [--name NAME] [-o MODEL]`:
// convert another tool's profile into model.json.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "commands.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/pipedream_import.hpp"
#include "pipeplan/report/input_summary.hpp"

namespace pipeplan::cli {
namespace {

struct ImportPipedreamOptions {
  std::string graph;
  std::int64_t batch_size = 0;
  std::int64_t micro_batches_value = 0;
  std::optional<std::int64_t> micro_batches;  // set from micro_batches_value when given
  std::string name;
  std::string output;  // empty: standard output
};

int run_import_pipedream(const ImportPipedreamOptions& options, Context& context) {
  context.declare(
      {{"GRAPH", options.graph}},
      {{"-o", options.output.empty() ? std::nullopt : std::optional<std::string>(options.output)}});
  const io::Source source = context.read("GRAPH");
  model::Model model = model::import_pipedream(source, options.batch_size, options.micro_batches);
  if (!options.name.empty()) model.name = options.name;
  context.emit("-o", io::dump_json(model::model_to_json(model)));
  context.commit();

  std::string line =
      report::import_summary(source.name, model, options.batch_size, options.micro_batches);
  if (!options.output.empty() && options.output != "-") line += " -> " + options.output;
  context.say(line);
  return 0;
}

}  // namespace

void add_import_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("import", "Convert another tool's profile into model.json");
  sub->require_subcommand(1);

  auto options = std::make_shared<ImportPipedreamOptions>();
  CLI::App* pipedream = sub->add_subcommand(
      "pipedream", "Convert a PipeDream or DAPPLE graph.txt (a layer DAG) into model.json");
  // CLI11's own range messages print the bounds as huge doubles, and its integer conversion
  // clamps values that overflow and reads 0x10 as 16; decimal_integer accepts exactly the
  // decimal integers 1 .. 2^63-1 and 1 .. model::kMaxMicroBatches (so that the model written
  // is one pipeplan reads back).
  const auto positive = decimal_integer(1, std::numeric_limits<std::int64_t>::max());
  const auto nonempty = [](const std::string& value) {
    return value.empty() ? std::string("must not be empty") : std::string();
  };
  pipedream->add_option("GRAPH", options->graph, "PipeDream graph.txt (- for standard input)")
      ->required();
  pipedream
      ->add_option("--batch-size", options->batch_size,
                   "Samples in the profiled minibatch (recorded as profile.batch_size); the "
                   "profiled times and sizes are taken as those of one micro-batch")
      ->required()
      ->transform(positive);
  CLI::Option* micro_batches =
      pipedream
          ->add_option("--micro-batches", options->micro_batches_value,
                       "Micro-batches per iteration, written into the model")
          ->transform(decimal_integer(1, model::kMaxMicroBatches));
  pipedream
      ->add_option("--name", options->name, "Model name (default: the file name without extension)")
      ->check(nonempty, "NONEMPTY");
  pipedream
      ->add_option("-o,--output", options->output,
                   "Write model.json here (atomically) instead of standard output")
      ->check(output_path, "FILE");
  pipedream->callback([options, micro_batches, &action] {
    if (micro_batches->count() > 0) options->micro_batches = options->micro_batches_value;
    action = [options](Context& context) { return run_import_pipedream(*options, context); };
  });
}

}  // namespace pipeplan::cli
