"""End to end on CPU with gloo: profile the example models, probe 2- and 4-rank topologies,
plan with the pipeplan binary ($PIPEPLAN_BIN), run with --check; a corrupted ranks order
meets the watchdog; a model whose gradients are not separable over samples fails --check."""

import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import unittest
import uuid

import torch

from pipeplan_torch import common

from . import support

torch.set_num_threads(1)
MICRO_BATCHES = 4
BATCH_SIZE = 2


def profile(factory, output):
    result = support.tool("profile", factory, "--batch-size", str(BATCH_SIZE), "--warmup", "1",
                          "--repeat", "3", "--threads", "1", "--micro-batches",
                          str(MICRO_BATCHES), "-o", output)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    with open(output, encoding="utf-8") as f:
        return json.load(f)


def probe(ranks, output, *flags):
    result = support.tool("probe", "--ranks", str(ranks), "--repeat", "2", "-o", output, *flags)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    with open(output, encoding="utf-8") as f:
        return json.load(f)


class EndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="pipeplan_torch-test-")
        cls.gpt_model = cls.path("gpt.model.json")
        cls.gpt = profile(support.GPT, cls.gpt_model)
        cls.topo2 = cls.path("topo2.json")
        cls.topo4 = cls.path("topo4.json")
        cls.probed = {2: probe(2, cls.topo2), 4: probe(4, cls.topo4, "--memory", "8 GiB")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.folder, name)

    def run_checked(self, name, model, topology, factory, *plan_flags):
        """Plans, runs one iteration with --check, and checks the report against the plan."""
        plan_file = self.path(f"{name}.plan.json")
        plan = support.plan(model, topology, plan_file, *plan_flags)
        report_file = self.path(f"{name}.report.json")
        result = support.tool("run", plan_file, model, topology, "--module", factory,
                              "--iterations", "1", "--check", "--timeout", "120",
                              "-o", report_file)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(report_file, encoding="utf-8") as f:
            report = json.load(f)
        self.assertTrue(report["check"]["passed"], report["check"])
        self.assertLessEqual(report["check"]["max_relative_difference"], 1e-9)
        model_object, _, _ = common.build(factory)
        per_layer = [len(list(layer.parameters())) for layer in model_object.children()]
        expected = sum(len(stage["gpus"]) * sum(per_layer[stage["first_layer"]:
                                                          stage["last_layer"] + 1])
                       for stage in plan["stages"])
        self.assertEqual(report["check"]["gradients_compared"], expected)
        self.assertEqual(report["check"]["parameters_compared"], expected)
        self.assertEqual(report["estimate_ms"], plan["iteration_ms"])
        self.assertEqual([r["gpu"] for r in report["ranks"]],
                         [g for stage in plan["stages"] for g in stage["gpus"]])
        # An update task per GPU in the plan (spec 8.3): its measured and planned time.
        updates = {u["gpu"]: u["end_ms"] - u["start_ms"]
                   for u in plan["schedule"].get("updates", [])}
        for r in report["ranks"]:
            if updates:
                self.assertGreater(r["update_ms"], 0)
                self.assertAlmostEqual(r["planned_update_ms"], updates[r["gpu"]], places=5)
            else:
                self.assertEqual((r["update_ms"], r["planned_update_ms"]), (None, None))
        self.assertIn(f"check passed: the loss, {expected} gradients and {expected} parameters "
                      "after the optimizer step equal", result.stderr)
        return plan

    def test_profile_is_a_valid_model(self):
        result = support.validate(self.gpt_model)
        self.assertEqual(result.returncode, 0, result.stderr)
        model, _, _ = common.build(support.GPT)
        layers = self.gpt["layers"]
        self.assertEqual([layer["name"] for layer in layers], common.layer_names(model))
        hidden = torch.zeros(BATCH_SIZE, 16, 32)  # the example's context and width
        for layer, module in zip(layers, model.children()):
            self.assertEqual(layer["parameter_bytes"],
                             sum(p.numel() * p.element_size() for p in module.parameters()))
            self.assertGreater(layer["forward_ms"], 0)
            self.assertGreater(layer["backward_ms"], 0)
        self.assertEqual([layer["activation_bytes"] for layer in layers],
                         [hidden.numel() * 4] * 5 + [0])
        # A block saves at least its input (for the first LayerNorm's backward), the embedding
        # only the token indices.
        for layer in layers[1:5]:
            self.assertGreater(layer["stash_bytes"], hidden.numel() * 4)
        self.assertEqual(layers[0]["stash_bytes"], BATCH_SIZE * 16 * 8)
        self.assertEqual(self.gpt["profile"],
                         {"batch_size": BATCH_SIZE, "device": "cpu (1 thread)"})

    def test_probed_topologies_are_valid(self):
        for ranks, topology in ((2, self.topo2), (4, self.topo4)):
            result = support.validate(self.gpt_model, topology)
            self.assertEqual(result.returncode, 0, result.stderr)
            probed = self.probed[ranks]
            self.assertEqual([g["id"] for g in probed["gpus"]], [f"cpu{i}" for i in range(ranks)])
            self.assertEqual([g.get("memory") for g in probed["gpus"]],
                             [None if ranks == 2 else "8 GiB"] * ranks)
            self.assertEqual(len(probed["links"]), ranks * (ranks - 1) // 2)
            for link in probed["links"]:
                self.assertGreater(link["bandwidth"], 0)
                self.assertGreaterEqual(link["latency"], 0)
                self.assertEqual(len(link["x-measured"]), 2)

    def test_two_ranks_list_schedule(self):
        self.run_checked("two-list", self.gpt_model, self.topo2, support.GPT)

    def test_two_ranks_1f1b(self):
        plan = self.run_checked("two-1f1b", self.gpt_model, self.topo2, support.GPT,
                                "--planner", "uniform", "--schedule", "1f1b")
        self.assertEqual(len(plan["stages"]), 2)

    def test_four_ranks_gpipe(self):
        plan = self.run_checked("four-gpipe", self.gpt_model, self.topo4, support.GPT,
                                "--planner", "uniform", "--schedule", "gpipe")
        self.assertEqual(len(plan["stages"]), 4)

    def test_cnn_two_ranks(self):
        model = self.path("cnn.model.json")
        profile(support.CNN, model)
        plan = self.run_checked("cnn", model, self.topo2, support.CNN, "--planner", "uniform")
        self.assertEqual(len(plan["stages"]), 2)

    def replicated_inputs(self):
        """The profiled transformer with fixed times (so that the plan does not depend on this
        machine's load), on two pairs of GPUs whose pairs are joined by a slow network and
        whose memory does not hold the whole model: two stages of two replicas each."""
        model = json.loads(json.dumps(self.gpt))
        for layer in model["layers"]:
            ends = layer["name"] in ("embed", "head")
            layer["forward_ms"], layer["backward_ms"] = (1, 2) if ends else (4, 8)
        topology = {"name": "two pairs", "nodes": [{
            "name": "n", "count": 2, "gpus": 2, "memory": "1 MB",
            "link": {"bandwidth": "10 GB/s", "latency": "10 us"}}],
            "network": {"bandwidth": "10 MB/s", "latency": "100 us"}}
        return (support.write_json(self.path("fixed.model.json"), model),
                support.write_json(self.path("pairs.topo.json"), topology))

    def test_replicated_stages(self):
        model, topology = self.replicated_inputs()
        for schedule in ("list", "1f1b"):
            with self.subTest(schedule=schedule):
                plan = self.run_checked(f"replicated-{schedule}", model, topology, support.GPT,
                                        "--schedule", schedule)
                self.assertEqual([len(s["gpus"]) for s in plan["stages"]], [2, 2])

    def test_update_operations(self):
        """Layers with update times (spec 8.1) give a v2 plan whose ranks end with an update
        operation (after the AllReduce of a replicated stage): run steps the optimizer there,
        and --check compares every parameter after the step with single-process SGD, so an
        update skipped (or a second step) fails it."""
        pipelined = json.loads(json.dumps(self.gpt))
        fixed_file, pairs = self.replicated_inputs()
        with open(fixed_file, encoding="utf-8") as f:
            replicated = json.load(f)
        cases = (("update-1f1b", pipelined, self.topo2, [1, 1],
                  ("--planner", "uniform", "--schedule", "1f1b")),
                 # spp would shard the optimizer (faster); the runner steps replicated ones.
                 ("update-replicated", replicated, pairs, [2, 2], ("--optimizer", "replicated")))
        for name, model, topology, replicas, flags in cases:
            with self.subTest(name=name):
                for layer in model["layers"]:
                    layer["update_ms"] = 0.25
                model_file = support.write_json(self.path(f"{name}.model.json"), model)
                plan = self.run_checked(name, model_file, topology, support.GPT, *flags)
                self.assertEqual(plan["schema"], "pipeplan/plan/v2")
                self.assertEqual(len(plan["schedule"]["updates"]),
                                 sum(len(stage["gpus"]) for stage in plan["stages"]))
                self.assertEqual([len(stage["gpus"]) for stage in plan["stages"]], replicas)

    def test_corrupted_order_meets_the_watchdog(self):
        plan_file = self.path("corrupt.plan.json")
        support.plan(self.gpt_model, self.topo2, plan_file, "--planner", "uniform")
        ranks = json.loads(support.subprocess.run(
            [support.pipeplan(), "export", plan_file, "--format", "ranks", "--model",
             self.gpt_model, "--topology", self.topo2], capture_output=True, text=True,
            check=True).stdout)
        # Rank 1 receives micro-batch 2 first; rank 0 produces it only after the gradient of
        # micro-batch 0, so rank 0 blocks at its first receive (sends are posted without
        # waiting) and rank 1 at the moved one.
        first_recv = next(i for i, op in enumerate(ranks[0]["operations"]) if op["op"] == "recv")
        self.assertEqual(ranks[0]["operations"][first_recv]["kind"], "gradient")
        tag = uuid.uuid4().hex
        result = support.tool(
            "run", plan_file, self.gpt_model, self.topo2, "--module", support.GPT,
            "--timeout", "3", "--iterations", "1",
            PIPEPLAN_BIN=os.path.join(support.FIXTURES, "corrupt_ranks.py"),
            REAL_PIPEPLAN_BIN=support.pipeplan(), MOVE_MICRO_BATCH="2", PIPEPLAN_TORCH_TEST=tag)
        self.assertEqual(result.returncode, 1)
        op = ranks[0]["operations"][first_recv]
        self.assertEqual(
            result.stderr,
            "pipeplan_torch: error: watchdog: no progress in 3 s: rank 0 (cpu0, stage 0) waits "
            f"in operation {first_recv}, recv gradient micro-batch {op['micro_batch']} from "
            "rank 1; rank 1 (cpu1, stage 1) waits in operation 0, recv activation micro-batch "
            "2 from rank 0\n")
        self.assertEqual(processes_tagged(tag), [])

    def test_under_torchrun(self):
        """The ranks of a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as
        torchrun does): rank 0 reports, the other rank prints nothing."""
        plan_file = self.path("torchrun.plan.json")
        support.plan(self.gpt_model, self.topo2, plan_file, "--planner", "uniform")
        report_file = self.path("torchrun.report.json")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        ranks = [support.subprocess.Popen(
            [sys.executable, "-m", "pipeplan_torch", "run", plan_file, self.gpt_model,
             self.topo2, "--module", support.GPT, "--iterations", "1", "--check", "-o",
             report_file], stdout=support.subprocess.PIPE, stderr=support.subprocess.PIPE,
            text=True, env=support.env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
            for r in range(2)]
        outputs = [p.communicate(timeout=300) for p in ranks]
        self.assertEqual([p.returncode for p in ranks], [0, 0], outputs)
        self.assertIn("check passed", outputs[0][1])
        self.assertEqual(outputs[1], ("", ""))
        with open(report_file, encoding="utf-8") as f:
            report = json.load(f)
        self.assertTrue(report["check"]["passed"])
        self.assertEqual(len(report["ranks"]), 2)

    def not_separable_plan(self):
        """The fixture model, profiled and planned in two stages on two ranks, once."""
        model = self.path("not_separable.model.json")
        plan_file = self.path("not_separable.plan.json")
        if not os.path.exists(plan_file):
            profile(os.path.join(support.FIXTURES, "not_separable.py") + ":build", model)
            support.plan(model, self.topo2, plan_file, "--planner", "uniform")
        return model, plan_file

    def test_a_failing_layer_ends_the_run(self):
        model, plan_file = self.not_separable_plan()
        tag = uuid.uuid4().hex
        result = support.tool(
            "run", plan_file, model, self.topo2, "--module",
            os.path.join(support.FIXTURES, "not_separable.py") + ":fails_in_the_last_layer",
            "--iterations", "1", PIPEPLAN_TORCH_TEST=tag)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stderr.splitlines()[-1],
                         "pipeplan_torch: error: rank 1: RuntimeError: the last layer fails")
        self.assertIn("Traceback", result.stderr)
        self.assertEqual(processes_tagged(tag), [])

    def test_a_factory_that_raises_is_one_line_before_any_rank(self):
        # Issue 34: not one traceback per rank.
        model, plan_file = self.not_separable_plan()
        tag = uuid.uuid4().hex
        factory = os.path.join(support.FIXTURES, "not_separable.py") + ":raises"
        result = support.tool("run", plan_file, model, self.topo2, "--module", factory,
                              "--iterations", "1", PIPEPLAN_TORCH_TEST=tag)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertEqual(result.stderr, f"pipeplan_torch: error: {factory}: the factory raised "
                         "RuntimeError: no weights here\n")
        self.assertEqual(processes_tagged(tag), [])

    def test_check_names_the_first_gradient_that_differs(self):
        factory = os.path.join(support.FIXTURES, "not_separable.py") + ":build"
        model, plan_file = self.not_separable_plan()
        report_file = self.path("not_separable.report.json")
        result = support.tool("run", plan_file, model, self.topo2, "--module", factory,
                              "--iterations", "1", "--check", "-o", report_file)
        self.assertEqual(result.returncode, 6, result.stderr)
        last = result.stderr.splitlines()[-1]
        self.assertRegex(last, "^" + re.escape(
            "pipeplan_torch: error: --check: the gradient of first.weight on rank 0 (cpu0, "
            "stage 0) differs from single-process float64 training: relative difference ")
            + r"[0-9.e+-]+ > 1e-09$")
        with open(report_file, encoding="utf-8") as f:
            check = json.load(f)["check"]
        self.assertFalse(check["passed"])
        self.assertEqual(last, "pipeplan_torch: error: --check: " + check["mismatch"])
        # The forward is the identity, so the loss agrees.
        self.assertAlmostEqual(check["loss"] / check["reference_loss"], 1.0, delta=1e-9)


def processes_tagged(tag):
    """Processes whose environment holds PIPEPLAN_TORCH_TEST=tag (the run's children inherit
    it): none may outlive the run."""
    found = []
    needle = f"PIPEPLAN_TORCH_TEST={tag}".encode()
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(environ.split("/")[2]))
        except OSError:
            pass
    return found


if __name__ == "__main__":
    unittest.main()
