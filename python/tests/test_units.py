"""pipeplan_torch without processes: factories, transfers, the GELU guard, the probe's fit,
the watchdog's message, the command line's errors, update operations (one rank in this
process) and the package's metadata."""

import datetime
import importlib
import os
import shutil
import stat
import tempfile
import tomllib
import unittest

import torch
import torch.distributed as dist

from pipeplan_torch import common, launch, probe, run

from . import support

torch.set_num_threads(1)
FIXTURE = os.path.join(support.FIXTURES, "not_separable.py")


class FactoryTest(unittest.TestCase):
    def test_loads_a_file_and_a_module(self):
        model, make_micro_batch, loss_fn = common.build(support.GPT)
        self.assertEqual(common.layer_names(model),
                         ["embed", "block0", "block1", "block2", "block3", "head"])
        model2, _, _ = common.build("tests.fixtures.not_separable:build")
        self.assertEqual(common.layer_names(model2), ["first", "normalise", "last"])

    def test_same_weights_every_time(self):
        first, _, _ = common.build(support.CNN)
        second, _, _ = common.build(support.CNN)
        for (name, a), (_, b) in zip(first.named_parameters(), second.named_parameters()):
            self.assertTrue(torch.equal(a, b), name)

    def test_errors(self):
        cases = [
            ("gpt.py", common.UsageError,
             "gpt.py: expected MODULE:FACTORY, for example examples/torch/gpt.py:build"),
            ("missing/model.py:build", common.InputError,
             "missing/model.py:build: no such file missing/model.py"),
            ("no_such_module_xyz:build", common.InputError,
             "no_such_module_xyz:build: cannot import no_such_module_xyz: "
             "No module named 'no_such_module_xyz'"),
            (FIXTURE + ":absent", common.InputError,
             f"{FIXTURE}:absent: {FIXTURE} has no function absent"),
            (FIXTURE + ":not_sequential", common.InputError,
             f"{FIXTURE}:not_sequential: must return (torch.nn.Sequential, make_micro_batch, "
             "loss_fn)"),
        ]
        for spec, error, message in cases:
            with self.subTest(spec=spec):
                with self.assertRaises(error) as caught:
                    common.build(spec)
                self.assertEqual(str(caught.exception), message)

    def test_a_broken_file_or_factory_is_one_line(self):
        # Issue 34: a factory file that does not compile and a factory that raises are input
        # errors of one line, not tracebacks.
        with tempfile.TemporaryDirectory() as folder:
            broken = os.path.join(folder, "broken.py")
            with open(broken, "w") as out:
                out.write("def build(:\n    pass\n")
            raising = os.path.join(folder, "raising.py")
            with open(raising, "w") as out:
                out.write("def build():\n    raise RuntimeError('no weights here')\n")
            cases = [
                (broken + ":build",
                 f"{broken}:build: {broken} does not load: SyntaxError: invalid syntax "
                 "(broken.py, line 1)"),
                (raising + ":build",
                 f"{raising}:build: the factory raised RuntimeError: no weights here"),
            ]
            for spec, message in cases:
                with self.subTest(spec=spec):
                    with self.assertRaises(common.InputError) as caught:
                        common.build(spec)
                    self.assertEqual(str(caught.exception), message)


class WriteJsonTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="pipeplan_torch-test-")

    def tearDown(self):
        shutil.rmtree(self.folder)

    def test_a_pipe_is_written_not_replaced(self):
        fifo = os.path.join(self.folder, "out")
        os.mkfifo(fifo)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that the writer need not wait
        try:
            common.write_json(fifo, {"a": 1})
            self.assertEqual(os.read(reader, 1000), b'{\n  "a": 1\n}\n')
        finally:
            os.close(reader)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))

    def test_a_link_keeps_pointing_at_its_target(self):
        target = os.path.join(self.folder, "target.json")
        link = os.path.join(self.folder, "link.json")
        with open(target, "w", encoding="utf-8") as f:
            f.write("old")
        os.chmod(target, 0o600)
        os.symlink(target, link)
        common.write_json(link, [1])
        self.assertTrue(os.path.islink(link))
        with open(target, encoding="utf-8") as f:
            self.assertEqual(f.read(), "[\n  1\n]\n")
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o600)
        self.assertEqual(sorted(os.listdir(self.folder)), ["link.json", "target.json"])

    def test_a_directory_is_refused(self):
        with self.assertRaises(common.OutputError) as caught:
            common.write_json(self.folder, [])
        self.assertEqual(str(caught.exception), f"{self.folder}: cannot write: is a directory")


class TransferTest(unittest.TestCase):
    def test_header_round_trip(self):
        for t in (torch.zeros(4, 16, 32), torch.zeros(3, dtype=torch.float64),
                  torch.zeros(2, 3, 4, 5, dtype=torch.int64)):
            self.assertEqual(run.from_header(run.header(t)), (t.dtype, list(t.shape)))

    def test_header_refuses_unknown_dtypes(self):
        with self.assertRaises(common.InputError) as caught:
            run.header(torch.zeros(2, dtype=torch.complex64))
        self.assertEqual(str(caught.exception),
                         "cannot send a torch.complex64 tensor of 1 dimensions between stages")

    def test_tags_are_distinct(self):
        tags = {run.tag(kind, m, part) for kind in ("activation", "gradient")
                for m in range(64) for part in (0, 1)}
        self.assertEqual(len(tags), 2 * 64 * 2)


class GeluTest(unittest.TestCase):
    """Debian's torch 1.13 computes wrong float32 GELU gradients from a non-contiguous
    incoming gradient; backward_from_received must not."""

    def setUp(self):
        generator = torch.Generator().manual_seed(5)
        self.x = torch.randn(4, 8, 16, generator=generator)
        self.gradient = torch.randn(4, 16, 8, generator=generator).transpose(1, 2)
        self.assertFalse(self.gradient.is_contiguous())
        x64 = self.x.double().requires_grad_()
        torch.nn.functional.gelu(x64).backward(self.gradient.double())
        self.expected = x64.grad

    def input_gradient(self, backward):
        x = self.x.clone().requires_grad_()
        backward(torch.nn.functional.gelu(x), self.gradient)
        return x.grad

    def test_received_gradient_made_contiguous(self):
        got = self.input_gradient(run.backward_from_received)
        self.assertLess((got.double() - self.expected).abs().max().item(), 1e-5)
        raw = self.input_gradient(torch.autograd.backward)
        if (raw.double() - self.expected).abs().max().item() < 1e-5:
            self.skipTest(f"torch {torch.__version__} computes GELU gradients right from "
                          "non-contiguous gradients too, so this test cannot tell")


class ProbeFitTest(unittest.TestCase):
    def test_recovers_latency_and_bandwidth(self):
        sizes = list(probe.SIZES_BYTES)
        latency, bandwidth = 3e-5, 2e9
        round_trips = [2 * latency + s / bandwidth for s in sizes]
        got_latency, got_bandwidth = probe.one_way(sizes, round_trips)
        self.assertAlmostEqual(got_latency, latency, delta=1e-12)
        self.assertAlmostEqual(got_bandwidth / bandwidth, 1.0, delta=1e-9)

    def test_flat_sweep_keeps_largest_throughput(self):
        sizes = [1000, 2000]
        self.assertEqual(probe.one_way(sizes, [1e-3, 1e-3]), (0.0005, 2e6 / 1.0))


class WatchdogTest(unittest.TestCase):
    ranks = [
        {"rank": 0, "gpu": "cpu0", "stage": 0, "operations": [
            {"op": "forward", "micro_batch": 0},
            {"op": "recv", "kind": "gradient", "micro_batch": 0, "peer": 1}]},
        {"rank": 1, "gpu": "cpu1", "stage": 1, "operations": [
            {"op": "recv", "kind": "activation", "micro_batch": 1, "peer": 0},
            {"op": "allreduce", "ranks": [1, 2]}]},
        {"rank": 2, "gpu": "cpu2", "stage": 1, "operations": []},
    ]

    def test_names_every_waiting_rank(self):
        table = [0.0] * 9
        progress = [launch.Progress(table, r) for r in range(3)]
        progress[0].wait(1)
        progress[1].wait(0)
        progress[2].busy(0)
        describe = run.Describe(self.ranks)
        self.assertIsNone(launch.stuck_message(table, 3, 5.0, describe))
        table[2] -= 6.0  # rank 0 has waited 6 s
        self.assertEqual(
            launch.stuck_message(table, 3, 5.0, describe),
            "watchdog: no progress in 5 s: rank 0 (cpu0, stage 0) waits in operation 1, recv "
            "gradient micro-batch 0 from rank 1; rank 1 (cpu1, stage 1) waits in operation 0, "
            "recv activation micro-batch 1 from rank 0")

    def test_busy_and_outside_ranks_never_stuck(self):
        table = [0.0] * 9
        progress = [launch.Progress(table, r) for r in range(3)]
        progress[0].busy(0)
        for r in range(3):
            table[r * 3 + 2] -= 100.0
        self.assertIsNone(launch.stuck_message(table, 3, 5.0, run.Describe(self.ranks)))


class CommandLineTest(unittest.TestCase):
    def assert_fails(self, argv, code, message, **env):
        result = support.tool(*argv, **env)
        self.assertEqual(result.returncode, code, result.stderr)
        self.assertEqual(result.stderr, f"pipeplan_torch: error: {message}\n")

    def test_usage_errors(self):
        self.assert_fails(["run", "p.json"], 2,
                          "the following arguments are required: MODEL, TOPO, --module")
        self.assert_fails(["probe", "--ranks", "1", "-o", "t.json"], 2,
                          "--ranks must be >= 2 (a probe measures pairs)")

    def test_arguments_are_checked_before_anything_starts(self):
        # Issue 34: found in milliseconds as usage errors, not after ranks start.
        cases = [
            (["run", "p.json", "m.json", "t.json", "--module", support.GPT, "--timeout", "nan"],
             "argument --timeout: must be a finite number above 0, got 'nan'"),
            (["probe", "--ranks", "2", "--timeout", "-1", "-o", "t.json"],
             "argument --timeout: must be a finite number above 0, got '-1'"),
            (["probe", "--ranks", "2", "--memory", "16 Gib", "-o", "t.json"],
             "argument --memory: must be a size with a unit of B, kB, MB, GB, TB, KiB, MiB, "
             "GiB or TiB, got '16 Gib'"),
            (["probe", "--ranks", "2", "--threads", "0", "-o", "t.json"],
             "argument --threads: must be an integer from 1, got '0'"),
            (["profile", support.GPT, "--micro-batches", "0", "-o", "m.json"],
             "argument --micro-batches: must be an integer from 1, got '0'"),
            (["profile", support.GPT, "--batch-size", "0x8", "-o", "m.json"],
             "argument --batch-size: must be an integer from 1, got '0x8'"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                self.assert_fails(argv, 2, message)

    def test_a_micro_batch_the_first_layer_refuses(self):
        # Issue 34: one line naming the factory and the layer, exit 3, no model file written.
        with tempfile.TemporaryDirectory() as folder:
            factory = os.path.join(folder, "shapes.py")
            with open(factory, "w") as out:
                out.write("import torch\n\n\ndef build():\n"
                          "    model = torch.nn.Sequential(torch.nn.Linear(4, 3))\n"
                          "    return (model, lambda size, i: (torch.randn(size, 5), None),\n"
                          "            lambda y, t: y.sum())\n")
            output = os.path.join(folder, "model.json")
            result = support.tool("profile", factory + ":build", "--repeat", "1", "--warmup",
                                  "0", "-o", output)
            self.assertEqual(result.returncode, 3, result.stderr)
            self.assertTrue(result.stderr.startswith(
                f"pipeplan_torch: error: {factory}:build: layer 0 refused the micro-batch: "
                "RuntimeError: "), result.stderr)
            self.assertEqual(result.stderr.count("\n"), 1, result.stderr)
            self.assertFalse(os.path.exists(output))

    def test_a_pipeplan_bin_that_is_not_a_program(self):
        self.assert_fails(["run", "p.json", "m.json", "t.json", "--module", support.GPT], 2,
                          "$PIPEPLAN_BIN names /nonexistent/pipeplan, which is not an "
                          "executable file", PIPEPLAN_BIN="/nonexistent/pipeplan")

    def test_missing_binary(self):
        self.assert_fails(["run", "p.json", "m.json", "t.json", "--module", support.GPT], 2,
                          "cannot find pipeplan: set $PIPEPLAN_BIN or put pipeplan on PATH",
                          PIPEPLAN_BIN="", PATH="/nonexistent")

    def test_export_errors_pass_through(self):
        missing = os.path.join(support.FIXTURES, "no-such-plan.json")
        result = support.tool("run", missing, missing, missing, "--module", support.GPT)
        self.assertEqual(result.returncode, 3)
        self.assertTrue(result.stderr.startswith(f"pipeplan_torch: error: {missing}: cannot "
                                                 "read the plan"), result.stderr)

    def test_v2_plans_are_refused(self):
        folder = tempfile.mkdtemp(prefix="pipeplan_torch-test-")
        self.addCleanup(shutil.rmtree, folder)
        stages = [{"index": 0, "first_layer": 0, "last_layer": 1, "gpus": ["a", "b"]},
                  {"index": 1, "first_layer": 2, "last_layer": 3, "gpus": ["c", "d"],
                   "tensor_parallel": 2}]
        plan = support.write_json(os.path.join(folder, "plan.json"),
                                  {"schema": "pipeplan/plan/v2", "stages": stages})
        self.assert_fails(["run", plan, plan, plan, "--module", support.GPT], 3,
                          f"{plan}: /stages/1/tensor_parallel: run executes plans without "
                          "tensor parallelism, and stage 1 has tensor-parallel degree 2")
        stages[1]["tensor_parallel"] = 1
        stages[0]["recompute"] = True
        support.write_json(plan, {"schema": "pipeplan/plan/v2", "stages": stages})
        self.assert_fails(["run", plan, plan, plan, "--module", support.GPT], 3,
                          f"{plan}: /stages/0/recompute: run executes plans without "
                          "recomputation, and stage 0 recomputes its forward")
        # A v1 plan passes this check (and fails later, for its missing model).
        stages[0]["recompute"] = False
        run.check_runnable({"stages": stages}, plan)

    def test_sharded_updates_are_refused(self):
        plan = {"optimizer": "sharded", "stages": [{"tensor_parallel": 1, "recompute": False}],
                "schedule": {"updates": [{"stage": 0, "gpu": "a", "start_ms": 1, "end_ms": 2}]}}
        with self.assertRaises(common.InputError) as caught:
            run.check_runnable(plan, "p.json")
        self.assertEqual(str(caught.exception),
                         "p.json: /optimizer: run executes update tasks with a replicated "
                         "optimizer (every replica steps all its parameters), and the plan's "
                         "optimizer is sharded")
        self.assertEqual(caught.exception.code, 3)
        # A sharded optimizer without update tasks changes only the plan's memory; a replicated
        # optimizer with updates runs.
        run.check_runnable(dict(plan, schedule={}), "p.json")
        run.check_runnable(dict(plan, optimizer="replicated"), "p.json")

    def test_fully_sharded_plans_are_refused(self):
        plan = {"optimizer": "fully-sharded", "stages": [{"tensor_parallel": 1}], "schedule": {}}
        with self.assertRaises(common.InputError) as caught:
            run.check_runnable(plan, "p.json")
        self.assertEqual(str(caught.exception),
                         "p.json: /optimizer: run all-reduces each stage's gradients at the end "
                         "of the iteration, and the plan is fully sharded (each layer's weights "
                         "gathered and its gradients reduce-scattered as it computes)")
        self.assertEqual(caught.exception.code, 3)
        with self.assertRaises(common.InputError) as caught:
            run.check_runnable(dict(plan, optimizer="sharded-gradients"), "p.json")
        self.assertEqual(str(caught.exception),
                         "p.json: /optimizer: run all-reduces each stage's gradients at the end "
                         "of the iteration, and the plan shards its gradients (each layer's "
                         "gradients reduce-scattered as it computes)")
        self.assertEqual(caught.exception.code, 3)


class OrderCheckTest(unittest.TestCase):
    """Issue 34: an order that would fail once running is refused before any rank starts."""

    @staticmethod
    def two_ranks():
        def op(name, m, kind=None, peer=None):
            out = {"op": name, "micro_batch": m}
            if kind:
                out.update({"kind": kind, "peer": peer})
            return out
        first = [op("forward", 0), op("send", 0, "activation", 1),
                 op("recv", 0, "gradient", 1), op("backward", 0)]
        last = [op("recv", 0, "activation", 0), op("forward", 0), op("backward", 0),
                op("send", 0, "gradient", 0)]
        return [{"rank": 0, "operations": first}, {"rank": 1, "operations": last}]

    def assert_refused(self, ranks, message):
        with self.assertRaises(common.InputError) as caught:
            run.check_order(ranks, "plan.json")
        self.assertEqual(str(caught.exception), message)

    def test_a_plan_order_passes(self):
        run.check_order(self.two_ranks(), "plan.json")

    def test_a_gradient_before_the_forward(self):
        ranks = self.two_ranks()
        ops = ranks[0]["operations"]
        ops.insert(0, ops.pop(2))
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 0 (recv gradient "
                            "of micro-batch 0): comes before this rank's forward of micro-batch 0")

    def test_a_receive_nobody_sends(self):
        ranks = self.two_ranks()
        del ranks[0]["operations"][1]
        self.assert_refused(ranks, "plan.json: ranks export: rank 1, operation 0 (recv "
                            "activation of micro-batch 0): rank 0 never sends it")

    def test_a_send_nobody_receives(self):
        # The runner waits for every send at the end of the iteration: forever.
        ranks = self.two_ranks()
        del ranks[1]["operations"][0]
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 1 (send "
                            "activation of micro-batch 0): rank 1 never receives it")

    def test_a_forward_before_its_activation_arrives(self):
        ranks = self.two_ranks()
        ops = ranks[1]["operations"]
        ops[0], ops[1] = ops[1], ops[0]
        self.assert_refused(ranks, "plan.json: ranks export: rank 1, operation 0 (forward of "
                            "micro-batch 0): comes before this rank's receive of micro-batch "
                            "0's activation")

    def test_a_backward_before_its_gradient_arrives(self):
        ranks = self.two_ranks()
        ops = ranks[0]["operations"]
        ops[2], ops[3] = ops[3], ops[2]
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 2 (backward of "
                            "micro-batch 0): comes before this rank's receive of micro-batch "
                            "0's gradient")

    def test_a_second_forward(self):
        ranks = self.two_ranks()
        ranks[0]["operations"].insert(1, {"op": "forward", "micro_batch": 0})
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 1 (forward of "
                            "micro-batch 0): comes after this rank's forward of micro-batch 0")

    def test_a_second_backward(self):
        ranks = self.two_ranks()
        ranks[1]["operations"].append({"op": "backward", "micro_batch": 0})
        self.assert_refused(ranks, "plan.json: ranks export: rank 1, operation 4 (backward of "
                            "micro-batch 0): comes after this rank's backward of micro-batch 0")

    def test_an_activation_sent_after_the_backward(self):
        ranks = self.two_ranks()
        ops = ranks[0]["operations"]
        ops.append(ops.pop(1))
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 3 (send "
                            "activation of micro-batch 0): comes after this rank's backward of "
                            "micro-batch 0")

    def test_a_gradient_received_after_the_backward(self):
        ranks = self.two_ranks()
        ranks[0]["operations"].append(dict(ranks[0]["operations"][2]))
        ranks[1]["operations"].append(dict(ranks[1]["operations"][3]))
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 4 (recv "
                            "gradient of micro-batch 0): comes after this rank's backward of "
                            "micro-batch 0")

    def test_a_gradient_sent_twice(self):
        ranks = self.two_ranks()
        ranks[0]["operations"].insert(2, dict(ranks[0]["operations"][2]))
        ranks[1]["operations"].append(dict(ranks[1]["operations"][3]))
        self.assert_refused(ranks, "plan.json: ranks export: rank 1, operation 4 (send "
                            "gradient of micro-batch 0): comes after this rank's send of "
                            "micro-batch 0's gradient, with no receive of its activation "
                            "between")

    def test_a_gradient_sent_without_an_activation(self):
        ranks = self.two_ranks()
        ranks[0]["operations"].append({"op": "send", "kind": "gradient", "micro_batch": 0,
                                       "peer": 1})
        ranks[1]["operations"].append({"op": "recv", "kind": "gradient", "micro_batch": 0,
                                       "peer": 0})
        self.assert_refused(ranks, "plan.json: ranks export: rank 0, operation 4 (send "
                            "gradient of micro-batch 0): this rank never receives micro-batch "
                            "0's activation")

    def test_malformed_entries(self):
        # check_operations refuses them alike, whichever of the two runs first.
        two = self.two_ranks()
        for ranks, message in (
                ({"ranks": []}, 'must be a list of at least one rank, got {"ranks": []}'),
                ([], "must be a list of at least one rank, got []"),
                ([two[0], 5], "entry 1: must be an object, got 5"),
                ([{"operations": []}], 'entry 0: missing required key "rank"'),
                ([two[0], dict(two[1], rank=0)], "entry 1: rank must be 1 (ranks are numbered "
                 "by their place in the list), got 0 (entry 0's rank too)"),
                ([{"rank": True, "operations": []}], "entry 0: rank must be 0 (ranks are "
                 "numbered by their place in the list), got true"),
                ([{"rank": 0}], 'rank 0: missing required key "operations"'),
                ([{"rank": 0, "operations": {"op": "forward"}}], "rank 0: operations must be a "
                 'list, got {"op": "forward"}')):
            for check in (run.check_order, run.check_operations):
                with self.subTest(check=check.__name__, message=message):
                    with self.assertRaises(common.InputError) as caught:
                        check(ranks, "plan.json")
                    self.assertEqual(str(caught.exception),
                                     "plan.json: ranks export: " + message)

    def test_a_send_before_its_computation(self):
        ranks = self.two_ranks()
        ops = ranks[1]["operations"]
        ops.insert(2, ops.pop(3))
        self.assert_refused(ranks, "plan.json: ranks export: rank 1, operation 2 (send gradient "
                            "of micro-batch 0): comes before this rank's backward of "
                            "micro-batch 0")


class VersionThreeTest(unittest.TestCase):
    """check_runnable refuses what spec 9.2 adds, which run cannot execute yet."""

    def refused(self, plan, message):
        with self.assertRaises(common.InputError) as caught:
            run.check_runnable(plan, "p.json")
        self.assertEqual(str(caught.exception), message)
        self.assertEqual(caught.exception.code, 3)

    def test_split_backward(self):
        stages = [{"gpus": ["a"]}, {"gpus": ["b"]}]
        self.refused({"split_backward": True, "stages": stages},
                     "p.json: /split_backward: run executes whole backwards, and the plan splits "
                     "every backward into its input-gradient and weight-gradient halves (I and W)")
        run.check_runnable({"split_backward": False, "stages": stages}, "p.json")

    def test_context_parallel(self):
        stages = [{"gpus": ["a", "b"]}]
        self.refused({"context_parallel": 2, "stages": stages},
                     "p.json: /context_parallel: run executes plans without context "
                     "parallelism, and the plan splits each sequence over 2 GPUs")
        run.check_runnable({"context_parallel": 1, "stages": stages}, "p.json")

    def test_stages_sharing_gpus(self):
        self.refused({"stages": [{"gpus": ["a", "b"]}, {"gpus": ["c", "d"]},
                                 {"gpus": ["a", "b"]}]},
                     "p.json: /stages/2/gpus: run executes one stage per GPU, and stage 2 runs "
                     "on the GPUs of stage 0")
        run.check_runnable({"stages": [{"gpus": ["a", "b"]}, {"gpus": ["b", "a"]}]}, "p.json")


def entry(rank, *ops):
    return {"rank": rank, "operations": [{"op": op, "micro_batch": 0} for op in ops]}


class OperationsTest(unittest.TestCase):
    """check_operations: what run refuses in a ranks export before any rank starts."""

    def refused(self, ranks, message):
        with self.assertRaises(common.InputError) as caught:
            run.check_operations(ranks, "p.json")
        self.assertEqual(str(caught.exception), message)

    def test_updates_last_on_every_rank_run(self):
        run.check_operations([entry(0, "forward", "backward", "update"),
                              entry(1, "forward", "backward", "allreduce", "update")], "p.json")
        run.check_operations([entry(0, "forward", "backward"), entry(1, "forward")], "p.json")

    def test_unknown_operation(self):
        self.refused([entry(0, "forward", "backward"), entry(1, "forward", "prefetch")],
                     "p.json: ranks export: rank 1, operation 1: run does not know the "
                     "operation 'prefetch'")

    def test_an_operation_that_is_not_an_object(self):
        self.refused([entry(0, "forward"), {"rank": 1, "operations": [{"op": "forward"}, 3]}],
                     "p.json: ranks export: rank 1, operation 1 (3): must be an object")
        self.refused([{"rank": 0, "operations": [{"op": 10 ** 5000}]}],
                     "p.json: ranks export: rank 0, operation 0: run does not know the "
                     "operation an integer of more than 40 digits")

    def test_update_not_last(self):
        self.refused([entry(0, "forward", "update", "backward")],
                     "p.json: ranks export: rank 0, operation 1: an update must be the rank's "
                     "last operation (one optimizer step per iteration)")
        self.refused([entry(0, "forward", "backward", "update", "update")],
                     "p.json: ranks export: rank 0, operation 2: an update must be the rank's "
                     "last operation (one optimizer step per iteration)")

    def test_updates_on_some_ranks_only(self):
        self.refused([entry(0, "forward", "backward", "update"), entry(1, "backward")],
                     "p.json: ranks export: rank 1 has no update operation and rank 0 has one: "
                     "a plan's optimizer steps are all there or absent")


class UpdateOperationTest(unittest.TestCase):
    """Rank.iteration in this process, as the only rank of a gloo group: the plan's update
    operation steps the optimizer where it stands and is timed; without one the iteration
    leaves the parameters alone (rank_main steps after it)."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="pipeplan_torch-test-")
        store = dist.FileStore(os.path.join(cls.folder, "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=60))

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        shutil.rmtree(cls.folder, ignore_errors=True)

    def rank(self, *ops):
        model, _, _ = common.build(support.GPT)
        names = common.layer_names(model)
        operations = [{"op": "forward", "micro_batch": 0}, {"op": "backward", "micro_batch": 0}]
        operations += [{"op": op} for op in ops]
        entry = {"rank": 0, "gpu": "cpu0", "stage": 0, "operations": operations,
                 "layers": {"first": 0, "last": len(names) - 1, "names": names},
                 "data_parallel_group": {"ranks": [0]}}
        payload = {"micro_batches": 1, "batch_size": 2, "factory": support.GPT,
                   "model": "m.json", "lr": 0.5}
        return run.Rank(entry, payload, torch.device("cpu"), torch.float64)

    def run_once(self, rank):
        before = rank.parameters()
        figures = rank.iteration(0, launch.Progress([0.0] * 3, 0))
        return before, figures

    def test_update_steps_at_its_place(self):
        rank = self.rank("update")
        self.assertTrue(rank.steps_in_plan)
        before, figures = self.run_once(rank)
        self.assertIsNotNone(figures.update)
        self.assertGreater(figures.update, 0.0)
        gradients, after = rank.gradients(), rank.parameters()
        changed = 0
        for name, value in before.items():
            torch.testing.assert_close(after[name], value - 0.5 * gradients[name],
                                       rtol=0, atol=1e-12)
            changed += bool(gradients[name].abs().max() > 0)
        self.assertGreater(changed, 0)

    def test_without_update_the_iteration_does_not_step(self):
        rank = self.rank()
        self.assertFalse(rank.steps_in_plan)
        before, figures = self.run_once(rank)
        self.assertIsNone(figures.update)
        after = rank.parameters()
        for name, value in before.items():
            self.assertTrue(torch.equal(after[name], value), name)


class PackageTest(unittest.TestCase):
    """python/pyproject.toml: the entry point names the command line's main, the package
    carries its py.typed marker and its version."""

    def setUp(self):
        with open(os.path.join(support.PYTHON_DIR, "pyproject.toml"), "rb") as f:
            self.project = tomllib.load(f)

    def test_entry_point_is_main(self):
        scripts = self.project["project"]["scripts"]
        self.assertEqual(list(scripts), ["pipeplan-torch"])
        module_name, _, function = scripts["pipeplan-torch"].partition(":")
        main = getattr(importlib.import_module(module_name), function)
        from pipeplan_torch import __main__
        self.assertIs(main, __main__.main)

    def test_typed_and_versioned(self):
        import pipeplan_torch
        folder = os.path.dirname(pipeplan_torch.__file__)
        self.assertTrue(os.path.isfile(os.path.join(folder, "py.typed")))
        self.assertIn("py.typed", self.project["tool"]["setuptools"]["package-data"][
            "pipeplan_torch"])
        self.assertEqual(self.project["tool"]["setuptools"]["dynamic"]["version"],
                         {"attr": "pipeplan_torch.__version__"})
        self.assertRegex(pipeplan_torch.__version__, r"^[0-9]+\.[0-9]+\.[0-9]+$")


if __name__ == "__main__":
    unittest.main()
