// libFuzzer target: `pipeplan model transformer`'s options (issue 34), run in process through
// cli::run. The input is a list of options separated by NUL bytes: each one's first byte picks
// the option from a menu, the rest is its value as a user would type it (flags take none).
//
// Bugs: an exit code other than 0 (success), 2 (usage) or 3; on success, standard error not
// empty or standard output that pipeplan cannot read back as a model with layers; on failure,
// anything on standard output or more than one line `pipeplan: error: ...` on standard error.
// Inputs naming a size above 4,096 (a minute of output, not a parsing question) are skipped.

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "pipeplan/cli/cli.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"

namespace {

struct Option {
  const char* name;
  bool flag;
};

// Every option of `model transformer` but -o (the output goes to standard output here).
const Option kOptions[] = {{"--preset", false},
                           {"--layers", false},
                           {"--hidden", false},
                           {"--heads", false},
                           {"--kv-heads", false},
                           {"--ffn-hidden", false},
                           {"--sequence", false},
                           {"--vocab", false},
                           {"--ffn", false},
                           {"--micro-batch-size", false},
                           {"--dtype", false},
                           {"--gpu", false},
                           {"--degrees", false},
                           {"--micro-batches", false},
                           {"--name", false},
                           {"--cross-entropy", false},
                           {"--dropout", false},
                           {"--gradient-dtype", false},
                           {"--optimizer-dtype", false},
                           {"--attention-dtype", false},
                           {"--kernel-overhead-us", false},
                           {"--matmul-ceiling", false},
                           {"--sequence-parallel", true},
                           {"--selective-recompute", true},
                           {"--per-op-recompute", true},
                           {"--flash-attention", true}};

// Whether `value` holds a run of digits worth more than 4,096 (leading zeros aside).
bool names_a_large_size(const std::string& value) {
  std::size_t at = 0;
  while (at < value.size()) {
    if (value[at] < '0' || value[at] > '9') {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < value.size() && value[end] >= '0' && value[end] <= '9') ++end;
    std::size_t first = at;
    while (first + 1 < end && value[first] == '0') ++first;
    if (end - first > 4 || std::stoi(value.substr(first, end - first)) > 4096) return true;
    at = end;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  std::vector<std::string> args{"model", "transformer", "--quiet"};
  std::size_t at = 0;
  while (at < size && args.size() < 40) {
    const auto* end = static_cast<const std::uint8_t*>(std::memchr(data + at, 0, size - at));
    const std::size_t stop = end ? static_cast<std::size_t>(end - data) : size;
    if (stop > at) {
      const Option& option = kOptions[data[at] % (sizeof(kOptions) / sizeof(kOptions[0]))];
      args.emplace_back(option.name);
      if (!option.flag) {
        std::string value = fuzz::text_of(data + at + 1, stop - at - 1);
        if (names_a_large_size(value)) return 0;
        args.push_back(std::move(value));
      }
    }
    at = stop + 1;
  }
  std::istringstream in;
  std::ostringstream out, err;
  const int code = cli::run(args, in, out, err);
  if (code == 0) {
    if (!err.str().empty()) fuzz::bug("model transformer succeeded but wrote: " + err.str());
    // Any error reading it back is a bug (expect_only with no allowed code aborts).
    fuzz::expect_only({}, [&] {
      const model::Model model = model::read_model(io::source_from_text("out", out.str()));
      if (model.layers.empty()) fuzz::bug("model transformer wrote a model without layers");
    });
    return 0;
  }
  if (code != 2 && code != 3) {
    fuzz::bug("model transformer exited " + std::to_string(code) + ": " + err.str());
  }
  const std::string message = err.str();
  if (!out.str().empty()) fuzz::bug("a failed model transformer wrote standard output");
  if (message.rfind("pipeplan: error: ", 0) != 0 || message.find('\n') != message.size() - 1) {
    fuzz::bug("model transformer failed without one error line: " + message);
  }
  return 0;
}
