// libFuzzer target: model::read_model on arbitrary bytes.
//
// Bugs: any failure but an input error (exit 3); a model that is accepted but that the reader
// would refuse after writing it back (model_to_json), or that changes on the way.

#include <cmath>

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::fuzz {
namespace {

bool same_layers(const model::Model& a, const model::Model& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const model::Layer& x = a.layers[i];
    const model::Layer& y = b.layers[i];
    if (x.name != y.name || x.forward_ms != y.forward_ms || x.backward_ms != y.backward_ms ||
        x.activation_bytes != y.activation_bytes || x.parameter_bytes != y.parameter_bytes ||
        x.stash_bytes != y.stash_bytes || x.update_ms != y.update_ms ||
        x.backward_weight_ms != y.backward_weight_ms ||
        x.weight_stash_bytes != y.weight_stash_bytes ||
        x.tensor_parallel.has_value() != y.tensor_parallel.has_value()) {
      return false;
    }
    if (x.tensor_parallel) {
      const model::TensorParallel& p = *x.tensor_parallel;
      const model::TensorParallel& q = *y.tensor_parallel;
      if (p.degrees != q.degrees || p.allreduce_bytes != q.allreduce_bytes ||
          p.allreduces_forward != q.allreduces_forward ||
          p.allreduces_backward != q.allreduces_backward || p.forward_ms != q.forward_ms ||
          p.backward_ms != q.backward_ms || p.parameter_bytes != q.parameter_bytes ||
          p.stash_bytes != q.stash_bytes || p.update_ms != q.update_ms ||
          p.backward_weight_ms != q.backward_weight_ms ||
          p.weight_stash_bytes != q.weight_stash_bytes) {
        return false;
      }
    }
  }
  return true;
}

void check(const model::Model& model) {
  if (model.layers.empty()) bug("a model without layers was accepted");
  if (model.micro_batches &&
      (*model.micro_batches < 1 || *model.micro_batches > model::kMaxMicroBatches)) {
    bug("micro_batches out of range was accepted");
  }
  for (const model::Layer& layer : model.layers) {
    for (double value : {layer.forward_ms, layer.backward_ms, layer.activation_bytes,
                         layer.parameter_bytes, layer.stash_bytes}) {
      if (!std::isfinite(value) || value < 0)
        bug("a negative or non-finite layer value was accepted");
    }
    // Spec 9.1: at every degree the weight-gradient part and the weight stash are parts of the
    // backward and the stash (I and the bytes freed by I are never negative).
    std::vector<int> degrees = {1};
    if (layer.tensor_parallel) degrees = layer.tensor_parallel->degrees;
    for (int t : degrees) {
      if (!(model::backward_weight_ms_at(layer, t) <= model::backward_ms_at(layer, t)))
        bug("a weight-gradient part above its backward was accepted");
      if (!(model::weight_stash_bytes_at(layer, t) <= model::stash_bytes_at(layer, t)))
        bug("a weight stash above its stash was accepted");
    }
  }
  if (!std::isfinite(model::total_compute_ms(model)))
    bug("an infinite total compute time was accepted");
}

}  // namespace
}  // namespace pipeplan::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  model::Model model;
  const bool read = fuzz::expect_only({ExitCode::kInvalidInput}, [&] {
    model = model::read_model(io::source_from_text("model.json", fuzz::text_of(data, size)));
  });
  if (!read) return 0;
  fuzz::check(model);
  // What pipeplan writes (import -o), it must read back unchanged.
  const std::string written = io::dump_json(model::model_to_json(model));
  model::Model again;
  fuzz::expect_only(
      {}, [&] { again = model::read_model(io::source_from_text("again.json", written)); });
  if (!fuzz::same_layers(model, again) || again.micro_batches != model.micro_batches ||
      again.name != model.name || again.parameter_memory_factor != model.parameter_memory_factor ||
      again.sharded_memory_factor != model.sharded_memory_factor ||
      again.input_bytes != model.input_bytes) {
    fuzz::bug("the model changed when written and read back");
  }
  return 0;
}
