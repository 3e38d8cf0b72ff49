// The framework exports of spec 9.5 on hand-made v3 plans (stages that share GPUs, a split
// backward): torch-schedule files checked by pipeplan_torch.torch_schedule_check (torch's rules,
// re-implemented in Python from torch's source), Megatron-LM's virtual stages, and every refusal
// with its exact message.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <functional>

#include "../support/examples.hpp"
#include "../support/temp_folder.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/report/export.hpp"
#include "v3_view.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::json;
using testing::v3_view;
using testing::V3Plan;

// Interleaved: P = 2 devices, stage s on device s mod 2.
V3Plan interleaved(bool split) {
  V3Plan hand;
  hand.split_backward = split;
  return hand;
}

// Two stages on two devices, nothing shared.
V3Plan two_stages(bool split, const std::string& policy) {
  V3Plan hand;
  hand.device_of_stage = {0, 1};
  hand.split_backward = split;
  hand.schedule_policy = policy;
  return hand;
}

// The V shape of ZB-V on 2 devices: device 0 holds stages 0 and 3, device 1 stages 1 and 2.
V3Plan v_shape(bool split) {
  V3Plan hand;
  hand.device_of_stage = {0, 1, 1, 0};
  hand.split_backward = split;
  hand.schedule_policy = split ? "zb-v" : "list";
  return hand;
}

// A model shaped like `pipeplan model transformer`'s, `decoders` per stage (the embedding on the
// first, the output on the last).
V3Plan transformer(V3Plan hand, const std::vector<int>& decoders) {
  hand.layers_per_stage = decoders;
  hand.layers_per_stage.front() += 1;
  hand.layers_per_stage.back() += 1;
  int n = 0;
  for (int d : decoders) n += d;
  hand.layer_names = {"embedding"};
  for (int l = 0; l < n; ++l) hand.layer_names.push_back("decoder" + std::to_string(l));
  hand.layer_names.push_back("output");
  return hand;
}

class TorchScheduleV3Test : public testing::TempFolderTest {
 protected:
  // The checker's exit code on `csv` (0 passes, 1 refuses), run from python/ with python3.
  int check(const std::string& csv, int ranks, int stages, int micro_batches) {
    const std::string path = write("schedule.csv", csv);
    const std::string command = "cd '" + (testing::source_dir() / "python").string() +
                                "' && python3 -m pipeplan_torch.torch_schedule_check '" + path +
                                "' --ranks " + std::to_string(ranks) + " --stages " +
                                std::to_string(stages) + " --micro-batches " +
                                std::to_string(micro_batches) + " > '" + path + ".out' 2>&1";
    const int status = std::system(command.c_str());
    last_output = read(path + ".out");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void SetUp() override {
    TempFolderTest::SetUp();
    if (std::system("python3 -c pass > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  }
  std::string last_output;
};

TEST_F(TorchScheduleV3Test, SharedDevicesAndSplitBackwardsPassTorchsRules) {
  struct Case {
    const char* name;
    V3Plan hand;
  };
  const Case cases[] = {{"interleaved", interleaved(false)},
                        {"interleaved, split", interleaved(true)},
                        {"V shape", v_shape(false)},
                        {"V shape, split", v_shape(true)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const PlanView view = v3_view(c.hand);
    const std::string csv = torch_schedule_csv(view);
    // One row per device, every task once.
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
    EXPECT_EQ(std::count(csv.begin(), csv.end(), ',') + 2,
              static_cast<long>(view.plan.timeline.compute.size()));
    EXPECT_EQ(csv.find('B') == std::string::npos, c.hand.split_backward) << csv;
    EXPECT_EQ(csv.find('W') != std::string::npos, c.hand.split_backward) << csv;
    EXPECT_EQ(check(csv, 2, 4, 4), 0) << csv << last_output;
  }
  // The first row of the interleaved plan holds stages 0 and 2 by their global index.
  const std::string csv = torch_schedule_csv(v3_view(interleaved(true)));
  EXPECT_EQ(csv.substr(0, 4), "0F0,");
  EXPECT_NE(csv.substr(0, csv.find('\n')).find("2W3"), std::string::npos);
  // The checker refuses what torch refuses: row 0 twice puts stages 0 and 2 on both ranks.
  const std::string row = csv.substr(0, csv.find('\n') + 1);
  EXPECT_EQ(check(row + row, 2, 4, 4), 1);
  EXPECT_NE(last_output.find("stage-on-two-ranks: Rank 1, step 0: Stage 0 is assigned to both "
                             "rank 1 and rank 0"),
            std::string::npos)
      << last_output;
}

TEST_F(TorchScheduleV3Test, AnOrderThatDeadlocksIsRefusedByTheChecker) {
  PlanView view = v3_view(interleaved(false));
  // Device 1 runs stage 3's forwards before stage 1's: stage 3 waits for stage 2 on device 0,
  // which waits for stage 1.
  auto& order = view.plan.schedule.gpu_order[1];
  std::stable_partition(order.begin(), order.end(),
                        [](const ComputeTask& t) { return t.stage == 3; });
  EXPECT_EQ(check(torch_schedule_csv(view), 2, 4, 4), 1);
  EXPECT_NE(last_output.find("deadlock: Malformed compute schedule, can't schedule sends/recvs"),
            std::string::npos)
      << last_output;
}

TEST(TorchScheduleNotesTest, NameTheTorchReleaseAndTheScheduleClass) {
  const std::vector<std::string> split = torch_schedule_notes(v3_view(interleaved(true)));
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0],
            "the schedule follows the grammar of torch 2.6 and later "
            "(torch.distributed.pipelining): F the forward, I and W the input-gradient and "
            "weight-gradient halves of the backward, several stages per rank; earlier releases "
            "read it differently or not at all");
  EXPECT_NE(split[1].find("_PipelineScheduleRuntime and _load_csv(path, "
                          "format=\"compute_only\")"),
            std::string::npos);
  EXPECT_EQ(split[2],
            "each rank builds a PipelineStage for every stage of its row, with the global stage "
            "index and num_stages=4: rank 0 stages 0, 2; rank 1 stages 1, 3");
  const std::vector<std::string> whole = torch_schedule_notes(v3_view(v_shape(false)));
  EXPECT_NE(whole[0].find("torch 2.6 and later"), std::string::npos);
  EXPECT_NE(whole[0].find("B the full backward (its meaning since PyTorch PR #138886)"),
            std::string::npos);
  // One stage per rank, whole backwards: torch 2.5's grammar, no stage list.
  const std::vector<std::string> plain = torch_schedule_notes(v3_view(two_stages(false, "1f1b")));
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0],
            "the schedule follows the grammar of torch 2.5 and later "
            "(torch.distributed.pipelining): F the forward, B the full backward");
  EXPECT_EQ(export_notes(v3_view(interleaved(true)), ExportFormat::kTorchSchedule), split);
  EXPECT_TRUE(export_notes(v3_view(interleaved(true)), ExportFormat::kSvg).empty());
}

// ---- Megatron-LM.

TEST(MegatronV3Test, InterleavedPlansGetVirtualStages) {
  const json out = megatron_json(v3_view(transformer(interleaved(false), {1, 1, 1, 1})));
  EXPECT_EQ(out.at("pipeline_model_parallel_size"), 2);
  EXPECT_EQ(out.at("num_virtual_stages_per_pipeline_rank"), 2);
  EXPECT_EQ(out.at("world_size"), 2);
  EXPECT_EQ(out.at("command_line"),
            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 "
            "--num-virtual-stages-per-pipeline-rank 2 --num-layers 4 --micro-batch-size 4 "
            "--global-batch-size 16");
  EXPECT_EQ(out.at("rank_order").size(), 2u);
  EXPECT_EQ(out.at("rank_order")[1].at("pipeline_rank"), 1);
  EXPECT_EQ(out.at("notes").dump().find("schedule"), std::string::npos) << out.at("notes");
  // An uneven split: the layout lists the 4 stages in Megatron-LM's order (stage i =
  // vpp_rank * PP + pp_rank), which is the plan's.
  const json uneven = megatron_json(v3_view(transformer(interleaved(false), {2, 1, 1, 3})));
  EXPECT_EQ(uneven.at("pipeline_model_parallel_layout"), "Et*2|t|t|t*3L");
  // The layout's 4 stages on 2 ranks state the virtual stages: Megatron-LM refuses it beside
  // --num-virtual-stages-per-pipeline-rank, so only the layout is written.
  EXPECT_EQ(uneven.at("num_virtual_stages_per_pipeline_rank"), 2);
  EXPECT_EQ(uneven.at("command_line"),
            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --num-layers 7 "
            "--micro-batch-size 4 --global-batch-size 16 --pipeline-model-parallel-layout "
            "'Et*2|t|t|t*3L'");
  // Another policy on Megatron-LM's placement runs, with a note.
  V3Plan bfs = transformer(interleaved(false), {1, 1, 1, 1});
  bfs.schedule_policy = "looped-bfs";
  EXPECT_NE(megatron_json(v3_view(bfs))
                .at("notes")
                .dump()
                .find("Megatron-LM runs its interleaved 1F1B schedule (micro-batch groups of 2) "
                      "on every data-parallel replica, not the plan's looped-bfs schedule; make "
                      "the plan with --schedule interleaved-1f1b to estimate the iteration it "
                      "runs"),
            std::string::npos);
}

void expect_refused(const std::function<void()>& run, const std::string& message) {
  try {
    run();
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_EQ(error.code(), ExitCode::kInvalidInput);
    EXPECT_EQ(error.what(), message);
  }
}

TEST(MegatronV3Test, RefusesWhatMegatronDoesNotRun) {
  expect_refused([] { (void)megatron_json(v3_view(interleaved(true))); },
                 "plan.json: /split_backward: the plan splits every backward into its "
                 "input-gradient and weight-gradient halves (I and W), and Megatron-LM runs whole "
                 "backwards: make the plan with --schedule 1f1b");
  V3Plan zb = v_shape(false);
  zb.schedule_policy = "zb-v";
  expect_refused([&] { (void)megatron_json(v3_view(zb)); },
                 "plan.json: /schedule_policy: the plan's zb-v schedule is a zero-bubble "
                 "schedule, which Megatron-LM does not run: make the plan with --schedule 1f1b");
  expect_refused([] { (void)megatron_json(v3_view(v_shape(false))); },
                 "plan.json: /stages/2/gpus: stage 2 runs on the GPUs of stage 1, but Megatron-LM "
                 "runs stage i on pipeline rank i mod 2 (the plan's 2 pipeline ranks, numbered by "
                 "their first stage), so stage 2 belongs on rank 0: make the plan with --schedule "
                 "1f1b or interleaved-1f1b");
  V3Plan uneven;
  uneven.device_of_stage = {0, 1, 0};
  uneven.schedule_policy = "list";
  expect_refused([&] { (void)megatron_json(v3_view(uneven)); },
                 "plan.json: /stages: the plan's 3 stages do not divide evenly among its 2 "
                 "pipeline ranks, and Megatron-LM gives every rank the same number of virtual "
                 "stages: make the plan with --schedule 1f1b or interleaved-1f1b");
  V3Plan one_rank;  // Megatron-LM refuses a virtual pipeline on one pipeline rank
  one_rank.device_of_stage = {0, 0};
  one_rank.schedule_policy = "interleaved-1f1b";
  expect_refused([&] { (void)megatron_json(v3_view(one_rank)); },
                 "plan.json: /stages: the plan's 2 stages share one pipeline rank, and "
                 "Megatron-LM runs virtual stages only on two pipeline ranks or more: make the "
                 "plan with --schedule 1f1b");
  V3Plan odd = interleaved(false);
  odd.micro_batches = 3;
  expect_refused([&] { (void)megatron_json(v3_view(odd)); },
                 "plan.json: /micro_batches: Megatron-LM's interleaved schedule runs each "
                 "data-parallel replica's micro-batches in groups of its 2 pipeline ranks, and 3 "
                 "is not a multiple of 2: make the plan with a multiple of 2 micro-batches");
}

// ---- DeepSpeed.

TEST(DeepSpeedV3Test, RefusesSharedGpusAndSplitBackwards) {
  expect_refused([] { (void)deepspeed_json(v3_view(interleaved(false))); },
                 "plan.json: /stages/2/gpus: stage 2 runs on the GPUs of stage 0, and DeepSpeed "
                 "runs one stage per pipeline rank: make the plan with --schedule 1f1b");
  expect_refused(
      [] { (void)deepspeed_json(v3_view(two_stages(true, "list"))); },
      "plan.json: /split_backward: the plan splits every backward into its input-gradient and "
      "weight-gradient halves (I and W), and DeepSpeed runs whole backwards: make the plan with "
      "--schedule 1f1b");
}

// ---- ranks.

TEST(RanksV3Test, ARankServingSeveralStagesNamesEachOperationsStage) {
  for (const V3Plan& hand : {interleaved(false), v_shape(false)}) {
    const PlanView view = v3_view(hand);
    const json ranks = ranks_json(view);
    ASSERT_EQ(ranks.size(), 2u);
    EXPECT_EQ(ranks[0].at("stages"), json({0, hand.device_of_stage[3] == 1 ? 2 : 3}));
    int computed = 0;
    for (const json& entry : ranks) {
      const int gpu = entry.at("rank").get<int>();
      std::vector<ComputeTask> order;
      for (const json& op : entry.at("operations")) {
        if (op.at("op") == "send" || op.at("op") == "recv") continue;
        order.push_back({op.at("op") == "forward" ? Op::kForward : Op::kBackward,
                         op.at("stage").get<int>(), op.at("micro_batch").get<int>()});
      }
      // The plan's order of the device, every stage of it.
      EXPECT_EQ(order, view.plan.schedule.gpu_order[static_cast<std::size_t>(gpu)]);
      computed += static_cast<int>(order.size());
    }
    EXPECT_EQ(computed, static_cast<int>(view.plan.timeline.compute.size()));
  }
}

}  // namespace
}  // namespace pipeplan::report
