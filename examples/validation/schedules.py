#!/usr/bin/env python3
"""Regenerates the schedules table of docs/validation.md: Qi et al.'s measured schedules.

For every model and micro-batch count of examples/validation/zero_bubble.json (the Zero Bubble
paper's Tables 3 and 4) this writes the model (its transformer description with the published
micro-batch size), a cluster of A100 nodes, and plans the published configuration, a pipeline of
one stage per GPU (`--planner megatron --pipeline-parallel GPUS --tensor-parallel 1
--data-parallel 1 --recompute never`), under each measured schedule's pipeplan policy; then lets
`spp --schedule auto` plan the same GPUs and micro-batches freely. It writes the measured and
estimated samples per GPU per second, the error, and the speed-up of each schedule over 1F1B,
measured and estimated.

Usage: examples/validation/schedules.py [PIPEPLAN [OUTPUT]]
  PIPEPLAN  the binary (default: $PIPEPLAN, else the newest build/*/pipeplan)
  OUTPUT    the Markdown file to update (default: docs/validation.md); only the part between
            the `schedules.py: begin` and `schedules.py: end` markers is replaced, then the
            prose that quotes it (examples/prose/prose.py).

Python 3 standard library only. Output is deterministic: the same binary gives the same bytes.
"""

import json
import os
import statistics
import sys
import tempfile

import validate

DATA = os.path.join(validate.ROOT, "examples", "validation", "zero_bubble.json")
BEGIN = "<!-- schedules.py: begin (generated; edit examples/validation/, not this part) -->"
END = "<!-- schedules.py: end -->"
BASE = "1F1B"


def topology(system, gpus):
    nodes = max(1, gpus // system["gpus_per_node"])
    return validate.topology(system, nodes)


def throughput(plan_json, samples, gpus):
    """Samples per GPU per second of a plan that runs `samples` sequences on `gpus` GPUs."""
    return samples / (plan_json["iteration_ms"] / 1000.0) / gpus


def ratio(value, base):
    return "%.2fx" % (value / base) if value and base else "-"


def plan_row(binary, work, entry, row, system, schedules):
    """One table row: measured and estimated throughput per schedule, spp's own plan, notes."""
    m, b, gpus = row["micro_batches"], entry["micro_batch_size"], entry["gpus"]
    name = "%s-m%d" % (entry["id"], m)
    model_json = validate.model({"id": name, "transformer": entry["transformer"],
                                 "micro_batch_size": b}, system, True)
    topo = topology(system, gpus)
    fixed = ["--micro-batches", str(m), "--planner", "megatron", "--tensor-parallel", "1",
             "--pipeline-parallel", str(gpus), "--data-parallel", "1", "--recompute", "never"]
    estimates, notes = {}, []
    for schedule in schedules:
        print("schedules.py: %s %s" % (name, schedule["name"]), file=sys.stderr)
        planned, failure = validate.plan(binary, work, name, model_json, topo,
                                         fixed + schedule["options"])
        if planned:
            estimates[schedule["name"]] = throughput(planned, m * b, gpus)
        else:
            notes.append("%s, %s: %s" % (name, schedule["name"], failure))
    print("schedules.py: %s spp" % name, file=sys.stderr)
    spp, failure = validate.plan(binary, work, name + "-spp", model_json, topo,
                                 ["--micro-batches", str(m), "--schedule", "auto"])
    if spp:
        free = "%.2f (%s, %s%s)" % (throughput(spp, m * b, gpus), validate.shape(spp),
                                    spp["schedule_policy"], validate.settings(spp))
    else:
        free = "no plan"
        notes.append("%s, spp: %s" % (name, failure))
    return estimates, free, notes


def main(argv):
    argv, _ = validate.parse_args(argv, __doc__)
    binary = validate.find_binary(argv)
    validate.load_ceilings(binary)
    output = argv[2] if len(argv) > 2 else os.path.join(validate.ROOT, "docs", "validation.md")
    with open(DATA) as f:
        data = json.load(f)
    system, schedules = data["system"], data["schedules"]
    names = [schedule["name"] for schedule in schedules]
    table, ratios, notes, errors = [], [], [], {name: [] for name in names}
    with tempfile.TemporaryDirectory() as work:
        for entry in data["models"]:
            for row in entry["rows"]:
                estimates, free, row_notes = plan_row(binary, work, entry, row, system, schedules)
                notes += row_notes
                measured = row["measured"]
                cells = []
                for name in names:
                    estimate = estimates.get(name)
                    if estimate is None:
                        cells.append("%.2f / refused" % measured[name])
                        continue
                    # As in validate.py, the error of the time per sample: negative is
                    # optimistic (the estimate runs faster than the measured run).
                    error = measured[name] / estimate - 1
                    errors[name].append(error)
                    cells.append("%.2f / %.2f (%s)" % (measured[name], estimate,
                                                       validate.percent(error)))
                table.append("| %s | %d | %d x %d | %s | %s |" % (
                    entry["model"], entry["gpus"], row["micro_batches"],
                    entry["micro_batch_size"], " | ".join(cells), validate.escape(free)))
                pairs = []
                for name in names[1:]:
                    pairs.append("%s / %s" % (ratio(measured[name], measured[BASE]),
                                              ratio(estimates.get(name), estimates.get(BASE))))
                ratios.append("| %s | %d | %s |" % (entry["model"], row["micro_batches"],
                                                    " | ".join(pairs)))
    lines = [BEGIN, "",
             "Generated by `examples/validation/schedules.py` from"
             " `examples/validation/zero_bubble.json`. Samples per GPU per second, measured /"
             " pipeplan's estimate"
             " (error of the time per sample, negative: optimistic):", "",
             "| model | GPUs | micro-batches x size | " + " | ".join(names) +
             " | spp --schedule auto (its plan) |",
             "|---|---|---|" + "---|" * len(names) + "---|"] + table
    lines += ["", "Speed-up over 1F1B, measured / estimated:", "",
              "| model | micro-batches | " + " | ".join(
                  "%s / 1F1B" % name for name in names[1:]) + " |",
              "|---|---|" + "---|" * (len(names) - 1)] + ratios
    lines += ["", "Median error per schedule:", ""]
    for name in names:
        values = errors[name]
        if values:
            lines.append("* %s: %s over %d rows (from %s to %s)" % (
                name, validate.percent(statistics.median(values)), len(values),
                validate.percent(min(values)), validate.percent(max(values))))
    lines += ["", "How each measured schedule is planned:", ""]
    for schedule in schedules:
        lines.append("* %s: `%s`, %s." % (schedule["name"], " ".join(schedule["options"]),
                                          schedule["reading"]))
    lines += ["", "Notes:", ""] + ["* " + validate.escape(note) for note in notes or ["none"]]
    lines += ["", "Source: " + data["source"], "", END]
    validate.replace_section(output, BEGIN, END, lines)


if __name__ == "__main__":
    main(sys.argv)
