"""Self-tests of run_docs.py: the docs harness fails on every class of defect it is there for.

Issue 35 names what a documented command gets wrong: a wrong exit code, a quoted error message
the binary does not print (docs/errors.md quoting `1e+10` where the binary prints `1e+08`), a
quoted figure of an old plan (`iteration 875.5 ms` where the plan now takes 812.9 ms). Each
test here writes a small Markdown file with one such defect, runs the harness on it with the
binary under test ($PIPEPLAN_BIN, which ctest sets) and asserts that it fails, naming the file,
the line and the mismatch; the same file without the defect passes. Run from this folder:
`PIPEPLAN_BIN=build/dev/pipeplan python3 -m unittest -v test_run_docs`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_docs  # noqa: E402  (the harness beside this file)

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "run_docs.py"

PLAN_COMMAND = ("pipeplan plan examples/models/bert-48.json "
                "examples/topologies/two-node-nvlink-ib.json -o bert-48.plan.json")
SUMMARY = """\
2 stages on 16 of 16 GPUs, 32 micro-batches, planner spp, schedule list
  stage 0: layers 0-30 (node1 .. node31) on 8 GPUs [node0/gpu0, node0/gpu1, node0/gpu2, \
node0/gpu3, ... node0/gpu7], F+B 193.4 ms, allreduce 17.38 ms
  stage 1: layers 31-52 (node32 .. node53) on 8 GPUs [node1/gpu0, node1/gpu1, node1/gpu2, \
node1/gpu3, ... node1/gpu7], F+B 150.4 ms, allreduce 12.42 ms
  iteration {iteration} ms: 1.00x the partition bound (812.9 ms), 1.18x the any-plan bound \
(687.5 ms)
  planned in … ms (reading … ms, writing … ms; ordering … ms (…), DP … ms (…), scheduling … ms \
(…) summed over threads)
"""
# The inputs beyond the pipedream planner's search-step limit, as docs/errors.md makes them.
LIMIT_INPUTS = """\
```sh run
chain() { python3 -c 'import json, sys; print(json.dumps({"layers": [{"forward_ms": 1, \
"backward_ms": 2, "activation_bytes": 1000}] * int(sys.argv[1])}))' "$1"; }
chain 2000 > layers-2000.json
echo '{"nodes": [{"name": "box", "gpus": 64, "memory": "80 GiB", "speed": 1, "link": \
{"bandwidth": "100 GB/s", "latency": "2 us"}}]}' > gpus-64.json
```
"""
LIMIT_MESSAGE = ("pipeplan: error: cannot plan 2000 layers on 64 GPUs with 64 micro-batches: "
                 "the pipedream planner would take about 1.64e+10 steps, more than its limit of "
                 "{limit}; use fewer layers, GPUs or micro-batches (see \"Limits\" in "
                 "docs/errors.md)")


def binary() -> Path:
    """The pipeplan under test."""
    name = os.environ.get("PIPEPLAN_BIN")
    if not name:
        raise unittest.SkipTest("PIPEPLAN_BIN is not set (ctest sets it to the built pipeplan)")
    return Path(name).resolve()


class HarnessTest(unittest.TestCase):
    """Markdown files written into a temporary folder, checked by run_docs.check_file."""

    def setUp(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="run-docs-test-")
        self.addCleanup(self.folder.cleanup)

    def check(self, text: str, catalogue: bool = False) -> run_docs.Report:
        path = Path(self.folder.name) / "doc.md"
        path.write_text(text, encoding="utf-8")
        return run_docs.check_file(path, ROOT, binary(), catalogue, timeout_s=120,
                                   shown_path="doc.md")

    def assert_fails(self, text: str, line: int, *fragments: str,
                     catalogue: bool = False) -> None:
        """The harness reports exactly one failure, at `line`, whose message has every
        fragment."""
        report = self.check(text, catalogue)
        self.assertEqual(len(report.failures), 1, "\n".join(map(str, report.failures)))
        failure = str(report.failures[0])
        self.assertTrue(failure.startswith(f"doc.md:{line}: "), failure)
        for fragment in fragments:
            self.assertIn(fragment, failure)

    def assert_passes(self, text: str, commands: int, catalogue: bool = False) -> None:
        report = self.check(text, catalogue)
        self.assertEqual(report.failures, [], "\n".join(map(str, report.failures)))
        self.assertEqual(report.commands, commands)


class ExitCodes(HarnessTest):
    def test_a_script_that_fails_where_the_doc_says_it_succeeds(self) -> None:
        self.assert_fails("# Plan\n\n```sh run\npipeplan plan examples/models/bert-48.json\n```\n",
                          4, "`pipeplan plan examples/models/bert-48.json` exited with 2, but "
                          "the doc says the block ends with exit code 0",
                          "TOPO is required")

    def test_a_transcript_whose_command_exits_with_another_code(self) -> None:
        # errors.md's usage block, with the code of an input error.
        doc = ("```console run exit=3\n$ pipeplan plan examples/models/bert-48.json "
               "examples/topologies/pcie-server.json --fast\n"
               "pipeplan: error: The following argument was not expected: --fast "
               "(see pipeplan --help)\n```\n")
        self.assert_fails(doc, 2, "exited with 2, but the doc says 3")
        self.assert_passes(doc.replace("exit=3", "exit=2"), 1)

    def test_a_block_that_stops_before_its_last_command(self) -> None:
        self.assert_fails("```sh run exit=2\npipeplan plan\necho never\n```\n", 2,
                          "`pipeplan plan` exited with 2 and stopped the block before its last "
                          "command (line 3)")


class QuotedErrorMessages(HarnessTest):
    def doc(self, limit: str) -> str:
        return (LIMIT_INPUTS + "\n```console run exit=4\n$ pipeplan plan layers-2000.json "
                "gpus-64.json --planner pipedream --micro-batches 64\n"
                + LIMIT_MESSAGE.format(limit=limit) + "\n```\n")

    def test_a_limit_the_binary_prints_otherwise(self) -> None:
        # errors.md once quoted 1e+10 where the binary prints 1e+08.
        self.assert_fails(self.doc("1e+10"), 9, LIMIT_MESSAGE.format(limit="1e+10"),
                          "but the command printed:\n    " + LIMIT_MESSAGE.format(limit="1e+08"))
        self.assert_passes(self.doc("1e+08"), 4)

    def test_a_message_in_a_case_folder_of_the_corpus(self) -> None:
        doc = ("```console run exit=3 dir=tests/data/bad\n"
               "validate-negative-time$ pipeplan validate model.json\n"
               "pipeplan: error: model.json: /layers/0/forward_ms: must be a finite number >= 0, "
               "got -1\n```\n")
        self.assert_fails(doc, 3, "in tests/data/bad/validate-negative-time/", "got -0.5")
        self.assert_passes(doc.replace("got -1", "got -0.5"), 1)

    def test_a_quoted_error_without_its_command(self) -> None:
        message = "pipeplan: error: cannot write standard output"
        self.assert_fails(f"```\n{message}\n```\n", 2, "quoted without the command",
                          catalogue=True)
        self.assert_passes(f"```text norun: needs a closed terminal\n{message}\n```\n", 0,
                           catalogue=True)
        self.assert_passes(f"```console run exit=5\n$ pipeplan plan examples/models/bert-24.json "
                           f"examples/topologies/pcie-server.json >&-\n{message}\n```\n", 1,
                           catalogue=True)

    def test_a_command_that_prints_more_than_the_doc_quotes(self) -> None:
        self.assert_fails("```console run exit=2\n$ pipeplan plan examples/models/bert-48.json; "
                          "pipeplan plan\npipeplan: error: TOPO is required (see pipeplan "
                          "--help)\n```\n", 3, "printed a line the doc does not quote",
                          "MODEL is required")


class QuotedFigures(HarnessTest):
    def doc(self, iteration: str) -> str:
        return (f"Plan BERT-48:\n\n```sh run\n{PLAN_COMMAND}\n```\n\nIt prints:\n\n"
                f"```text output\n{SUMMARY.format(iteration=iteration)}```\n")

    def test_an_old_plan_in_a_summary(self) -> None:
        # formats.md and the README once showed a plan of 875.5 ms; it takes 812.9 ms now.
        self.assert_fails(self.doc("875.5"), 13, "iteration 875.5 ms: 1.00x",
                          "printed:\n      iteration 812.9 ms: 1.00x")
        self.assert_passes(self.doc("812.9"), 1)

    def test_a_line_that_wildcards_skip_to_but_never_find(self) -> None:
        doc = (f"```sh run\n{PLAN_COMMAND}\n```\n\n```text output\n2 stages on 16 of 16 GPUs, "
               "…\n…\n  iteration 875.5 ms: …\n…\n```\n")
        self.assert_fails(doc, 8, "iteration 875.5 ms", "printed no line like it")
        self.assert_passes(doc.replace("875.5", "812.9"), 1)


class Markers(HarnessTest):
    def test_a_misspelt_marker(self) -> None:
        self.assert_fails("```sh run exti=2\ntrue\n```\n", 1, "unknown marker 'exti=2'")

    def test_an_output_block_without_its_script(self) -> None:
        self.assert_fails("```text output\nsomething\n```\n", 1, "an `output` block follows")

    def test_a_reasonless_norun(self) -> None:
        self.assert_fails("```console norun:\n$ torchrun\n```\n", 1, "needs a reason")

    def test_a_transcript_line_before_any_command(self) -> None:
        self.assert_fails("```console run\noutput\n$ true\n```\n", 2, "no command above it")

    def test_unmarked_blocks_are_not_run(self) -> None:
        self.assert_passes("```sh\nfalse\n```\n\n```console\n$ false\nwhatever\n```\n", 0)


class Matching(unittest.TestCase):
    def test_wildcards(self) -> None:
        match = run_docs.output_matches
        self.assertTrue(match(["planned in … ms"], ["planned in 17.3 ms"]))
        self.assertFalse(match(["planned in … ms"], ["planned in 17.3 s"]))
        self.assertTrue(match(["a", "…", "z"], ["a", "b", "c", "z"]))
        self.assertTrue(match(["a", "…", "z"], ["a", "z"]))
        self.assertFalse(match(["a", "…", "z"], ["a", "b"]))
        self.assertTrue(match(["a  ", ""], ["a", "", ""]))  # trailing blanks and empty lines
        self.assertFalse(match(["a"], ["a", "b"]))
        self.assertTrue(match(["x (see …) [y]"], ["x (see *.json) [y]"]))  # no regex syntax

    def test_fences(self) -> None:
        fences = run_docs.parse_fences("* item\n\n  ```sh run\n  echo hi\n  ```\n\n````\n```\n"
                                       "````\n")
        self.assertEqual([(f.line, f.info, f.lines) for f in fences],
                         [(3, "sh run", [(4, "echo hi")]), (7, "", [(8, "```")])])


class CommandLine(unittest.TestCase):
    def test_exit_status(self) -> None:
        with tempfile.TemporaryDirectory(prefix="run-docs-test-") as folder:
            good = Path(folder) / "good.md"
            good.write_text("```sh run\npipeplan --version\n```\n")
            bad = Path(folder) / "bad.md"
            bad.write_text("```sh run\npipeplan --no-such-option\n```\n")
            common = [sys.executable, str(HARNESS), "--pipeplan", str(binary())]
            passed = subprocess.run(common + [str(good)], capture_output=True, text=True)
            self.assertEqual(passed.returncode, 0, passed.stdout + passed.stderr)
            self.assertIn("1 documented command in 1 file: all behave as documented",
                          passed.stdout)
            failed = subprocess.run(common + [str(good), str(bad)], capture_output=True,
                                    text=True)
            self.assertEqual(failed.returncode, 1, failed.stdout + failed.stderr)
            self.assertIn(f"{bad}:2: `pipeplan --no-such-option` exited with 2", failed.stdout)


if __name__ == "__main__":
    unittest.main()
