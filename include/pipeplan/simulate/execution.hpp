#pragma once
/// \file
/// The figures of the execution model per stage and per group (spec sections 3 and 8.3), in
/// one place: every consumer (the replay, the scheduler, the bounds, the plan checker, the plan
/// writer and the views) takes task durations, transfer sizes, memory and AllReduce times from
/// here, so that a rule of the execution model is written once.

#include <optional>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::simulate {

/// One group (replica) of a stage as the execution model runs it: one compute resource.
struct GroupExecution {
  int leader = 0;                        ///< The GPU compute tasks name.
  std::vector<int> gpus;                 ///< Its c t GPUs, leader first (spec 10.2).
  double speed = 1;                      ///< v: the slowest GPU's speed.
  std::optional<double> capacity_bytes;  ///< The smallest memory among its GPUs; empty when
                                         ///< every one is unlimited.
  int tightest_gpu = 0;                  ///< A GPU with that smallest memory (the first).
  double forward_ms = 0;                 ///< Duration of one F(m,s).
  double backward_ms = 0;                ///< Duration of one B(m,s), recomputation included.
  double work_ms = 0;                    ///< One micro-batch's F + B, as the scheduler's replica
                                         ///< choice and the bounds count it.
  double forward_allreduce_ms = 0;       ///< The tensor-parallel all-reduce part of forward_ms.
  double backward_allreduce_ms = 0;      ///< The all-reduce part of backward_ms (the recomputed
                                         ///< forward's included).
  double recompute_ms = 0;               ///< The recomputed forward inside backward_ms.
  double update_ms = 0;                  ///< Duration of its optimizer step; 0: none.
  double weight_ms = 0;                  ///< Duration of one W(m,s): `sum_l bw_l / v` (spec
                                         ///< 9.3).
  double input_ms = 0;                   ///< Duration of one I(m,s): `backward_ms - weight_ms`,
                                         ///< or with context parallelism the ring steps
                                         ///< overlapping the input-gradient part (spec 10.3).

  /// The duration of a compute task of this group (spec 8.3 and 9.3): the one place that says
  /// how long an `F`, `B`, `I` or `W` takes.
  [[nodiscard]] double duration(Op op) const {
    switch (op) {
      case Op::kForward:
        return forward_ms;
      case Op::kBackward:
        return backward_ms;
      case Op::kBackwardInput:
        return input_ms;
      case Op::kBackwardWeight:
        return weight_ms;
    }
    return backward_ms;
  }
};

/// One stage as the execution model runs it.
struct StageExecution {
  double forward_ms = 0;            ///< F_s: per-GPU forward sum at the stage's degree, speed 1.0.
  double backward_ms = 0;           ///< B_s, likewise.
  double parameter_bytes = 0;       ///< W_s: per-GPU parameter bytes at the stage's degree.
  double boundary_bytes = 0;        ///< A_s: activation bytes after the stage; 0 for the last.
  double transfer_bytes = 0;        ///< What one boundary transfer carries between leaders:
                                    ///< A_s / (c min(t_s, t_{s+1})); 0 for the last stage.
  double static_bytes = 0;          ///< Held by each of its GPUs throughout.
  double weight_bytes = 0;          ///< The weights' part of static_bytes.
  double gradient_bytes = 0;        ///< The gradients' part of static_bytes; the rest is the
                                    ///< optimizer state.
  double reserve_bytes = 0;         ///< The model's framework reserve: held by each GPU of its
                                    ///< device throughout, once however many stages it serves.
  double working_weight_bytes = 0;  ///< Fully sharded (n > 1): the gathered weights of the
                                    ///< largest layer of its device, twice (the layer
                                    ///< computing and the next, prefetched); like the
                                    ///< reserve, once per device. Else 0.
  double working_gradient_bytes = 0;  ///< Likewise its unsharded gradients, once (also with
                                      ///< sharded gradients only).

  /// What each GPU of its device holds once, however many stages it serves: the reserve and
  /// full sharding's working copies.
  [[nodiscard]] double device_bytes() const {
    return reserve_bytes + working_weight_bytes + working_gradient_bytes;
  }
  double stash_bytes = 0;         ///< Held per micro-batch in flight, from F start to B end.
  double transient_bytes = 0;     ///< Held during each B (or I) only: the largest of its
                                  ///< layers' working sets, each with its own stash when
                                  ///< recomputing (model::backward_transient_bytes_at).
  double weight_stash_bytes = 0;  ///< Yw_s: held per micro-batch from the end of its I to the
                                  ///< end of its W (spec 9.3; a split backward only).
  double allreduce_ms = 0;        ///< The data-parallel AllReduce (t rings in parallel over the
                                  ///< data- and context-parallel ranks); 0: r c = 1, or
                                  ///< sharded gradients.
  double gather_ms = 0;           ///< Sharded gradients: one all-gather of all its weights over
                                  ///< those rings (a reduce-scatter takes as long); else 0.
  std::vector<GroupExecution> groups;  ///< In replica order.

  /// The part of B_s a recomputing stage does not run (model::StageCost::own_backward_ms).
  double backward_recompute_ms = 0;
};

/// The execution figures of every stage of `stages` (which must pass `check_stages`) under
/// `optimizer`. O(sum over stages of layers x degrees + r t).
std::vector<StageExecution> execution(const model::Model& model, const topology::Topology& topology,
                                      const std::vector<Stage>& stages, Optimizer optimizer);

}  // namespace pipeplan::simulate
