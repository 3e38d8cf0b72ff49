// Tests of the PipeDream graph.txt importer, its CLI command, and the shipped examples.

#include "pipeplan/model/pipedream_import.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/cli/cli.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::model {
namespace {

const std::string kSourceDir = PIPEPLAN_SOURCE_DIR;

io::Source read(const std::string& relative_path) {
  return io::read_source(kSourceDir + "/" + relative_path, std::cin);
}

// A node line with the given id and activation size, times 1 and 2 ms, no parameters.
std::string node_line(const std::string& id, const std::string& activation = "1") {
  return id + " -- op -- forward_compute_time=1, backward_compute_time=2, activation_size=" +
         activation + ", parameter_size=0\n";
}

// The message of the InputError that importing `text` (named graph.txt) throws.
std::string import_error(const std::string& text) {
  try {
    import_pipedream(io::source_from_text("graph.txt", text), 1, std::nullopt);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

std::vector<std::string> names(const Model& model) {
  std::vector<std::string> out;
  for (const Layer& layer : model.layers) out.push_back(layer.name);
  return out;
}

std::vector<double> cuts(const Model& model) {
  std::vector<double> out;
  for (const Layer& layer : model.layers) out.push_back(layer.activation_bytes);
  return out;
}

// tests/data/pipedream/small_dag.txt, in file order:
//   n1 (100 B), n3 (30 B), n2 ([20; 5] = 25 B), mask (7 B), n4 (40 B, stage_id=1), n5 (8 B),
//   n6 (0 B); edges n1->n2, n1->n4 (skip), n2->n3, n2->n5 (n2 feeds two later nodes),
//   n3->n4, mask->n4, mask->n6 (like an attention mask), n4->n5, n5->n6.
// Kahn's algorithm, earliest line first among ready nodes:
//   ready {n1, mask} -> n1; ready {n2 (line 3), mask (line 4)} -> n2;
//   ready {n3 (line 2), mask} -> n3; ready {mask} -> mask; then n4, n5, n6.
// Order: n1 n2 n3 mask n4 n5 n6 (positions 0..6). Live ranges [producer, last consumer):
//   n1 [0,4) 100, n2 [1,5) 25, n3 [2,4) 30, mask [3,6) 7, n4 [4,5) 40, n5 [5,6) 8.
// Cuts: p0 100; p1 100+25 = 125; p2 100+25+30 = 155; p3 100+25+30+7 = 162;
//   p4 25+7+40 = 72; p5 7+8 = 15; p6 0.
TEST(PipedreamImportTest, OrdersTopologicallyWithEarliestLineFirst) {
  Model model = import_pipedream(read("tests/data/pipedream/small_dag.txt"), 32, 4);
  EXPECT_EQ(names(model), (std::vector<std::string>{"n1", "n2", "n3", "mask", "n4", "n5", "n6"}));
}

TEST(PipedreamImportTest, ActivationBytesAreCutSizes) {
  Model model = import_pipedream(read("tests/data/pipedream/small_dag.txt"), 32, 4);
  EXPECT_EQ(cuts(model), (std::vector<double>{100, 125, 155, 162, 72, 15, 0}));
}

TEST(PipedreamImportTest, CopiesTimesParametersAndStashesOwnOutput) {
  Model model = import_pipedream(read("tests/data/pipedream/small_dag.txt"), 32, 4);
  EXPECT_EQ(model.name, "small_dag");
  EXPECT_EQ(model.micro_batches, 4);
  EXPECT_EQ(model.profile_batch_size, 32);
  EXPECT_FALSE(model.profile_device.has_value());
  EXPECT_EQ(model.parameter_memory_factor, 4);
  ASSERT_EQ(model.layers.size(), 7U);
  const Layer& n2 = model.layers[1];
  EXPECT_EQ(n2.forward_ms, 1.25);
  EXPECT_EQ(n2.backward_ms, 2.5);
  EXPECT_EQ(n2.parameter_bytes, 4096);
  EXPECT_EQ(n2.stash_bytes, 25);  // its own output [20; 5], not the cut (125)
  std::vector<double> stash;
  for (const Layer& layer : model.layers) stash.push_back(layer.stash_bytes);
  EXPECT_EQ(stash, (std::vector<double>{100, 25, 30, 7, 40, 8, 0}));
  EXPECT_EQ(total_compute_ms(model), 7.125 + 12.75);
}

TEST(PipedreamImportTest, OutputIsAValidModelFile) {
  Model model = import_pipedream(read("tests/data/pipedream/small_dag.txt"), 32, 4);
  std::string text = io::dump_json(model_to_json(model));
  Model again = read_model(io::source_from_text("model.json", text));
  EXPECT_EQ(names(again), names(model));
  EXPECT_EQ(cuts(again), cuts(model));
  EXPECT_EQ(again.layers[1].stash_bytes, 25);
  EXPECT_EQ(again.micro_batches, 4);
  EXPECT_EQ(again.profile_batch_size, 32);
}

TEST(PipedreamImportTest, MicroBatchesAreOptional) {
  Model model = import_pipedream(read("tests/data/pipedream/small_dag.txt"), 1, std::nullopt);
  EXPECT_FALSE(model.micro_batches.has_value());
  EXPECT_EQ(io::dump_json(model_to_json(model)).find("micro_batches"), std::string::npos);
}

TEST(PipedreamImportTest, StandardInputGivesNoName) {
  Model model = import_pipedream(io::source_from_text("<stdin>", node_line("a")), 1, std::nullopt);
  EXPECT_EQ(model.name, "");
}

TEST(PipedreamImportTest, SumsListValuedSizes) {
  std::string text = node_line("lstm", "[6291456.0; 131072.0; 131072.0]") +
                     node_line("out", "[1;2;3 ; 4e1]") + "\tlstm -- out\n";
  Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
  ASSERT_EQ(model.layers.size(), 2U);
  EXPECT_EQ(model.layers[0].activation_bytes, 6553600);
  EXPECT_EQ(model.layers[0].stash_bytes, 6553600);
  EXPECT_EQ(model.layers[1].stash_bytes, 46);
  EXPECT_EQ(model.layers[1].activation_bytes, 0);
}

TEST(PipedreamImportTest, AcceptsAnyWhitespaceBeforeEdgesAndBlankLines) {
  // dapple/amoeba-36-pbs-1.txt writes " \tnode3 -- node4"; also CRLF, a BOM and blank lines.
  std::string text = "\xEF\xBB\xBF" + node_line("a") + node_line("b") + node_line("c") +
                     "\r\n   \n" + " \ta -- b\r\n" + "b -- c\n" + "  \t  a -- c  \n\n";
  PipedreamGraph graph = parse_pipedream_graph(io::source_from_text("g.txt", text));
  ASSERT_EQ(graph.nodes.size(), 3U);
  ASSERT_EQ(graph.edges.size(), 3U);
  EXPECT_EQ(graph.edges[0].from, 0U);
  EXPECT_EQ(graph.edges[0].to, 1U);
  EXPECT_EQ(graph.edges[0].line, 6U);  // lines 4 and 5 are blank
  EXPECT_EQ(graph.edges[2].line, 8U);
  Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
  EXPECT_EQ(cuts(model), (std::vector<double>{1, 2, 0}));
}

TEST(PipedreamImportTest, AcceptsEdgesBeforeTheirNodes) {
  std::string text = "\tb -- a\n" + node_line("a") + node_line("b");
  Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
  EXPECT_EQ(names(model), (std::vector<std::string>{"b", "a"}));
}

TEST(PipedreamImportTest, KeepsIsolatedNodesInFileOrder) {
  std::string text = node_line("x") + node_line("a") + node_line("b") + "\tb -- a\n";
  Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
  EXPECT_EQ(names(model), (std::vector<std::string>{"x", "b", "a"}));
  EXPECT_EQ(cuts(model), (std::vector<double>{0, 1, 0}));
}

TEST(PipedreamImportTest, ParsesTheGraphStructure) {
  PipedreamGraph graph = parse_pipedream_graph(read("tests/data/pipedream/small_dag.txt"));
  EXPECT_EQ(graph.file, kSourceDir + "/tests/data/pipedream/small_dag.txt");
  ASSERT_EQ(graph.nodes.size(), 7U);
  EXPECT_EQ(graph.nodes[1].id, "n3");
  EXPECT_EQ(graph.nodes[1].description, "Conv2d(16, 16, kernel_size=(3, 3))");
  EXPECT_EQ(graph.nodes[1].line, 2U);
  EXPECT_EQ(graph.nodes[2].activation_bytes, 25);
  EXPECT_EQ(graph.edges.size(), 9U);
  EXPECT_EQ(pipedream_topological_order(graph), (std::vector<std::size_t>{0, 2, 1, 3, 4, 5, 6}));
}

TEST(PipedreamImportTest, RejectsCyclesNamingTheClosingEdge) {
  std::string text = node_line("a") + node_line("b") + node_line("c") + node_line("d") +
                     "\ta -- b\n\tb -- c\n\tc -- d\n\td -- b\n";
  EXPECT_EQ(import_error(text),
            "graph.txt: line 8: edge \"d -- b\" closes a cycle: b -> c -> d -> b");
  // The reported edge is the cycle's last in the file, wherever the walk enters it.
  text = node_line("a") + node_line("b") + "\tb -- a\n\ta -- b\n";
  EXPECT_EQ(import_error(text), "graph.txt: line 4: edge \"a -- b\" closes a cycle: b -> a -> b");
}

TEST(PipedreamImportTest, RejectsSelfLoops) {
  EXPECT_EQ(import_error(node_line("a") + "\ta -- a\n"),
            "graph.txt: line 2: edge \"a -- a\" closes a cycle: a -> a");
}

TEST(PipedreamImportTest, ShortensLongCycles) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += node_line("v" + std::to_string(i));
  for (int i = 0; i < 20; ++i) {
    text += "\tv" + std::to_string(i) + " -- v" + std::to_string((i + 1) % 20) + "\n";
  }
  EXPECT_EQ(import_error(text),
            "graph.txt: line 40: edge \"v19 -- v0\" closes a cycle: v0 -> v1 -> v2 -> v3 -> v4 "
            "-> ... (12 more) -> v17 -> v18 -> v19 -> v0");
}

TEST(PipedreamImportTest, RejectsEdgesToUnknownNodes) {
  EXPECT_EQ(import_error(node_line("a") + "\ta -- b\n"),
            "graph.txt: line 2: edge names unknown node \"b\"");
  EXPECT_EQ(import_error(node_line("a") + "\tz -- a\n"),
            "graph.txt: line 2: edge names unknown node \"z\"");
}

TEST(PipedreamImportTest, RejectsDuplicateNodes) {
  EXPECT_EQ(import_error(node_line("a") + node_line("b") + node_line("a")),
            "graph.txt: line 3: duplicate node \"a\" (first on line 1)");
}

TEST(PipedreamImportTest, RejectsBadNumbers) {
  EXPECT_EQ(import_error(node_line("a", "-1")),
            "graph.txt: line 1: activation_size: expected a number >= 0, got \"-1\"");
  EXPECT_EQ(import_error(node_line("a", "12abc")),
            "graph.txt: line 1: activation_size: expected a number >= 0, got \"12abc\"");
  EXPECT_EQ(import_error(node_line("a", "nan")),
            "graph.txt: line 1: activation_size: expected a number >= 0, got \"nan\"");
  EXPECT_EQ(import_error(node_line("a", "1e400")),
            "graph.txt: line 1: activation_size: expected a number >= 0, got \"1e400\"");
  EXPECT_EQ(import_error(node_line("a", "")),
            "graph.txt: line 1: activation_size: expected a number >= 0, got \"\"");
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=0x10, backward_compute_time=2, "
                         "activation_size=1, parameter_size=0\n"),
            "graph.txt: line 1: forward_compute_time: expected a number >= 0, got \"0x10\"");
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=1, backward_compute_time=2, "
                         "activation_size=1, parameter_size=[1; 2]\n"),
            "graph.txt: line 1: parameter_size: expected a number >= 0, got \"[1; 2]\"");
}

TEST(PipedreamImportTest, RejectsBadLists) {
  EXPECT_EQ(import_error(node_line("a", "[1; x]")),
            "graph.txt: line 1: activation_size: list element 2: expected a number >= 0, got "
            "\"x\"");
  EXPECT_EQ(import_error(node_line("a", "[]")),
            "graph.txt: line 1: activation_size: list element 1: expected a number >= 0, got "
            "\"\"");
  EXPECT_EQ(import_error(node_line("a", "[1; 2")),
            "graph.txt: line 1: activation_size: unterminated list \"[1; 2\" (expected [a; b; "
            "...])");
  EXPECT_EQ(import_error(node_line("a", "[1e308; 1e308]")),
            "graph.txt: line 1: activation_size: the sum of the list is too large");
}

TEST(PipedreamImportTest, RejectsMissingUnknownAndRepeatedFields) {
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=1, backward_compute_time=2, "
                         "activation_size=1\n"),
            "graph.txt: line 1: missing field \"parameter_size\"");
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=1, backward_compute_time=2, "
                         "activation_size=1, parameter_size=0, flops=3\n"),
            "graph.txt: line 1: unknown field \"flops\" (expected forward_compute_time, "
            "backward_compute_time, activation_size, parameter_size)");
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=1, forward_compute_time=2, "
                         "activation_size=1, parameter_size=0\n"),
            "graph.txt: line 1: field \"forward_compute_time\" given twice");
  EXPECT_EQ(import_error("a -- op -- forward_compute_time=1, backward_compute_time, "
                         "activation_size=1, parameter_size=0\n"),
            "graph.txt: line 1: expected <field>=<value>, got \"backward_compute_time\"");
}

TEST(PipedreamImportTest, RejectsMalformedLines) {
  EXPECT_EQ(import_error(node_line("a") + "just some words\n"),
            "graph.txt: line 2: expected a node (id -- description -- metadata) or an edge (id "
            "-- id), got 1 field separated by \" -- \"");
  EXPECT_EQ(import_error("a -- b -- c -- d -- e\n"),
            "graph.txt: line 1: expected a node (id -- description -- metadata) or an edge (id "
            "-- id), got 5 fields separated by \" -- \"");
  // Surrounding whitespace goes first, so " -- a -- b" is the edge "-- a" -> "b".
  EXPECT_EQ(import_error(node_line("b") + " -- a -- b\n"),
            "graph.txt: line 2: edge names unknown node \"-- a\"");
  EXPECT_EQ(import_error("a --  -- y -- stage_id=2\n"),
            "graph.txt: line 1: expected <field>=<value>, got \"y\"");
}

TEST(PipedreamImportTest, RejectsBadStageIds) {
  std::string line = node_line("a");
  line.pop_back();
  EXPECT_EQ(import_error(line + " -- stage=2\n"),
            "graph.txt: line 1: expected stage_id=<integer> as the 4th field, got \"stage=2\"");
  EXPECT_EQ(import_error(line + " -- stage_id=-1\n"),
            "graph.txt: line 1: expected stage_id=<integer> as the 4th field, got "
            "\"stage_id=-1\"");
  EXPECT_EQ(names(import_pipedream(io::source_from_text("g.txt", line + " -- stage_id=12\n"), 1,
                                   std::nullopt)),
            (std::vector<std::string>{"a"}));
}

TEST(PipedreamImportTest, RejectsFilesWithoutNodes) {
  EXPECT_EQ(import_error(""), "graph.txt: no nodes: not a PipeDream graph.txt");
  EXPECT_EQ(import_error("\n \t\n\r\n"), "graph.txt: no nodes: not a PipeDream graph.txt");
  EXPECT_EQ(import_error("\ta -- b\n"), "graph.txt: no nodes: not a PipeDream graph.txt");
}

TEST(PipedreamImportTest, RejectsOverflowingActivationTotals) {
  EXPECT_EQ(import_error(node_line("a", "1e308") + node_line("b", "1e308")),
            "graph.txt: the activation sizes are too large: their sum overflows");
}

TEST(PipedreamImportTest, NamesCarryNoControlBytesIntoMessages) {
  EXPECT_EQ(import_error(node_line("a\x01") + "\ta\x01 -- a\x01\n"),
            "graph.txt: line 2: edge \"a\\x01 -- a\\x01\" closes a cycle: a\\x01 -> a\\x01");
}

TEST(PipedreamImportTest, RejectsNodeIdsThatAreNotUtf8) {
  EXPECT_EQ(import_error(node_line("a\xFF")),
            "graph.txt: line 1: node id \"a\\xFF\" is not valid UTF-8");
  EXPECT_EQ(import_error(node_line("\xC0\xAF")),  // an overlong "/"
            "graph.txt: line 1: node id \"\\xC0\\xAF\" is not valid UTF-8");
  EXPECT_EQ(names(import_pipedream(io::source_from_text("g.txt", node_line("\xC2\xB5s")), 1,
                                   std::nullopt)),
            (std::vector<std::string>{"\xC2\xB5s"}));
}

// Random edits of a valid file either import or fail with an InputError; nothing else.
TEST(PipedreamImportTest, SurvivesRandomEdits) {
  const std::string base = read("tests/data/pipedream/small_dag.txt").text;
  const std::string alphabet = "-- \t\n[];,=.e0123456789abnode";
  std::mt19937 random(20240601);
  for (int round = 0; round < 3000; ++round) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int k = 0; k < edits; ++k) {
      const std::size_t at = random() % (text.size() + 1);
      switch (random() % 3) {
        case 0:
          text.insert(at, 1, alphabet[random() % alphabet.size()]);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1 + random() % 8);
          break;
        default:
          if (at < text.size()) text[at] = static_cast<char>(random() % 256);
          break;
      }
    }
    try {
      Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
      ASSERT_FALSE(model.layers.empty());
      EXPECT_EQ(model.layers.back().activation_bytes, 0);
    } catch (const InputError& error) {
      const std::string message = error.what();
      ASSERT_EQ(message.rfind("g.txt: ", 0), 0U) << message;
      ASSERT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

// A long chain with one skip from the first node to the last: no recursion, no quadratic
// work, and every cut but the last carries the skip.
TEST(PipedreamImportTest, HandlesLongChains) {
  constexpr int kNodes = 50000;
  std::string text;
  for (int i = 0; i < kNodes; ++i) text += node_line("v" + std::to_string(i), "2");
  for (int i = 0; i + 1 < kNodes; ++i) {
    text += "\tv" + std::to_string(i) + " -- v" + std::to_string(i + 1) + "\n";
  }
  text += "\tv0 -- v" + std::to_string(kNodes - 1) + "\n";
  Model model = import_pipedream(io::source_from_text("g.txt", text), 1, std::nullopt);
  ASSERT_EQ(model.layers.size(), static_cast<std::size_t>(kNodes));
  EXPECT_EQ(model.layers[0].activation_bytes, 2);
  EXPECT_EQ(model.layers[1].activation_bytes, 4);
  EXPECT_EQ(model.layers[kNodes - 2].activation_bytes, 4);
  EXPECT_EQ(model.layers[kNodes - 1].activation_bytes, 0);
}

TEST(PipedreamImportTest, IsDeterministic) {
  const io::Source source = read("examples/models/sources/pipedream/resnet50_graph.txt");
  const std::string first = io::dump_json(model_to_json(import_pipedream(source, 128, 8)));
  const std::string second = io::dump_json(model_to_json(import_pipedream(source, 128, 8)));
  EXPECT_EQ(first, second);
}

// The real profiles shipped in examples/models/sources (copied from peer-data).
struct RealProfile {
  const char* path;
  std::size_t nodes;
  std::size_t edges;
  double forward_ms;  // sum over the file's nodes (peer-data/README.md rounds these)
  double backward_ms;
  double parameter_bytes;
};

const RealProfile kRealProfiles[] = {
    {"pipedream/vgg16_graph.txt", 41, 41, 251.874, 438.633, 553430176},
    {"pipedream/resnet50_graph.txt", 177, 193, 201.45, 260.931, 102228128},
    {"pipedream/gnmt_graph.txt", 48, 58, 33.533, 55.883, 775063808},
    {"dapple/bert-24-pbs-6.txt", 29, 52, 193.757, 321.6, 1340567552},
    {"dapple/bert-48-pbs-2.txt", 53, 100, 129.197, 214.56, 2549805056},
    {"dapple/amoeba-36-pbs-1.txt", 44, 83, 48.67, 119.38, 3731135780},
};

TEST(PipedreamImportTest, PreservesTotalsOfRealProfiles) {
  for (const RealProfile& profile : kRealProfiles) {
    SCOPED_TRACE(profile.path);
    const io::Source source = read(std::string("examples/models/sources/") + profile.path);
    PipedreamGraph graph = parse_pipedream_graph(source);
    EXPECT_EQ(graph.nodes.size(), profile.nodes);
    EXPECT_EQ(graph.edges.size(), profile.edges);
    Model model = import_pipedream(source, 1, std::nullopt);
    ASSERT_EQ(model.layers.size(), profile.nodes);
    double forward_ms = 0, backward_ms = 0, parameter_bytes = 0, stash_bytes = 0, output_bytes = 0;
    for (const Layer& layer : model.layers) {
      forward_ms += layer.forward_ms;
      backward_ms += layer.backward_ms;
      parameter_bytes += layer.parameter_bytes;
      stash_bytes += layer.stash_bytes;
    }
    for (const PipedreamNode& node : graph.nodes) output_bytes += node.activation_bytes;
    EXPECT_NEAR(forward_ms, profile.forward_ms, 1e-9 * profile.forward_ms);
    EXPECT_NEAR(backward_ms, profile.backward_ms, 1e-9 * profile.backward_ms);
    EXPECT_EQ(parameter_bytes, profile.parameter_bytes);
    EXPECT_EQ(stash_bytes, output_bytes);
    EXPECT_EQ(model.layers.back().activation_bytes, 0);
  }
}

double cut_after(const Model& model, const std::string& name) {
  for (const Layer& layer : model.layers) {
    if (layer.name == name) return layer.activation_bytes;
  }
  return -1;
}

TEST(PipedreamImportTest, HandPickedCutsOfRealProfiles) {
  auto import = [](const std::string& path) {
    return import_pipedream(read("examples/models/sources/" + path), 1, std::nullopt);
  };
  // VGG-16: conv1 (node2) feeds only node3; its output is 128*64*224*224*4 bytes.
  EXPECT_EQ(cut_after(import("pipedream/vgg16_graph.txt"), "node2"), 1644167168);
  // ResNet-50: after the first bottleneck's last main-path conv (node12, 411041792 B), the
  // max-pool output (node5, 102760448 B) still waits for the downsample conv node14.
  EXPECT_EQ(cut_after(import("pipedream/resnet50_graph.txt"), "node12"), 102760448 + 411041792);
  // BERT-48: after layer_10 (node15) its output and the attention mask (node2, read by every
  // layer up to node52) cross; after layer_47 (node52) only its output does.
  const Model bert = import("dapple/bert-48-pbs-2.txt");
  EXPECT_EQ(cut_after(bert, "node15"), 4325376 + 3538944);
  EXPECT_EQ(cut_after(bert, "node52"), 4325376);
  // AmoebaNet-36: cells read the two previous cells ([6422528; 6422528] each), and the input
  // (node1, [602112; 4004]) is read again by node26.
  EXPECT_EQ(cut_after(import("dapple/amoeba-36-pbs-1.txt"), "node10"), 606116 + 2 * 12845056);
}

std::string run_cli(const std::vector<std::string>& args, const std::string& input,
                    std::string* out, std::string* err) {
  std::istringstream in(input);
  std::ostringstream out_stream, err_stream;
  int code = cli::run(args, in, out_stream, err_stream);
  *out = out_stream.str();
  *err = err_stream.str();
  return std::to_string(code);
}

TEST(ImportCliTest, WritesModelJsonToStandardOutput) {
  std::string out, err;
  const std::string path = kSourceDir + "/tests/data/pipedream/small_dag.txt";
  EXPECT_EQ(run_cli({"import", "pipedream", path, "--batch-size", "32", "--micro-batches", "4"}, "",
                    &out, &err),
            "0");
  Model model = read_model(io::source_from_text("out.json", out));
  EXPECT_EQ(model.name, "small_dag");
  EXPECT_EQ(cuts(model), (std::vector<double>{100, 125, 155, 162, 72, 15, 0}));
  EXPECT_EQ(err, path +
                     ": imported 7 layers as model \"small_dag\", forward 7.125 ms and backward "
                     "12.75 ms per micro-batch of 32, 6.383 KiB of parameters, largest cut 162 B, "
                     "4 micro-batches\n");
}

TEST(ImportCliTest, ReadsStandardInputAndTakesName) {
  std::string out, err;
  const std::string text = read("tests/data/pipedream/small_dag.txt").text;
  EXPECT_EQ(run_cli({"-q", "import", "pipedream", "-", "--batch-size", "2"}, text, &out, &err),
            "0");
  EXPECT_EQ(err, "");
  EXPECT_EQ(read_model(io::source_from_text("out.json", out)).name, "");
  EXPECT_EQ(run_cli({"import", "pipedream", "-", "--batch-size", "2", "--name", "tiny"}, text, &out,
                    &err),
            "0");
  EXPECT_EQ(read_model(io::source_from_text("out.json", out)).name, "tiny");
  EXPECT_EQ(err.rfind("<stdin>: imported 7 layers as model \"tiny\", ", 0), 0U) << err;
}

TEST(ImportCliTest, WritesOutputFile) {
  std::string out, err;
  const auto path = std::filesystem::temp_directory_path() / "pipeplan_import_test_model.json";
  std::filesystem::remove(path);
  EXPECT_EQ(run_cli({"import", "pipedream", kSourceDir + "/tests/data/pipedream/small_dag.txt",
                     "--batch-size", "32", "-o", path.string()},
                    "", &out, &err),
            "0");
  EXPECT_EQ(out, "");
  Model model = read_model(io::read_source(path.string(), std::cin));
  EXPECT_EQ(model.layers.size(), 7U);
  std::filesystem::remove(path);
}

TEST(ImportCliTest, RejectsBadUsage) {
  std::string out, err;
  EXPECT_EQ(run_cli({"import", "pipedream", "-"}, "", &out, &err), "2");
  EXPECT_EQ(run_cli({"import", "pipedream", "-", "--batch-size", "0"}, "", &out, &err), "2");
  EXPECT_EQ(err,
            "pipeplan: error: --batch-size: must be an integer >= 1, got \"0\" (see pipeplan "
            "--help)\n");
  EXPECT_EQ(
      run_cli({"import", "pipedream", "-", "--batch-size", "99999999999999999999"}, "", &out, &err),
      "2");
  EXPECT_EQ(run_cli({"import", "pipedream", "-", "--batch-size", "1.5"}, "", &out, &err), "2");
  EXPECT_EQ(run_cli({"import", "pipedream", "-", "--batch-size", "1", "--micro-batches", "0"}, "",
                    &out, &err),
            "2");
  EXPECT_EQ(
      run_cli({"import", "pipedream", "-", "--batch-size", "1", "--name", ""}, "", &out, &err),
      "2");
  EXPECT_EQ(run_cli({"import", "-", "--batch-size", "1"}, "", &out, &err), "2");
  EXPECT_EQ(run_cli({"import"}, "", &out, &err), "2");
}

TEST(ImportCliTest, ReportsInputErrorsOnOneLine) {
  std::string out, err;
  EXPECT_EQ(run_cli({"import", "pipedream", "-", "--batch-size", "1"},
                    node_line("a") + "\ta -- b\n", &out, &err),
            "3");
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "pipeplan: error: <stdin>: line 2: edge names unknown node \"b\"\n");
}

// The shipped examples: each model is what the importer makes of its source with the
// options listed in examples/README.md, and every model and topology passes validation.
struct ExampleModel {
  const char* file;
  const char* source;
  std::int64_t batch_size;
  std::int64_t micro_batches;
  const char* name;
};

const ExampleModel kExampleModels[] = {
    {"vgg16.json", "pipedream/vgg16_graph.txt", 128, 8, "vgg16"},
    {"resnet50.json", "pipedream/resnet50_graph.txt", 128, 8, "resnet50"},
    {"gnmt.json", "pipedream/gnmt_graph.txt", 64, 16, "gnmt"},
    {"bert-24.json", "dapple/bert-24-pbs-6.txt", 6, 16, "bert-24"},
    {"bert-48.json", "dapple/bert-48-pbs-2.txt", 2, 32, "bert-48"},
    {"amoeba-36.json", "dapple/amoeba-36-pbs-1.txt", 1, 32, "amoeba-36"},
};

TEST(ExamplesTest, ModelsAreUpToDateWithTheirSources) {
  for (const ExampleModel& example : kExampleModels) {
    SCOPED_TRACE(example.file);
    Model model = import_pipedream(read(std::string("examples/models/sources/") + example.source),
                                   example.batch_size, example.micro_batches);
    model.name = example.name;
    const io::Source shipped = read(std::string("examples/models/") + example.file);
    EXPECT_EQ(io::parse_json(shipped).root,
              io::parse_json(io::source_from_text("x", io::dump_json(model_to_json(model)))).root);
    EXPECT_NO_THROW(read_model(shipped));
  }
}

TEST(ExamplesTest, TopologiesAreValid) {
  const std::pair<const char*, int> topologies[] = {
      {"two-node-nvlink-ib.json", 16}, {"dgx1-hybrid-mesh.json", 8}, {"pcie-server.json", 8},
      {"heterogeneous.json", 10},      {"geo-distributed.json", 8},
  };
  for (const auto& [file, gpus] : topologies) {
    SCOPED_TRACE(file);
    topology::Topology topo =
        topology::read_topology(read(std::string("examples/topologies/") + file));
    EXPECT_EQ(topo.size(), gpus);
  }
}

TEST(ExamplesTest, DgxHybridMeshRoutesUnlinkedPairsOverNvlink) {
  topology::Topology topo =
      topology::read_topology(read("examples/topologies/dgx1-hybrid-mesh.json"));
  const int gpu0 = *topo.index_of("gpu0");
  EXPECT_EQ(topo.pair(gpu0, *topo.index_of("gpu3")).bandwidth_bytes_per_s, 50e9);
  EXPECT_EQ(topo.pair(gpu0, *topo.index_of("gpu1")).bandwidth_bytes_per_s, 25e9);
  // No NVLink between gpu0 and gpu5, but the double links form the ring
  // 0-3-2-1-5-6-7-4-0, so the widest path has 50 GB/s over 4 hops (0-3-2-1-5 wins the tie
  // with 0-4-7-6-5 by GPU ids) and 4 x 2 us of latency.
  const topology::PairCost far = topo.pair(gpu0, *topo.index_of("gpu5"));
  EXPECT_EQ(far.bandwidth_bytes_per_s, 50e9);
  EXPECT_EQ(far.hops, 4);
  EXPECT_NEAR(far.latency_ms, 0.008, 1e-15);
}

}  // namespace
}  // namespace pipeplan::model
