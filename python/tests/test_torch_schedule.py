"""The torch schedule checker (pipeplan_torch.torch_schedule_check) on torch's own test assets and
on schedules that break each rule. Needs no torch."""

import os
import subprocess
import sys
import tempfile
import unittest

from pipeplan_torch import torch_schedule_check as tsc
from pipeplan_torch.torch_schedule_check import ScheduleError, check_schedule


def torchtitan_2_rank() -> str:
    """pytorch/torchtitan test/assets/2-rank.csv (frameworks.md 2.1), rebuilt in full: 2 ranks,
    4 stages (rank 0 holds 0 and 2), 8 micro-batches; the second stage of a rank first runs
    each I and its W two micro-batches at a time, then the first stage likewise, in turn."""
    rows = []
    for rank in range(2):
        low, high = rank, rank + 2
        row = [f"{low}F{m}" for m in range(8)] + [f"{high}F{m}" for m in range(8)]
        for pair in range(4):
            for stage in (high, low):
                for m in (2 * pair, 2 * pair + 1):
                    row += [f"{stage}I{m}", f"{stage}W{m}"]
        rows.append(",".join(row))
    return "\n".join(rows) + "\n"


# The asset as its file reads (pytorch/torchtitan, test/assets/2-rank.csv), row 0.
TORCHTITAN_2_RANK_ROW_0 = (
    "0F0,0F1,0F2,0F3,0F4,0F5,0F6,0F7,2F0,2F1,2F2,2F3,2F4,2F5,2F6,2F7,2I0,2W0,2I1,2W1,0I0,0W0,"
    "0I1,0W1,2I2,2W2,2I3,2W3,0I2,0W2,0I3,0W3,2I4,2W4,2I5,2W5,0I4,0W4,0I5,0W5,2I6,2W6,2I7,2W7,"
    "0I6,0W6,0I7,0W7")

# pytorch/torchtitan test/assets/4-rank.csv: 4 ranks, 8 stages (rank k holds k and k + 4),
# 6 micro-batches, a zero-bubble order whose W run late.
TORCHTITAN_4_RANK = """\
0F0,0F1,0F2,0F3,0F4,0F5,4F0,4F1,4F2,4F3,4F4,4F5,4I0,4W0,4I1,4W1,4I2,4W2,0I0,4I3,0I1,0W0,0I2,4I4,0W1,0I3,4I5,0W2,0W3,0I4,0W4,4W3,0I5,0W5,4W4,4W5
1F0,1F1,1F2,1F3,1F4,1F5,5F0,5F1,5F2,5F3,5F4,5F5,5I0,5W0,5I1,5W1,5I2,5W2,1I0,5I3,1I1,1W0,1I2,5I4,1W1,1I3,5I5,1W2,1W3,1I4,1W4,5W3,1I5,1W5,5W4,5W5
2F0,2F1,2F2,2F3,2F4,2F5,6F0,6F1,6F2,6F3,6I0,6F4,6I1,6F5,6I2,6W0,2I0,6I3,2I1,2W0,2I2,6I4,2W1,2I3,6I5,2W2,2W3,2I4,2W4,6W1,2I5,2W5,6W2,6W3,6W4,6W5
3F0,3F1,3F2,3F3,3F4,3F5,7F0,7I0,7F1,7I1,7F2,7I2,7F3,3I0,7I3,3I1,7F4,3I2,7I4,7F5,3I3,7I5,3W0,3W1,3I4,3W2,3W3,3I5,3W4,3W5,7W0,7W1,7W2,7W3,7W4,7W5
"""  # noqa: E501

# frameworks.md 2.1's 1F1B for 2 ranks, 2 stages and 4 micro-batches.
ONE_F_ONE_B = "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n"


class TorchAssetsTest(unittest.TestCase):
    """Schedules torch's and torchtitan's tests load pass."""

    def test_the_rebuilt_2_rank_asset_is_the_file(self):
        self.assertEqual(torchtitan_2_rank().splitlines()[0], TORCHTITAN_2_RANK_ROW_0)

    def test_2_rank_interleaved_zero_bubble(self):
        checked = check_schedule(torchtitan_2_rank(), ranks=2, stages=4, micro_batches=8)
        self.assertEqual(checked.stage_to_rank, {0: 0, 2: 0, 1: 1, 3: 1})
        # Every F of stages 0-2 and every I of stages 1-3 crosses ranks: a send and a receive.
        lowered = sum(len(row) for row in checked.lowered.values())
        self.assertEqual(lowered, 4 * 8 * 3 + 2 * (3 * 8 + 3 * 8))
        self.assertGreater(checked.steps, 48)

    def test_4_rank_interleaved_zero_bubble(self):
        checked = check_schedule(TORCHTITAN_4_RANK, ranks=4, stages=8, micro_batches=6)
        self.assertEqual(checked.stage_to_rank, {s: s % 4 for s in range(8)})

    def test_1f1b(self):
        checked = check_schedule(ONE_F_ONE_B, ranks=2, stages=2, micro_batches=4)
        self.assertEqual(checked.lowered[0][:3], [tsc.Action(0, "F", 0), tsc.Action(0, "SEND_F", 0),
                                                  tsc.Action(0, "F", 1)])
        # The defaults read the sizes from the file.
        self.assertEqual(check_schedule(ONE_F_ONE_B).stage_to_rank, {0: 0, 1: 1})

    def test_v_shape_with_adjacent_stages_on_one_rank(self):
        # ZB-V's placement on 2 ranks: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; the
        # boundary 1-2 needs no send, its readiness comes from the same rank's actions.
        text = ("0F0,0F1,3F0,3I0,3W0,3F1,3I1,3W1,0I0,0W0,0I1,0W1\n"
                "1F0,1F1,2F0,2F1,2I0,2W0,1I0,1W0,2I1,2W1,1I1,1W1\n")
        checked = check_schedule(text, ranks=2, stages=4, micro_batches=2)
        sends = [a for row in checked.lowered.values() for a in row
                 if a.computation_type.startswith("SEND")]
        self.assertEqual(len(sends), 2 * 2 * 2)  # 0->1 and 2->3 forward, 3->2 and 1->0 back


class RefusalTest(unittest.TestCase):
    """Every rule, broken once: the rule is named and torch's message given."""

    def refused(self, text, rule, message, **sizes):
        with self.assertRaises(ScheduleError) as caught:
            check_schedule(text, **sizes)
        self.assertEqual((caught.exception.rule, caught.exception.message), (rule, message))
        self.assertIn(rule, tsc.RULES)

    def test_missing_forward(self):
        self.refused("0F0,0F1,0B0,0B1\n1F0,1B0\n", "forward-count",
                     "Got 1 F microbatches for stage 1, expected 2",
                     ranks=2, stages=2, micro_batches=2)

    def test_backward_before_forward(self):
        self.refused("0F0,0B1,0F1,0B0\n1F0,1F1,1B0,1B1\n", "backward-before-forward",
                     "Rank 0, step 1: Running Full Backward for stage 0, microbatch 1 without "
                     "first running Forward", ranks=2, stages=2, micro_batches=2)
        self.refused("0I0,0F0,0W0\n", "backward-before-forward",
                     "Rank 0, step 0: Running Backward Input for stage 0, microbatch 0 without "
                     "first running Forward")

    def test_weight_before_input(self):
        self.refused("0F0,0W0,0I0\n", "weight-before-input",
                     "Rank 0, step 1: Running Backward Weight for stage 0, microbatch 0 without "
                     "first running Backward Input")
        # The B/W files of torch before PR #138886 (B then the input gradient) fail the same way.
        self.refused("0F0,0B0,0W0\n", "weight-before-input",
                     "Rank 0, step 2: Running Backward Weight for stage 0, microbatch 0 without "
                     "first running Backward Input")

    def test_stage_on_two_ranks(self):
        self.refused("0F0,0B0\n0F1,0B1\n", "stage-on-two-ranks",
                     "Rank 1, step 0: Stage 0 is assigned to both rank 1 and rank 0",
                     ranks=2, stages=1, micro_batches=2)

    def test_deadlocking_order(self):
        # Each row is valid alone, but rank 0 waits for micro-batch 0's gradient before it sends
        # micro-batch 1's activation, which rank 1 waits for first.
        self.refused("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", "deadlock",
                     "Malformed compute schedule, can't schedule sends/recvs")
        # The same orders with the forwards in a compatible order lower.
        check_schedule("0F0,0F1,0B1,0B0\n1F0,1B0,1F1,1B1\n")

    def test_counts(self):
        self.refused("0F0,0F1,0B0\n", "backward-count",
                     "Invalid backward microbatches for stage 0: expected 2 total backwards, but "
                     "got B=1, I=0, W=0")
        self.refused("0F0,0I0\n", "weight-count",
                     "Invalid backward microbatches for stage 0: I and W must have equal counts, "
                     "but got I=1, W=0")
        self.refused("0F0,0B0\n", "forward-count",
                     "Got 1 F microbatches for stage 0, expected 2", micro_batches=2)

    def test_ranks(self):
        self.refused(ONE_F_ONE_B, "rank-count",
                     "Schedule has incorrect number of ranks - expected 3, actual 2", ranks=3)
        self.refused("0F0,0B0\n", "stage-out-of-range",
                     "Rank 0, step 0: stage 0 is not below num_stages 0", stages=0)

    def test_empty_rank(self):
        # Valid by _validate_schedule (no stage lives on rank 1), refused by the lowering.
        self.refused("0F0,0B0\n\n", "empty-rank", "rank=1, len(compute_actions[rank])=0",
                     ranks=2, stages=1, micro_batches=1)

    def test_compute_only(self):
        self.refused("0F0,0SEND_F0,0B0\n", "compute-only",
                     "Expected compute-only schedule but found communication action '0SEND_F0' "
                     "at rank 0, position 1.")

    def test_parse(self):
        self.refused("0F0,x\n", "parse",
                     "Invalid action string: x, should be formatted as "
                     "[stage][action type][(microbatch)] e.g. 2F0")
        self.refused("(0F0;1B0)FOO\n", "parse", "Invalid computation type FOO")
        # torch matches at the start and strips spaces: these parse.
        self.assertEqual(tsc.action_from_str(" 2F10x"), tsc.Action(2, "F", 10))
        self.assertIsNone(tsc.action_from_str("  "))
        self.assertEqual(tsc.action_from_str("1UNSHARD"), tsc.Action(1, "UNSHARD", None))

    def test_simulation_refuses_what_it_cannot_run(self):
        with self.assertRaises(ScheduleError) as caught:
            tsc.simulate_comms_compute({0: [tsc.Action(0, "RECV_F", 0)]}, lambda s: 0, 2)
        self.assertEqual(caught.exception.rule, "not-progressing")


class CommandLineTest(unittest.TestCase):
    def run_check(self, text, *args):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write(text)
            done = subprocess.run([sys.executable, "-m", "pipeplan_torch.torch_schedule_check",
                                   path, *args], capture_output=True, text=True,
                                  cwd=os.path.join(os.path.dirname(__file__), ".."))
            return done.returncode, (done.stdout + done.stderr).replace(path, "s.csv")

    def test_exit_codes(self):
        # 16 compute actions, and a send and a receive for each of the 4 activations and the 4
        # gradients.
        code, out = self.run_check(ONE_F_ONE_B, "--micro-batches", "4")
        self.assertEqual(code, 0)
        self.assertRegex(out, r"^s\.csv: ok: 2 ranks, 2 stages, lowered to 32 actions, "
                              r"\d+ simulated steps\n$")
        self.assertEqual(self.run_check(ONE_F_ONE_B, "--ranks", "3"),
                         (1, "s.csv: rank-count: Schedule has incorrect number of ranks - "
                             "expected 3, actual 2\n"))


if __name__ == "__main__":
    unittest.main()
