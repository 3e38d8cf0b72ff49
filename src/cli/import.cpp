// `pipeplan import pipedream GRAPH --batch-size N [--micro-batches M] [-o MODEL]`.

#include "commands.hpp"
#include "pipeplan/error.hpp"

namespace pipeplan::cli {

void add_import_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("import", "Convert another tool's profile into model.json");
  sub->require_subcommand(1);
  (void)action;
}

}  // namespace pipeplan::cli
