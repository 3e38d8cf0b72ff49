// The framework exports (megatron, deepspeed, torch-schedule): golden files on the toy plan,
// hand-made v2 plans for what no planner makes yet, the refusal of plans a framework cannot run
// (spec 8.4), and the schedule CSV of every example plan against the rules
// torch.distributed.pipelining applies, re-implemented here from frameworks.md 2.1.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "../support/examples.hpp"
#include "../support/same_json.hpp"
#include "../support/sanitized_share.hpp"
#include "hand_view.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::hand_view;
using testing::HandPlan;
using testing::load;
using testing::source_dir;
using testing::stems;

fs::path data_dir() { return source_dir() / "tests/data/exports"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A plan file's view, checked against its model and topology as `pipeplan export` does.
PlanView checked_view(const std::string& stem) {
  const model::Model model = model::read_model(load(data_dir() / (stem + ".model.json")));
  const topology::Topology topology =
      topology::read_topology(load(data_dir() / (stem + ".topo.json")), model.profile_device);
  const Plan plan = simulate::check_plan(
      read_plan(load(data_dir() / (stem + ".plan.json")), topology), model, topology);
  PlanView view = make_view(plan, model, topology, stem + ".model.json");
  view.plan_file = stem + ".plan.json";
  return view;
}

// ---- torch.distributed.pipelining's rules (frameworks.md 2.1), re-implemented.

// Returns the first rule the compute-only CSV breaks, or "": rows are the pipeline ranks
// (`ranks` of them); every cell parses as an action; compute-only files hold only F, B, I, W;
// a stage index lies in 0..stages-1 and appears on exactly one rank; every stage has exactly
// `micro_batches` distinct F; B or I of micro-batch k only after F k on that stage, W k only
// after I k; #I == #W and #B + (#I + #W) / 2 == micro_batches per stage. Then the progress rule
// of the send/recv lowering (`_add_send_recv`): running each rank's actions in order, where a
// forward waits for the forward of the stage before and a backward for the backward of the
// stage after (the last stage's for its own forward), every rank finishes.
std::string torch_violation(const std::string& csv, int ranks, int stages, int micro_batches) {
  static const std::regex kAction(
      R"((\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*))");
  struct Action {
    int stage;
    char type;
    int micro_batch;
  };
  std::vector<std::vector<Action>> rows;
  std::istringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    rows.emplace_back();
    std::string cell;
    std::istringstream cells(line);
    while (std::getline(cells, cell, ',')) {
      std::smatch match;
      if (!std::regex_match(cell, match, kAction)) return "cell \"" + cell + "\" is no action";
      const std::string type = match[2];
      if (type.size() != 1) return "compute-only schedule holds " + cell;
      if (match[3].length() == 0) return cell + " has no micro-batch";
      rows.back().push_back({std::stoi(match[1]), type[0], std::stoi(match[3])});
    }
  }
  if (static_cast<int>(rows.size()) != ranks) {
    return std::to_string(rows.size()) + " rows for " + std::to_string(ranks) + " ranks";
  }
  std::map<int, int> rank_of;
  std::map<int, std::set<int>> forwards, inputs, weights;
  std::map<int, std::map<char, int>> counts;
  for (int r = 0; r < ranks; ++r) {
    for (const Action& a : rows[static_cast<std::size_t>(r)]) {
      if (a.stage < 0 || a.stage >= stages) return "stage " + std::to_string(a.stage);
      if (rank_of.count(a.stage) && rank_of[a.stage] != r) {
        return "stage " + std::to_string(a.stage) + " on two ranks";
      }
      rank_of[a.stage] = r;
      ++counts[a.stage][a.type];
      const std::string what = std::to_string(a.stage) + a.type + std::to_string(a.micro_batch);
      if (a.micro_batch < 0 || a.micro_batch >= micro_batches) return what + " out of range";
      if (a.type == 'F' && !forwards[a.stage].insert(a.micro_batch).second) {
        return what + " twice";
      }
      if ((a.type == 'B' || a.type == 'I') && !forwards[a.stage].count(a.micro_batch)) {
        return what + " before its forward";
      }
      if (a.type == 'I') inputs[a.stage].insert(a.micro_batch);
      if (a.type == 'W' && !inputs[a.stage].count(a.micro_batch)) return what + " before its I";
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (!rank_of.count(s)) return "stage " + std::to_string(s) + " on no rank";
    if (static_cast<int>(forwards[s].size()) != micro_batches) {
      return "stage " + std::to_string(s) + " has " + std::to_string(forwards[s].size()) + " F";
    }
    auto& c = counts[s];
    if (c['I'] != c['W'] || c['B'] + (c['I'] + c['W']) / 2 != micro_batches) {
      return "stage " + std::to_string(s) + " has the wrong number of backwards";
    }
  }
  std::set<std::tuple<int, char, int>> done;
  std::vector<std::size_t> next(rows.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      while (next[r] < rows[r].size()) {
        const Action& a = rows[r][next[r]];
        const bool ready =
            a.type == 'F'           ? a.stage == 0 || done.count({a.stage - 1, 'F', a.micro_batch})
            : a.stage == stages - 1 ? done.count({a.stage, 'F', a.micro_batch}) > 0
                                    : done.count({a.stage + 1, 'B', a.micro_batch}) > 0;
        if (!ready) break;
        done.insert({a.stage, a.type, a.micro_batch});
        ++next[r];
        progress = true;
      }
    }
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (next[r] < rows[r].size()) return "Malformed compute schedule, can't schedule sends/recvs";
  }
  return "";
}

TEST(TorchScheduleTest, TheValidatorSeesBrokenSchedules) {
  const std::string good = "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";
  EXPECT_EQ(torch_violation(good, 2, 2, 4), "");  // frameworks.md's own example
  EXPECT_EQ(torch_violation(good, 3, 2, 4), "2 rows for 3 ranks");
  EXPECT_EQ(torch_violation("0F0,0B0\n0F1,0B1\n", 2, 1, 2), "stage 0 on two ranks");
  EXPECT_EQ(torch_violation("0B0,0F0\n", 1, 1, 1), "0B0 before its forward");
  EXPECT_EQ(torch_violation("0F0,0F0,0B0\n", 1, 1, 1), "0F0 twice");
  EXPECT_EQ(torch_violation("0F0,0B0\n", 1, 1, 2), "stage 0 has 1 F");
  EXPECT_EQ(torch_violation("0F0,0F1,0B0\n", 1, 1, 2), "stage 0 has the wrong number of backwards");
  EXPECT_EQ(torch_violation("0F0,0SEND_F0,0B0\n", 1, 1, 1), "compute-only schedule holds 0SEND_F0");
  EXPECT_EQ(torch_violation("0F0,x\n", 1, 1, 1), "cell \"x\" is no action");
  EXPECT_EQ(torch_violation("0F0,0B1,0F1,0B0\n1F0,1F1,1B0,1B1\n", 2, 2, 2),
            "0B1 before its forward");
  // Each row valid on its own, but rank 0 waits for the gradient of micro-batch 0 before it
  // sends the activation of micro-batch 1, which rank 1 waits for first.
  EXPECT_EQ(torch_violation("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", 2, 2, 2),
            "Malformed compute schedule, can't schedule sends/recvs");
  EXPECT_EQ(torch_violation("0F0,0F1,0B1,0B0\n1F0,1B0,1F1,1B1\n", 2, 2, 2), "");
}

// ---- golden files.

// Regenerate with: pipeplan export tests/data/exports/S.plan.json --format F
//   --model tests/data/exports/S.model.json --topology tests/data/exports/S.topo.json
//   -o tests/data/exports/S.F.json (or .csv), after checking the change is intended.
TEST(FrameworkExportTest, MatchGoldenFiles) {
  // gpt3-13b-mb8: a v2 plan (2 x 4-way tensor parallel, recomputed, examples/models/llm).
  for (const char* stem : {"toy", "gpt-small", "gpt3-13b-mb8"}) {
    const PlanView view = checked_view(stem);
    for (const char* format : {"megatron", "deepspeed"}) {
      SCOPED_TRACE(std::string(stem) + " " + format);
      const std::string text = export_plan(view, *parse_export_format(format));
      const json golden =
          json::parse(slurp(data_dir() / (std::string(stem) + "." + format + ".json")));
      std::string mismatch;
      EXPECT_TRUE(testing::same_json(json::parse(text), golden, "", mismatch)) << mismatch;
    }
    EXPECT_EQ(export_plan(view, ExportFormat::kTorchSchedule),
              slurp(data_dir() / (std::string(stem) + ".torch-schedule.csv")))
        << stem;
  }
}

TEST(FrameworkExportTest, ToyPlanInEveryFramework) {
  const PlanView view = checked_view("toy");
  const json megatron = megatron_json(view);
  EXPECT_EQ(megatron.at("command_line"),
            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2");
  EXPECT_EQ(megatron.at("data_parallel_size"), 2);
  EXPECT_EQ(megatron.at("num_layers"), nullptr);  // embed, block1, block2, head
  const json deepspeed = deepspeed_json(view);
  EXPECT_EQ(deepspeed.at("parts"), json({0, 2, 4}));
  EXPECT_EQ(deepspeed.at("config").at("gradient_accumulation_steps"), 3);
  const std::string csv = torch_schedule_csv(view);
  EXPECT_EQ(torch_violation(csv, 2, 2, 3), "");
}

// ---- refusal (spec 8.4).

void expect_refused(const PlanView& view, const std::string& message_after_framework,
                    const std::string& pointer) {
  const std::pair<ExportFormat, std::string> formats[] = {
      {ExportFormat::kMegatron, "Megatron-LM"},
      {ExportFormat::kDeepSpeed, "DeepSpeed"},
      {ExportFormat::kTorchSchedule, "torch.distributed.pipelining"}};
  for (const auto& [format, framework] : formats) {
    SCOPED_TRACE(framework);
    try {
      (void)export_plan(view, format);
      ADD_FAILURE() << "no error";
    } catch (const InputError& error) {
      EXPECT_EQ(error.code(), ExitCode::kInvalidInput);
      std::string expected = message_after_framework;
      expected.replace(expected.find("FRAMEWORK"), 9, framework);
      EXPECT_EQ(error.what(), "plan.json: " + pointer + ": " + expected);
    }
  }
}

TEST(FrameworkExportTest, RefusesStagesWithDifferentReplicaCounts) {
  HandPlan hand;
  hand.replicas = {1, 2};
  expect_refused(hand_view(hand),
                 "stage 1 has 2 replicas but stage 0 has 1; FRAMEWORK runs every stage with the "
                 "same data-parallel and tensor-parallel degrees: make the plan with --uniform",
                 "/stages/1/gpus");
  hand.replicas = {2, 2, 1};
  hand.layers_per_stage = {1, 1, 2};
  hand.degrees = {1, 1, 1};
  hand.recompute = {false, false, false};
  expect_refused(hand_view(hand),
                 "stage 2 has 1 replica but stage 0 has 2; FRAMEWORK runs every stage with the "
                 "same data-parallel and tensor-parallel degrees: make the plan with --uniform",
                 "/stages/2/gpus");
}

TEST(FrameworkExportTest, RefusesStagesWithDifferentTensorParallelDegrees) {
  HandPlan hand;
  hand.degrees = {2, 1};
  expect_refused(hand_view(hand),
                 "stage 1 has tensor-parallel degree 1 but stage 0 has 2; FRAMEWORK runs every "
                 "stage with the same data-parallel and tensor-parallel degrees: make the plan "
                 "with --uniform",
                 "/stages/1/tensor_parallel");
}

TEST(FrameworkExportTest, RefusesMicroBatchesThatReplicasCannotShare) {
  HandPlan hand;
  hand.replicas = {2, 2};
  hand.micro_batches = 5;
  expect_refused(hand_view(hand),
                 "FRAMEWORK gives each of the 2 data-parallel replicas the same number of "
                 "micro-batches, and 5 is not a multiple of 2: make the plan with a multiple of 2 "
                 "micro-batches",
                 "/micro_batches");
}

// ---- Megatron-LM.

HandPlan transformer(std::vector<int> layers_per_stage) {
  HandPlan hand;
  const int S = static_cast<int>(layers_per_stage.size());
  int total = 0;
  for (int n : layers_per_stage) total += n;
  hand.layer_names.push_back("embedding");
  for (int l = 0; l + 2 < total; ++l) hand.layer_names.push_back("decoder" + std::to_string(l));
  hand.layer_names.push_back("output");
  hand.layers_per_stage = std::move(layers_per_stage);
  hand.replicas.assign(static_cast<std::size_t>(S), 1);
  hand.degrees.assign(static_cast<std::size_t>(S), 1);
  hand.recompute.assign(static_cast<std::size_t>(S), false);
  hand.gpus_per_node = 8;
  return hand;
}

TEST(MegatronTest, WritesTheLayoutOnlyForAnUnevenSplit) {
  struct Case {
    std::vector<int> split;
    json layout;
  };
  const Case cases[] = {
      {{4, 4}, nullptr},          // E t t t | t t t L: Megatron-LM's own split
      {{1, 3, 4}, "E|t*3|t*3L"},  // the embedding alone
      {{3, 5}, "Et*2|t*4L"},      // uneven
      {{2, 6}, "Et|t*5L"},        // one decoder
      {{7, 1}, "Et*6|L"},         // the loss alone
      {{8}, nullptr},             // one stage
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layout.dump());
    const json out = megatron_json(hand_view(transformer(c.split)));
    EXPECT_EQ(out.at("num_layers"), 6);
    EXPECT_EQ(out.at("pipeline_model_parallel_layout"), c.layout);
    const auto& args = out.at("arguments");
    const bool has_flag =
        std::find(args.begin(), args.end(), json("--pipeline-model-parallel-layout")) != args.end();
    EXPECT_EQ(has_flag, !c.layout.is_null());
  }
  // The empty-stage warning.
  const json alone = megatron_json(hand_view(transformer({1, 3, 4})));
  EXPECT_NE(alone.at("notes").dump().find("stage 0 holds no decoder layer"), std::string::npos);
}

TEST(MegatronTest, ArgumentsForTensorParallelismRecomputationAndTheDistributedOptimizer) {
  HandPlan hand = transformer({3, 5});
  hand.replicas = {2, 2};
  hand.degrees = {2, 2};
  hand.recompute = {true, true};
  hand.optimizer = Optimizer::kSharded;
  const json out = megatron_json(hand_view(hand));
  EXPECT_EQ(out.at("arguments"),
            json({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                  "--num-layers", "6", "--micro-batch-size", "4", "--global-batch-size", "16",
                  "--pipeline-model-parallel-layout", "Et*2|t*4L", "--recompute-granularity",
                  "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
                  "--use-distributed-optimizer"}));
  EXPECT_EQ(out.at("command_line"),
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 6 "
            "--micro-batch-size 4 --global-batch-size 16 --pipeline-model-parallel-layout "
            "'Et*2|t*4L' --recompute-granularity full --recompute-method uniform "
            "--recompute-num-layers 1 --use-distributed-optimizer");
  EXPECT_EQ(out.at("world_size"), 8);
  EXPECT_EQ(out.at("micro_batches_per_replica"), 2);
  EXPECT_EQ(out.at("recompute"), "all");
  EXPECT_EQ(out.at("distributed_optimizer"), true);
  // Tensor innermost, then data, then pipeline: the plan's groups.
  const json& ranks = out.at("rank_order");
  ASSERT_EQ(ranks.size(), 8u);
  const int expected[8][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                              {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(ranks[r].at("gpu"), "n0/gpu" + std::to_string(r));
    EXPECT_EQ(ranks[r].at("device"), r);
    EXPECT_EQ(ranks[r].at("pipeline_rank"), expected[r][0]) << r;
    EXPECT_EQ(ranks[r].at("data_parallel_rank"), expected[r][1]) << r;
    EXPECT_EQ(ranks[r].at("tensor_parallel_rank"), expected[r][2]) << r;
  }
  EXPECT_EQ(out.at("launch").at("matches_plan"), true);
  EXPECT_EQ(out.at("launch").at("host_order_matters"), false);
}

TEST(MegatronTest, RecomputesEveryStageWhenThePlanRecomputesSome) {
  HandPlan hand = transformer({4, 4});
  hand.recompute = {false, true};
  const json out = megatron_json(hand_view(hand));
  EXPECT_EQ(out.at("recompute"), "some");
  EXPECT_NE(out.at("command_line").get<std::string>().find("--recompute-granularity full"),
            std::string::npos);
  EXPECT_NE(out.at("notes").dump().find("only stage 1 of the plan recompute; Megatron-LM "
                                        "recomputes every stage or none"),
            std::string::npos);
  hand.recompute = {false, false};
  EXPECT_EQ(megatron_json(hand_view(hand)).at("command_line").get<std::string>().find("recompute"),
            std::string::npos);
}

TEST(MegatronTest, AProfileNotShapedLikeATransformerGetsNoLayerArguments) {
  HandPlan hand;
  hand.layers_per_stage = {1, 3};
  const json out = megatron_json(hand_view(hand));
  EXPECT_EQ(out.at("num_layers"), nullptr);
  EXPECT_EQ(out.at("pipeline_model_parallel_layout"), nullptr);
  EXPECT_NE(out.at("notes").dump().find("stages hold 1, 3 of the profile's layers"),
            std::string::npos);
  // Names that almost match are not taken for a transformer.
  HandPlan almost = transformer({4, 4});
  almost.layer_names[3] = "decoder7";
  EXPECT_EQ(megatron_json(hand_view(almost)).at("num_layers"), nullptr);
}

TEST(MegatronTest, WithoutABatchSizeLeavesTheBatchArgumentsOut) {
  PlanView view = hand_view(transformer({4, 4}));
  view.batch_size.reset();
  const json out = megatron_json(view);
  EXPECT_EQ(out.at("global_batch_size"), nullptr);
  EXPECT_EQ(out.at("command_line").get<std::string>().find("batch"), std::string::npos);
  EXPECT_NE(out.at("notes").dump().find("the model has no profile.batch_size"), std::string::npos);
}

TEST(MegatronTest, SaysHowToLaunchWhenTheRanksDoNotFollowTheHosts) {
  // Stage 0 on host n1, stage 1 on host n0.
  HandPlan hosts = transformer({4, 4});
  hosts.replicas = {4, 4};
  hosts.gpus_per_node = 4;
  hosts.gpu_permutation = {4, 5, 6, 7, 0, 1, 2, 3};
  json out = megatron_json(hand_view(hosts));
  EXPECT_EQ(out.at("launch").at("matches_plan"), true);
  EXPECT_EQ(out.at("launch").at("host_order_matters"), true);
  EXPECT_EQ(out.at("launch").at("hosts")[0], json({{"node_rank", 0},
                                                   {"host", "n1"},
                                                   {"first_rank", 0},
                                                   {"processes", 4},
                                                   {"cuda_visible_devices", nullptr}}));
  EXPECT_NE(out.at("notes").dump().find("start the hosts in this order (node rank 0 first), which "
                                        "is not the topology's: n1, n0"),
            std::string::npos);

  // Devices out of order on a host.
  HandPlan devices = hosts;
  devices.gpu_permutation = {1, 0, 2, 3, 4, 5, 7, 6};
  out = megatron_json(hand_view(devices));
  EXPECT_EQ(out.at("launch").at("host_order_matters"), false);
  EXPECT_EQ(out.at("launch").at("hosts")[0].at("cuda_visible_devices"), "1,0,2,3");
  EXPECT_NE(out.at("notes").dump().find("set CUDA_VISIBLE_DEVICES=1,0,2,3 on n0, "
                                        "CUDA_VISIBLE_DEVICES=0,1,3,2 on n1"),
            std::string::npos);

  // A host whose ranks are not contiguous: no per-host launcher can do it.
  HandPlan split = transformer({3, 2, 3});
  split.gpus_per_node = 2;
  split.gpu_permutation = {0, 2, 1};
  split.spare_gpus = 1;
  out = megatron_json(hand_view(split));
  EXPECT_EQ(out.at("launch").at("matches_plan"), false);
  EXPECT_NE(out.at("notes").dump().find("puts ranks 0 and 2 on host n0 with ranks of other hosts "
                                        "between them"),
            std::string::npos);
}

// ---- DeepSpeed.

TEST(DeepSpeedTest, PartsDegreesAndConfiguration) {
  HandPlan hand = transformer({3, 5});
  hand.replicas = {2, 2};
  hand.degrees = {2, 2};
  hand.recompute = {true, false};
  hand.optimizer = Optimizer::kSharded;
  const json out = deepspeed_json(hand_view(hand));
  EXPECT_EQ(out.at("parts"), json({0, 3, 8}));
  EXPECT_EQ(out.at("topology"), json({{"class", "PipeModelDataParallelTopology"},
                                      {"num_pp", 2},
                                      {"num_mp", 2},
                                      {"num_dp", 2}}));
  EXPECT_EQ(out.at("activation_checkpoint_interval"), 1);
  EXPECT_EQ(out.at("config"), json({{"train_batch_size", 16},
                                    {"train_micro_batch_size_per_gpu", 4},
                                    {"gradient_accumulation_steps", 2},
                                    {"zero_optimization", {{"stage", 1}}}}));
  EXPECT_EQ(out.at("stages")[1].at("layer_names"),
            json({"decoder2", "decoder3", "decoder4", "decoder5", "output"}));
  const std::string notes = out.at("notes").dump();
  EXPECT_NE(notes.find("Megatron-DeepSpeed"), std::string::npos);
  EXPECT_NE(notes.find("only stage 0 of the plan recompute"), std::string::npos);

  hand.degrees = {1, 1};
  hand.recompute = {false, false};
  hand.optimizer = Optimizer::kReplicated;
  const json plain = deepspeed_json(hand_view(hand));
  EXPECT_EQ(plain.at("topology"),
            json({{"class", "PipeDataParallelTopology"}, {"num_pp", 2}, {"num_dp", 2}}));
  EXPECT_EQ(plain.at("activation_checkpoint_interval"), 0);
  EXPECT_FALSE(plain.at("config").contains("zero_optimization"));
}

// ---- torch.distributed.pipelining.

TEST(TorchScheduleTest, ExportsOnePipelineOfAReplicatedPlan) {
  HandPlan hand;
  hand.replicas = {2, 2};
  hand.micro_batches = 6;
  const PlanView view = hand_view(hand);
  const std::string csv = torch_schedule_csv(view);
  // Replica 0 runs micro-batches 0, 2, 4: numbered 0, 1, 2.
  EXPECT_EQ(csv, "0F0,0F1,0B0,0F2,0B1,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n");
  EXPECT_EQ(torch_violation(csv, 2, 2, 3), "");
  // Tensor parallelism and recomputation change nothing in the schedule.
  hand.degrees = {2, 2};
  hand.recompute = {true, true};
  EXPECT_EQ(torch_schedule_csv(hand_view(hand)), csv);
}

TEST(TorchScheduleTest, RefusesReplicasThatAreNotCopiesOfOnePipeline) {
  HandPlan hand;
  hand.replicas = {2, 2};
  hand.micro_batches = 4;
  hand.cross_replicas = true;
  try {
    (void)torch_schedule_csv(hand_view(hand));
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "plan.json: /schedule/compute: micro-batch 1 runs on replica 1 of stage 0 but on "
                 "replica 0 of stage 1, so it keeps to no one pipeline; "
                 "torch.distributed.pipelining runs 2 copies of one pipeline schedule side by side "
                 "(make the plan with --schedule 1f1b)");
  }
  hand.cross_replicas = false;
  hand.swap_replica_order = true;
  try {
    (void)torch_schedule_csv(hand_view(hand));
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "plan.json: /schedule/compute: replica 1 of stage 0 runs its micro-batches in "
                 "another order than replica 0 (task 0 is 0F1, not 0F0); "
                 "torch.distributed.pipelining runs 2 copies of one pipeline schedule side by side "
                 "(make the plan with --schedule 1f1b)");
  }
}

// Every example model on every example topology, every planner, the default and the 1F1B
// schedule: the CSV passes torch's rules, or the export is refused with a reason that says how
// to get one (--uniform, --schedule 1f1b or a multiple of r micro-batches).
class TorchScheduleExamplesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchScheduleExamplesTest, EveryExamplePlanPassesTorchsRulesOrIsRefused) {
  const topology::Topology topology =
      topology::read_topology(load(source_dir() / "examples/topologies" / (GetParam() + ".json")));
  int exported = 0, refused = 0, index = 0;
  for (const std::string& name : stems("examples/models")) {
    if (!testing::runs_instance(index++, 2)) continue;  // half the models under the sanitizers
    const model::Model model =
        model::read_model(load(source_dir() / "examples/models" / (name + ".json")));
    for (const char* planner : {"spp", "gpipe", "pipedream", "uniform", "data-parallel"}) {
      for (const auto policy : {std::optional<schedule::Policy>{},
                                std::optional<schedule::Policy>{schedule::Policy::kOneFOneB}}) {
        SCOPED_TRACE(name + " " + planner + (policy ? " 1f1b" : ""));
        Plan plan;
        try {
          plan = planners::make_plan(
              planner, {model, topology, static_cast<int>(*model.micro_batches)}, policy);
        } catch (const Error&) {
          continue;  // no feasible plan of this planner here
        }
        PlanView view = make_view(plan, model, topology, name + ".json");
        view.plan_file = "plan.json";
        try {
          const std::string csv = torch_schedule_csv(view);
          const int r = plan.stages.front().replicas();
          // One row per device (spec 9.2: stages sharing GPUs are one pipeline rank).
          EXPECT_EQ(torch_violation(csv, static_cast<int>(pipeline_devices(plan).stages.size()),
                                    static_cast<int>(plan.stages.size()), view.micro_batches / r),
                    "");
          ++exported;
        } catch (const InputError& error) {
          ++refused;
          const std::string message = error.what();
          EXPECT_TRUE(message.find("--uniform") != std::string::npos ||
                      message.find("--schedule 1f1b") != std::string::npos ||
                      message.find("make the plan with a multiple of") != std::string::npos)
              << message;
          // 1F1B on a plan of equal replica counts and a multiple of r micro-batches is always
          // one pipeline copied r times.
          if (policy && message.find("--schedule 1f1b") != std::string::npos) {
            ADD_FAILURE() << "a 1F1B plan refused: " << message;
          }
        }
      }
    }
  }
  EXPECT_GT(exported, 0);
  std::printf("%s: %d schedules exported, %d plans refused\n", GetParam().c_str(), exported,
              refused);
}

INSTANTIATE_TEST_SUITE_P(Topologies, TorchScheduleExamplesTest,
                         ::testing::ValuesIn(stems("examples/topologies")), testing::StemName());

}  // namespace
}  // namespace pipeplan::report
