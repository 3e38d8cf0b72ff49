// The task graph on its own: numbering (dense, every kind, round trips), every edge of every
// kind against an oracle written from the spec's words (sections 3 and 8.3), transfer
// directions, messages, and the limits. v1 stages (one GPU a replica) and section 8 stages
// (tensor-parallel groups) both decide which stages have an AllReduce.

#include "pipeplan/simulate/task_graph.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <vector>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

constexpr int kNone = TaskGraph::kNone;

Stage stage_on(std::vector<int> gpus, int tensor_parallel = 1) {
  Stage stage;
  stage.gpus = std::move(gpus);
  stage.tensor_parallel = tensor_parallel;
  return stage;
}

// Every compute task and transfer of S stages and M micro-batches.
std::vector<ComputeTask> all_compute(int S, int M) {
  std::vector<ComputeTask> out;
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < M; ++m) {
      for (Op op : {Op::kForward, Op::kBackward}) out.push_back({op, s, m});
    }
  }
  return out;
}
std::vector<TransferTask> all_transfers(int S, int M) {
  std::vector<TransferTask> out;
  for (int s = 0; s + 1 < S; ++s) {
    for (int m = 0; m < M; ++m) {
      for (TransferKind k : {TransferKind::kActivation, TransferKind::kGradient}) {
        out.push_back({k, s, m});
      }
    }
  }
  return out;
}

// The oracle: micro-batch m's chain as spec section 3 words it, F(m,0) -> act(m,0) -> F(m,1)
// -> ... -> F(m,S-1) -> B(m,S-1) -> grad(m,S-2) -> B(m,S-2) -> ... -> B(m,0), as ids.
std::vector<int> chain_of(const TaskGraph& graph, int m) {
  const int S = graph.stages();
  std::vector<int> chain;
  for (int s = 0; s < S; ++s) {
    chain.push_back(graph.id(ComputeTask{Op::kForward, s, m}));
    if (s + 1 < S) chain.push_back(graph.id(TransferTask{TransferKind::kActivation, s, m}));
  }
  for (int s = S - 1; s >= 0; --s) {
    chain.push_back(graph.id(ComputeTask{Op::kBackward, s, m}));
    if (s > 0) chain.push_back(graph.id(TransferTask{TransferKind::kGradient, s - 1, m}));
  }
  return chain;
}

TEST(TaskGraphTest, NumbersEveryTaskOnceDenselyAndRoundTrips) {
  for (int S = 1; S <= 4; ++S) {
    for (int M = 1; M <= 3; ++M) {
      const TaskGraph graph(S, M);
      std::set<int> ids;
      for (const ComputeTask& t : all_compute(S, M)) {
        ASSERT_TRUE(graph.contains(t));
        const int id = graph.id(t);
        EXPECT_TRUE(graph.is_compute(id));
        EXPECT_FALSE(graph.is_transfer(id) || graph.is_allreduce(id) || graph.is_update(id));
        EXPECT_EQ(graph.compute_task(id), t);
        ids.insert(id);
      }
      for (const TransferTask& t : all_transfers(S, M)) {
        ASSERT_TRUE(graph.contains(t));
        const int id = graph.id(t);
        EXPECT_TRUE(graph.is_transfer(id));
        EXPECT_FALSE(graph.is_compute(id) || graph.is_allreduce(id) || graph.is_update(id));
        EXPECT_EQ(graph.transfer_task(id), t);
        ids.insert(id);
      }
      EXPECT_EQ(static_cast<int>(ids.size()), graph.chain_count());
      for (int s = 0; s < S; ++s) {
        const int a = graph.allreduce(s);
        const int u = graph.update(s);
        EXPECT_TRUE(graph.is_allreduce(a));
        EXPECT_FALSE(graph.is_compute(a) || graph.is_transfer(a) || graph.is_update(a));
        EXPECT_TRUE(graph.is_update(u));
        EXPECT_FALSE(graph.is_compute(u) || graph.is_transfer(u) || graph.is_allreduce(u));
        EXPECT_EQ(graph.allreduce_stage(a), s);
        EXPECT_EQ(graph.update_stage(u), s);
        ids.insert(a);
        ids.insert(u);
      }
      // Dense: exactly 0 .. size() - 1.
      ASSERT_EQ(static_cast<int>(ids.size()), graph.size());
      EXPECT_EQ(*ids.begin(), 0);
      EXPECT_EQ(*ids.rbegin(), graph.size() - 1);
      EXPECT_FALSE(graph.is_compute(-1) || graph.is_transfer(-1) || graph.is_allreduce(-1) ||
                   graph.is_update(-1));
      EXPECT_FALSE(graph.is_update(graph.size()));
    }
  }
}

TEST(TaskGraphTest, TheNumberingIsTheDocumentedOne) {
  const int S = 3, M = 4;
  const TaskGraph graph(S, M);
  EXPECT_EQ(graph.compute_count(), 2 * S * M);
  EXPECT_EQ(graph.transfer_count(), 2 * (S - 1) * M);
  EXPECT_EQ(graph.chain_count(), 4 * S * M - 2 * M);
  EXPECT_EQ(TaskGraph::chain_task_count(S, M), graph.chain_count());
  EXPECT_EQ(TaskGraph::chain_task_count(1, 5), 10);
  EXPECT_EQ(graph.size(), 4 * S * M - 2 * M + 2 * S);
  EXPECT_EQ(graph.id(ComputeTask{Op::kForward, 2, 3}), 2 * (2 * M + 3));
  EXPECT_EQ(graph.id(ComputeTask{Op::kBackward, 1, 0}), 2 * (1 * M + 0) + 1);
  EXPECT_EQ(graph.id(TransferTask{TransferKind::kActivation, 1, 2}), 2 * S * M + 2 * (M + 2));
  EXPECT_EQ(graph.id(TransferTask{TransferKind::kGradient, 0, 1}), 2 * S * M + 2 * 1 + 1);
  EXPECT_EQ(graph.allreduce(2), 4 * S * M - 2 * M + 2);
  EXPECT_EQ(graph.update(1), 4 * S * M - 2 * M + S + 1);
}

TEST(TaskGraphTest, EveryChainEdgeIsTheSpecsChain) {
  for (int S = 1; S <= 4; ++S) {
    for (int M = 1; M <= 3; ++M) {
      const TaskGraph graph(S, M);
      std::map<int, int> predecessor, successor;
      for (int m = 0; m < M; ++m) {
        const std::vector<int> chain = chain_of(graph, m);
        ASSERT_EQ(static_cast<int>(chain.size()), 4 * S - 2);
        for (std::size_t k = 0; k < chain.size(); ++k) {
          predecessor[chain[k]] = k == 0 ? kNone : chain[k - 1];
          successor[chain[k]] = k + 1 == chain.size() ? kNone : chain[k + 1];
        }
      }
      ASSERT_EQ(static_cast<int>(predecessor.size()), graph.chain_count());
      for (int id = 0; id < graph.chain_count(); ++id) {
        EXPECT_EQ(graph.data_predecessor(id), predecessor.at(id)) << graph.describe(id);
        EXPECT_EQ(graph.data_successor(id), successor.at(id)) << graph.describe(id);
        const std::vector<int> expected =
            predecessor.at(id) == kNone ? std::vector<int>{} : std::vector<int>{predecessor.at(id)};
        EXPECT_EQ(graph.predecessors(id), expected) << graph.describe(id);
      }
    }
  }
}

TEST(TaskGraphTest, AllReduceAndUpdateSlotsAreOnNoChain) {
  const TaskGraph graph(std::vector<Stage>{stage_on({0, 1}), stage_on({2})}, 3);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(graph.data_predecessor(graph.allreduce(s)), kNone);
    EXPECT_EQ(graph.data_successor(graph.allreduce(s)), kNone);
    EXPECT_EQ(graph.data_predecessor(graph.update(s)), kNone);
    EXPECT_EQ(graph.data_successor(graph.update(s)), kNone);
  }
}

// v1 stages: a stage of several GPUs is replicated; its AllReduce waits for every backward of
// the stage, its update for the AllReduce; a one-GPU stage's update waits for the backwards.
TEST(TaskGraphTest, AllReduceAndUpdateDependenciesOfV1Stages) {
  const int M = 3;
  const TaskGraph graph(std::vector<Stage>{stage_on({0, 1}), stage_on({2})}, M);
  EXPECT_TRUE(graph.has_allreduce(0));
  EXPECT_FALSE(graph.has_allreduce(1));
  for (int s = 0; s < 2; ++s) {
    std::vector<int> backwards;
    for (int m = 0; m < M; ++m) backwards.push_back(graph.id(ComputeTask{Op::kBackward, s, m}));
    EXPECT_EQ(graph.predecessors(graph.allreduce(s)), backwards);
    EXPECT_EQ(graph.describe_predecessors(graph.allreduce(s)),
              "the last backward of stage " + std::to_string(s));
  }
  EXPECT_EQ(graph.predecessors(graph.update(0)), std::vector<int>{graph.allreduce(0)});
  EXPECT_EQ(graph.describe_predecessors(graph.update(0)), "the AllReduce of stage 0");
  EXPECT_EQ(graph.predecessors(graph.update(1)), graph.predecessors(graph.allreduce(1)));
  EXPECT_EQ(graph.describe_predecessors(graph.update(1)), "the last backward of stage 1");
}

// Section 8 stages: replicas are tensor-parallel groups, so four GPUs at degree 2 are two
// replicas (an AllReduce) and two GPUs at degree 2 are one (none).
TEST(TaskGraphTest, AllReduceAndUpdateDependenciesOfTensorParallelStages) {
  const TaskGraph graph(std::vector<Stage>{stage_on({0, 1, 2, 3}, 2), stage_on({4, 5}, 2)}, 2);
  EXPECT_TRUE(graph.has_allreduce(0));
  EXPECT_FALSE(graph.has_allreduce(1));
  EXPECT_EQ(graph.predecessors(graph.update(0)), std::vector<int>{graph.allreduce(0)});
  EXPECT_EQ(graph.predecessors(graph.update(1)),
            (std::vector<int>{graph.id(ComputeTask{Op::kBackward, 1, 0}),
                              graph.id(ComputeTask{Op::kBackward, 1, 1})}));
  // Without stages, no stage is replicated.
  const TaskGraph plain(2, 2);
  EXPECT_FALSE(plain.has_allreduce(0));
  EXPECT_FALSE(plain.has_allreduce(1));
}

// Every edge of the whole graph, AllReduces and updates included, points from a task to one
// that can run after it: Kahn's algorithm orders all of them.
TEST(TaskGraphTest, TheWholeGraphIsAcyclic) {
  const TaskGraph graph(std::vector<Stage>{stage_on({0, 1}), stage_on({2}), stage_on({3, 4})}, 4);
  std::vector<std::vector<int>> next(static_cast<std::size_t>(graph.size()));
  std::vector<int> waiting(static_cast<std::size_t>(graph.size()), 0);
  for (int id = 0; id < graph.size(); ++id) {
    for (const int p : graph.predecessors(id)) {
      ASSERT_GE(p, 0);
      ASSERT_LT(p, graph.size());
      next[static_cast<std::size_t>(p)].push_back(id);
      ++waiting[static_cast<std::size_t>(id)];
    }
  }
  std::vector<int> ready;
  for (int id = 0; id < graph.size(); ++id) {
    if (waiting[static_cast<std::size_t>(id)] == 0) ready.push_back(id);
  }
  int ordered = 0;
  while (!ready.empty()) {
    const int id = ready.back();
    ready.pop_back();
    ++ordered;
    for (const int n : next[static_cast<std::size_t>(id)]) {
      if (--waiting[static_cast<std::size_t>(n)] == 0) ready.push_back(n);
    }
  }
  EXPECT_EQ(ordered, graph.size());
}

TEST(TaskGraphTest, TransfersGoFromTheirProducerToTheirConsumer) {
  const int S = 4, M = 2;
  const TaskGraph graph(S, M);
  for (const TransferTask& t : all_transfers(S, M)) {
    const TransferEnds ends = TaskGraph::ends(t);
    const bool activation = t.kind == TransferKind::kActivation;
    EXPECT_EQ(ends.from_stage, activation ? t.stage : t.stage + 1);
    EXPECT_EQ(ends.to_stage, activation ? t.stage + 1 : t.stage);
    const int id = graph.id(t);
    EXPECT_EQ(graph.compute_task(graph.data_predecessor(id)).stage, ends.from_stage);
    EXPECT_EQ(graph.compute_task(graph.data_successor(id)).stage, ends.to_stage);
  }
}

TEST(TaskGraphTest, DescribesEveryKind) {
  const TaskGraph graph(3, 4);
  EXPECT_EQ(graph.describe(graph.id(ComputeTask{Op::kForward, 1, 3})),
            "forward of micro-batch 3 on stage 1");
  EXPECT_EQ(graph.describe(graph.id(ComputeTask{Op::kBackward, 0, 2})),
            "backward of micro-batch 2 on stage 0");
  EXPECT_EQ(graph.describe(graph.id(TransferTask{TransferKind::kActivation, 1, 3})),
            "activation transfer of micro-batch 3 from stage 1 to stage 2");
  EXPECT_EQ(graph.describe(graph.id(TransferTask{TransferKind::kGradient, 1, 3})),
            "gradient transfer of micro-batch 3 from stage 2 to stage 1");
  EXPECT_EQ(graph.describe(graph.allreduce(2)), "the AllReduce of stage 2");
  EXPECT_EQ(graph.describe(graph.update(2)), "the optimizer step of stage 2");
  EXPECT_EQ(graph.describe_predecessors(graph.id(ComputeTask{Op::kBackward, 1, 0})),
            "gradient transfer of micro-batch 0 from stage 2 to stage 1");
}

TEST(TaskGraphTest, ContainsOnlyExistingTasks) {
  const TaskGraph graph(2, 3);
  EXPECT_FALSE(graph.contains(ComputeTask{Op::kForward, 2, 0}));
  EXPECT_FALSE(graph.contains(ComputeTask{Op::kForward, -1, 0}));
  EXPECT_FALSE(graph.contains(ComputeTask{Op::kBackward, 0, 3}));
  EXPECT_FALSE(graph.contains(TransferTask{TransferKind::kActivation, 1, 0}));  // no boundary 1
  EXPECT_FALSE(graph.contains(TransferTask{TransferKind::kGradient, 0, -1}));
  EXPECT_TRUE(graph.contains(TransferTask{TransferKind::kGradient, 0, 2}));
}

TEST(TaskGraphTest, RefusesGraphsItCannotNumber) {
  auto message = [](int S, int M) {
    try {
      const TaskGraph graph(S, M);
    } catch (const ScheduleError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(0, 1), "the plan has no stages");
  EXPECT_EQ(message(1, 0), "the schedule has no micro-batches");
  // 4 S M - 2 M + 2 S with S = 2^16, M = 2^15: 2^33 - 2^16 + 2^17.
  EXPECT_EQ(message(1 << 16, 1 << 15), "the schedule has 8590000128 tasks, more than 2147483647");
  EXPECT_EQ(message(1000, 1000), "no error");
}

}  // namespace
}  // namespace pipeplan::simulate

namespace pipeplan::simulate {
namespace {

// Spec 9.3: with a split backward I takes B's place in the chain and W follows I; a boundary
// inside a device (stages 1 and 2 on GPU 1) has no transfer, so F and I cross it directly.
TEST(TaskGraphV3Test, SplitBackwardAndABoundaryInsideADevice) {
  const std::vector<Stage> stages{{0, 0, {0}}, {1, 1, {1}}, {2, 2, {1}}, {3, 3, {0, 2}}};
  const int M = 3;
  const TaskGraph graph(stages, M, true);
  EXPECT_TRUE(graph.split_backward());
  EXPECT_EQ(graph.compute_count(), 3 * 4 * M);
  EXPECT_EQ(graph.transfer_count(), 2 * 2 * M);  // boundaries 0 and 2 only
  EXPECT_TRUE(graph.is_local_boundary(1));
  EXPECT_FALSE(graph.is_local_boundary(0));
  EXPECT_FALSE(graph.contains(TransferTask{TransferKind::kActivation, 1, 0}));
  EXPECT_FALSE(graph.contains(ComputeTask{Op::kBackward, 0, 0}));
  EXPECT_TRUE(graph.contains(ComputeTask{Op::kBackwardWeight, 0, 0}));
  EXPECT_LE(TaskGraph::chain_task_count(4, M, true), graph.chain_count() + 2 * M);
  for (int m = 0; m < M; ++m) {
    const int f1 = graph.id(ComputeTask{Op::kForward, 1, m});
    const int f2 = graph.id(ComputeTask{Op::kForward, 2, m});
    const int i1 = graph.id(ComputeTask{Op::kBackwardInput, 1, m});
    const int i2 = graph.id(ComputeTask{Op::kBackwardInput, 2, m});
    const int w1 = graph.id(ComputeTask{Op::kBackwardWeight, 1, m});
    EXPECT_EQ(graph.data_predecessor(f2), f1);
    EXPECT_EQ(graph.data_successor(f1), f2);
    EXPECT_EQ(graph.data_predecessor(i1), i2);
    EXPECT_EQ(graph.data_successor(i2), i1);
    EXPECT_EQ(graph.data_predecessor(w1), i1);
    EXPECT_EQ(graph.data_successor(w1), TaskGraph::kNone);
    const std::array<int, 2> after = graph.data_successors(i1);
    EXPECT_EQ(after[0], graph.id(TransferTask{TransferKind::kGradient, 0, m}));
    EXPECT_EQ(after[1], w1);
    // The last stage's I follows its forward; every id round-trips.
    EXPECT_EQ(graph.data_predecessor(graph.id(ComputeTask{Op::kBackwardInput, 3, m})),
              graph.id(ComputeTask{Op::kForward, 3, m}));
  }
  for (int id = 0; id < graph.chain_count(); ++id) {
    if (graph.is_compute(id)) {
      EXPECT_EQ(graph.id(graph.compute_task(id)), id);
    } else {
      EXPECT_EQ(graph.id(graph.transfer_task(id)), id);
    }
  }
  // Stage 3 is replicated: its AllReduce waits for its M weight gradients.
  const std::vector<int> before = graph.predecessors(graph.allreduce(3));
  ASSERT_EQ(before.size(), static_cast<std::size_t>(M));
  for (int m = 0; m < M; ++m) {
    EXPECT_EQ(before[static_cast<std::size_t>(m)],
              graph.id(ComputeTask{Op::kBackwardWeight, 3, m}));
  }
  EXPECT_EQ(graph.describe_predecessors(graph.allreduce(3)),
            "the last weight-gradient backward of stage 3");
}

}  // namespace
}  // namespace pipeplan::simulate
