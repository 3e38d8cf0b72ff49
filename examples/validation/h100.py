#!/usr/bin/env python3
"""Regenerates the H100 tables of docs/validation.md: published runs on H100 GPUs.

For every run in examples/validation/h100_runs.json this writes the run's model (its transformer
description, the published micro-batch size fixed) and its cluster (a topology of catalogue
nodes, `pipeplan topology types`), plans the published configuration with `pipeplan plan
--planner megatron` (tensor, pipeline, data and context degrees, recomputation, optimizer
sharding, global batch, interleaved 1F1B with the run's model chunks per GPU) and lets `spp`
plan the same GPUs and global batch freely, as validate.py does for the A100-era runs (whose
helpers this script uses). It writes two tables, BF16 runs and FP8 runs, each row with the
measured and estimated seconds per iteration and the error, and below each the median
absolute error against the targets, the weak-scaling check of every series and the sources.

A run that used context parallelism is planned with `--context-parallel C` when the binary has
that option (`pipeplan plan --help`), else listed as needing it, without an estimate; a run on
more GPUs than pipeplan plans (131,072, on a cluster of identical nodes) is listed likewise.

Usage: examples/validation/h100.py [--estimates-only] [PIPEPLAN [OUTPUT]]
  PIPEPLAN  the binary (default: $PIPEPLAN, else the newest build/*/pipeplan)
  OUTPUT    the Markdown file to update (default: docs/validation.md); only the part between
            the `h100.py: begin` and `h100.py: end` markers is replaced, then the prose that
            quotes it (examples/prose/prose.py).
  --estimates-only  plan the published configurations alone (about a minute) and keep the spp
            column OUTPUT holds; without it spp plans every row too (a quarter of an hour).

Python 3 standard library only. Output is deterministic: the same binary gives the same bytes.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import validate

DATA = os.path.join(validate.ROOT, "examples", "validation", "h100_runs.json")
BEGIN = "<!-- h100.py: begin (generated; edit examples/validation/, not this part) -->"
END = "<!-- h100.py: end -->"
MAX_GPUS = 131072  # pipeplan plans clusters of nodes up to this size (issue 33 item 2)
TARGET_MEDIAN, TARGET_EACH, TARGET_SCALING = 0.08, 0.15, 0.05
TABLES = [("bf16", "BF16 runs"), ("fp8", "FP8 runs (reported apart: not part of the targets)")]


def has_context_parallel(binary):
    """Whether the binary plans context parallelism (`--context-parallel` in its help)."""
    done = subprocess.run([binary, "plan", "--help"], capture_output=True, text=True)
    return "--context-parallel" in done.stdout


def topology(system, nodes):
    """`nodes` catalogue nodes of `system` (h100_runs.json "systems"); fields beside the
    node's `type` win over the catalogue's."""
    node = dict(system["node"])
    return {"schema": "pipeplan/topology/v1",
            "name": "%d x %s" % (nodes, node["type"]),
            "nodes": [dict(name="node", count=nodes, **node)]}


def model_system(system):
    """What validate.model reads of a system: the GPU the description is costed for."""
    return {"gpu": system.get("gpu", "H100-SXM")}


def context(run):
    return run.get("context_parallel", 1)


def why_not_planned(run, gpus, cp_available):
    """Why a run is listed without an estimate, or None when it is planned."""
    reasons = []
    if gpus > MAX_GPUS:
        reasons.append("needs more than %s GPUs" % format(MAX_GPUS, ","))
    if context(run) > 1 and not cp_available:
        reasons.append("needs context parallelism")
    return ", ".join(reasons) or None


def context_options(run):
    return ["--context-parallel", str(context(run))] if context(run) > 1 else []


def configuration(run):
    """The `t/p/d/c` cell of a run: its tensor, pipeline, data and context degrees."""
    return "%d/%d/%d/%d" % (run["tensor_parallel"], run["pipeline_parallel"],
                            run["data_parallel"], context(run))


def recompute_text(run):
    desc = run["transformer"]
    return run["recompute"] + (", SP" if desc.get("sequence_parallel") else "")


class Table:
    """The rows of one precision and what is said below them."""

    def __init__(self, title):
        self.title = title
        self.rows, self.errors, self.series, self.by_source = [], [], {}, {}
        self.unplanned, self.notes, self.parts = [], [], []

    def add(self, run, gpus, source_index, measured_ms, megatron, spp_text, failures):
        estimate, error_text = "", ""
        if megatron:
            error = megatron["iteration_ms"] / measured_ms - 1
            self.errors.append((run["id"], error))
            parts = composition(megatron)
            self.parts.append("| %s | %.2f | %s | %s | %.2f |" % (
                run["id"], run["measured_s"], validate.seconds(megatron["iteration_ms"]),
                " | ".join(validate.seconds(ms) for ms in parts), measured_ms / parts[0]))
            self.by_source.setdefault(run["source"], []).append(error)
            estimate, error_text = validate.seconds(megatron["iteration_ms"]), \
                validate.percent(error)
        elif failures.get("reason"):
            estimate = failures["reason"]
            self.unplanned.append((run["id"], failures["reason"]))
        else:
            estimate = "refused"
            self.notes.append("%s, megatron: %s" % (run["id"], failures["megatron"]))
        if run.get("weak_scaling"):
            self.series.setdefault(run["weak_scaling"], []).append(
                (run["id"], gpus, measured_ms, megatron["iteration_ms"] if megatron else None))
        if failures.get("spp"):
            self.notes.append(failures["spp"])
        self.rows.append("| %s [%d] | %s | %d | %s | %d | %d | %d | %d | %s | %.2f | %s | %s |"
                         " %s |" % (run["id"], source_index, run["model"], gpus,
                                    configuration(run), run.get("virtual_stages", 1),
                                    run["micro_batch_size"], run["global_batch"],
                                    run["transformer"]["sequence"],
                                    recompute_text(run), run["measured_s"], estimate,
                                    error_text, spp_text))

    def summary(self, source_keys):
        lines = []
        values = [abs(error) for _, error in self.errors]
        if values:
            median = statistics.median(values)
            outside = [(run_id, error) for run_id, error in self.errors
                       if abs(error) > TARGET_EACH]
            lines.append("* Median absolute error: %.1f%% over %d estimated runs (largest"
                         " %.1f%%); %d of them within %d%%." % (
                             100 * median, len(values), 100 * max(values),
                             len(values) - len(outside), round(100 * TARGET_EACH)))
            lines.append("* Targets (issue 33): median |error| <= %d%%: %s; every row within"
                         " %d%%: %s." % (round(100 * TARGET_MEDIAN),
                                         "met" if median <= TARGET_MEDIAN else "not met",
                                         round(100 * TARGET_EACH),
                                         "met" if not outside else "not met (%d rows outside)"
                                         % len(outside)))
        else:
            lines.append("* No run estimated.")
        reasons = {}
        for _, reason in self.unplanned:
            reasons[reason] = reasons.get(reason, 0) + 1
        items = ["%s (%d)" % (reason, count) for reason, count in sorted(reasons.items())]
        refused = sum(1 for note in self.notes if ", megatron: " in note)
        if refused:
            items.append("refused by pipeplan (%d, the refusals below)" % refused)
        if items:
            lines.append("* Not estimated: " + "; ".join(items) + ".")
        lines += ["", "By source (median signed error, from the lowest to the highest):", ""]
        for key in source_keys:
            if key in self.by_source:
                errors = self.by_source[key]
                lines.append("* %s: %s over %d runs (from %s to %s)" % (
                    key, validate.percent(statistics.median(errors)), len(errors),
                    validate.percent(min(errors)), validate.percent(max(errors))))
        lines += ["", "Weak scaling (the step time on the most GPUs over the step time on the"
                  " fewest, measured and estimated; the target: the estimated ratio within"
                  " %d%% of the measured one):" % round(100 * TARGET_SCALING), ""]
        lines += self.scaling_lines()
        return lines

    def scaling_lines(self):
        lines = []
        for name, points in self.series.items():
            text = "* %s (%d to %d GPUs): measured %s" % (
                name, points[0][1], points[-1][1], ratio_text(points))
            estimated = [point for point in points if point[3]]
            if len(estimated) < 2:
                text += "; not estimated"
            elif len(estimated) < len(points):
                text += "; estimated from %d to %d GPUs only: measured %s, estimated %s" % (
                    estimated[0][1], estimated[-1][1], ratio_text(estimated),
                    scaling_check(estimated))
            else:
                text += ", estimated %s" % scaling_check(points)
            lines.append(text)
        return lines or ["* no series"]


def composition(plan_json):
    """Where the estimate's time goes on the plan's first GPU, in ms: its forwards and
    backwards (compute), the tensor-parallel all-reduces, context-parallel ring steps and
    fully sharded gathers inside them (the rest of its busy time) and its stages'
    data-parallel all-reduces (none when fully sharded; they
    may overlap other chunks' compute under interleaving). A replica of a stage is its
    tensor-parallel group times the plan's context-parallel degree (spec 10)."""
    gpu = plan_json["gpus"][0]
    stages = [plan_json["stages"][s] for s in gpu.get("stages", [gpu.get("stage")])]
    compute = 0.0
    for stage in stages:
        replicas = len(stage["gpus"]) // (stage.get("tensor_parallel", 1) *
                                          plan_json.get("context_parallel", 1))
        compute += (stage["forward_ms"] + stage["backward_ms"]) * \
            plan_json["micro_batches"] / replicas
    inside = gpu["busy_ms"] - compute
    if -1e-9 * compute < inside < 0:
        inside = 0.0  # all hidden: the sums differ in their last bits only
    return [compute, inside, sum(stage["allreduce_ms"] for stage in stages)]


def ratio_text(points):
    """The measured step-time ratio of the last point of a series over its first."""
    return "%.3f" % (points[-1][2] / points[0][2])


def scaling_check(points):
    """The estimated ratio of the last point over the first, and its error against the
    measured one."""
    measured = points[-1][2] / points[0][2]
    estimated = points[-1][3] / points[0][3]
    off = estimated / measured - 1
    return "%.3f, %s (%s)" % (estimated, validate.percent(off),
                              "within %d%%" % round(100 * TARGET_SCALING)
                              if abs(off) <= TARGET_SCALING else "outside the target")


def plan_run(binary, work, run, systems, cp_available, with_spp):
    """Plans one run; returns (gpus, megatron plan, spp plan, failures)."""
    system = systems[run["system"]]
    gpus = run["nodes"] * 8  # every system of h100_runs.json has 8 GPUs per node
    t, p, d = run["tensor_parallel"], run["pipeline_parallel"], run["data_parallel"]
    if t * p * d * context(run) != gpus:
        sys.exit("h100.py: %s: t x p x d x c = %d, but %d GPUs"
                 % (run["id"], t * p * d * context(run), gpus))
    reason = why_not_planned(run, gpus, cp_available)
    if reason:
        return gpus, None, None, {"reason": reason}
    megatron, failure, spp, spp_failure = validate.plan_both(
        binary, work, run, model_system(system), topology(system, run["nodes"]),
        validate.batch_options(run) + context_options(run), "h100.py", with_spp)
    return gpus, megatron, spp, {"megatron": failure, "spp": spp_failure}


def spp_column(run, megatron, spp, failures):
    """The spp cell of a row and the refusal line when spp found no plan."""
    if spp:
        return validate.escape(validate.spp_cell(spp, megatron)), ""
    if failures.get("reason"):
        return "", ""
    return "no plan", "%s, spp: %s" % (run["id"], failures["spp"])


def previous_spp(output):
    """The spp cells and refusals of the section `output` holds, by run id (for
    --estimates-only, which plans the published configurations alone)."""
    text = ""
    if os.path.exists(output):
        with open(output) as f:
            text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit("h100.py: --estimates-only needs %s to hold the tables already" % output)
    cells, refusals = {}, {}
    for line in text[text.index(BEGIN):text.index(END)].splitlines():
        if line.startswith("| ") and " [" in line:
            cells[line[2:line.index(" [")]] = re.split(r"(?<!\\)\|", line)[-2].strip()
        elif line.startswith("* ") and ", spp: " in line:
            refusals[line[2:line.index(", spp: ")]] = line[2:].replace("\\|", "|")
    return cells, refusals


def kept_spp(text, megatron):
    """A kept spp cell (--estimates-only): its speed-up over the published configuration's
    estimate kept; added where the configuration had no estimate before (from the cell's
    seconds, rounded to 0.01 s); dropped where it has none now. The full run recomputes it."""
    if not megatron:
        return re.sub(r", [\d.]+x$", "", text)
    match = re.match(r"([\d.]+) \(", text)
    if match and not re.search(r", [\d.]+x$", text):
        text += ", %.2fx" % (megatron["iteration_ms"] / 1000.0 / float(match.group(1)))
    return text


def main(argv):
    args, flags = validate.parse_args(argv, __doc__, ("--estimates-only",))
    estimates_only = "--estimates-only" in flags
    binary = validate.find_binary(args)
    validate.load_ceilings(binary)
    output = args[2] if len(args) > 2 else os.path.join(validate.ROOT, "docs", "validation.md")
    with open(DATA) as f:
        data = json.load(f)
    cp_available = has_context_parallel(binary)
    previous = previous_spp(output) if estimates_only else ({}, {})
    tables = {dtype: Table(title) for dtype, title in TABLES}
    source_keys, notes = list(data["sources"]), []
    keep = os.environ.get("VALIDATE_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for run in data["runs"]:
            gpus, megatron, spp, failures = plan_run(binary, keep or scratch, run,
                                                     data["systems"], cp_available,
                                                     not estimates_only)
            if estimates_only:
                spp_text = kept_spp(previous[0].get(run["id"], ""), megatron)
                failures["spp"] = previous[1].get(run["id"], "")
            else:
                spp_text, failures["spp"] = spp_column(run, megatron, spp, failures)
            table = tables[run["transformer"]["dtype"]]
            table.add(run, gpus, source_keys.index(run["source"]) + 1,
                      run["measured_s"] * 1000.0, megatron, spp_text, failures)
            if run.get("measured_note"):
                notes.append("%s: the measured time is %s." % (run["id"], run["measured_note"]))
            if run.get("assumed"):
                notes.append("%s: assumed: %s." % (run["id"], run["assumed"]))
    write(output, data, tables, source_keys, notes, cp_available)


def write(output, data, tables, source_keys, notes, cp_available):
    """Writes the section between the markers of `output` (validate.replace_section)."""
    lines = [BEGIN, "",
             "Generated by `examples/validation/h100.py` from"
             " `examples/validation/h100_runs.json`. `t/p/d/c`: tensor, pipeline, data and"
             " context-parallel degrees; `v`: model chunks per GPU (interleaved 1F1B when above"
             " 1); `b`: micro-batch size; `recompute`: none, selective (Megatron-LM's, the"
             " description's `selective_recompute`) or selective-op (torchtitan's per-operator"
             " checkpointing, `per_op_recompute`), SP: sequence parallelism. Context"
             " parallelism is %s." % (
                 "planned (`--context-parallel`)" if cp_available
                 else "not in this binary: those rows are listed without an estimate")]
    for dtype, title in TABLES:
        table = tables[dtype]
        lines += ["", "### " + title, "",
                  "| run [source] | model | GPUs | t/p/d/c | v | b | global batch | sequence |"
                  " recompute | measured s | pipeplan s | error | spp s (its plan), speed-up |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + table.rows
        lines += [""] + table.summary(source_keys)
        if table.parts:
            lines += ["", "What each estimate holds on the plan's first GPU (seconds): its"
                      " compute (forwards and backwards), its tensor-parallel all-reduces and"
                      " exposed context-parallel ring steps and fully sharded all-gathers and"
                      " reduce-scatters (in series with that compute in the"
                      " model: the rest of its busy time) and its data-parallel"
                      " all-reduces (after each chunk's last backward); the last column is"
                      " the measured time over the modelled compute:", "",
                      "| run | measured s | pipeplan s | compute | tensor- and context-parallel |"
                      " data-parallel | measured / compute |",
                      "|---|---|---|---|---|---|---|"] + table.parts
        if table.notes:
            lines += ["", "Refusals:", ""] + ["* " + validate.escape(n) for n in table.notes]
    lines += ["", "Notes:", ""] + ["* " + validate.escape(note) for note in notes]
    lines += ["", "Sources:", ""] + ["%d. %s: %s" % (i + 1, key, data["sources"][key])
                                     for i, key in enumerate(source_keys)]
    lines += ["", "Clusters:", ""] + ["* %s: %s; %s" % (
        name, system["label"], "; ".join(system["sources"]))
        for name, system in data["systems"].items()]
    lines += ["", END]
    validate.replace_section(output, BEGIN, END, lines)


if __name__ == "__main__":
    main(sys.argv)
