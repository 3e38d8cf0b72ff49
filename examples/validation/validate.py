#!/usr/bin/env python3
"""Regenerates the table of docs/validation.md: published training runs against pipeplan.

For every run in examples/validation/runs.json this writes the run's model (its transformer
description, micro-batch size fixed) and its cluster (a topology of the run's system), plans the
published configuration with `pipeplan plan --planner megatron` (its tensor, pipeline and data
degrees, recomputation, optimizer sharding and global batch; interleaved 1F1B with the run's
model chunks per GPU where it used them) and then lets `spp` plan the same
GPUs and global batch freely (micro-batch size and schedule searched, `--global-batch` and
`--schedule auto`), and writes one table
row with the measured and estimated seconds per iteration and the error. Below the table: the
median error per group, the scaling error of each strong-scaling series, and the sources.

Usage: examples/validation/validate.py [PIPEPLAN [OUTPUT]]
  PIPEPLAN  the binary (default: $PIPEPLAN, else the newest build/*/pipeplan)
  OUTPUT    the Markdown file to update (default: docs/validation.md); only the part between
            the `validate.py: begin` and `validate.py: end` markers is replaced, then the prose
            that quotes it (examples/prose/prose.py).

Python 3 standard library only. Output is deterministic: the same binary gives the same bytes.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = os.path.join(ROOT, "examples", "validation", "runs.json")
PROSE = os.path.join(ROOT, "examples", "prose", "prose.py")
BEGIN = "<!-- validate.py: begin (generated; edit examples/validation/, not this part) -->"
END = "<!-- validate.py: end -->"

# Published recomputation -> the megatron planner's --recompute. Selective recomputation,
# Megatron-LM's or torchtitan's per operator ("selective-op"), is a property of the model (the
# description's selective_recompute or per_op_recompute), not of the stage.
RECOMPUTE = {"full": "always", "selective": "never", "selective-op": "never", "none": "never"}


def team(run_id):
    """The source of a run: its id up to the first part holding a digit (`korthikanti`,
    `narayanan`, `mt-nlg`, `megatron-gpt2`)."""
    parts = []
    for part in run_id.split("-"):
        if any(ch.isdigit() for ch in part):
            break
        parts.append(part)
    return "-".join(parts) or run_id


def parse_args(argv, usage, flags=()):
    """`argv` split into the positional arguments (the script's name first, then at most PIPEPLAN
    and OUTPUT) and the set of `flags` given. `-h`/`--help` prints `usage` (the script's
    docstring) and exits 0; an unknown flag or a third argument exits 2 with one line, before
    anything is planned or written."""
    name = os.path.basename(argv[0])
    args, given = [argv[0]], set()
    for arg in argv[1:]:
        if arg in ("-h", "--help"):
            print(usage.strip())
            sys.exit(0)
        if arg.startswith("-") and arg != "-":
            if arg not in flags:
                known = ", ".join(flags) if flags else "none"
                print("%s: unknown option %s (options: %s; see --help)" % (name, arg, known),
                      file=sys.stderr)
                sys.exit(2)
            given.add(arg)
        else:
            args.append(arg)
    if len(args) > 3:
        print("%s: at most two arguments, PIPEPLAN and OUTPUT, got %d (see --help)"
              % (name, len(args) - 1), file=sys.stderr)
        sys.exit(2)
    return args, given


def find_binary(argv):
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("PIPEPLAN"):
        return os.environ["PIPEPLAN"]
    found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "pipeplan")), key=os.path.getmtime)
    if not found:
        sys.exit("validate.py: no pipeplan binary; build one or pass its path")
    return found[-1]


def topology(system, nodes):
    """The cluster of `nodes` nodes of `system` (runs.json "systems")."""
    return {
        "schema": "pipeplan/topology/v1",
        "name": "%d x %s" % (nodes, system["label"].split(":")[0]),
        "nodes": [{"name": "node", "count": nodes, "gpus": system["gpus_per_node"],
                   "type": system["gpu"], "link": system["link"]}],
        "network": system["network"],
    }


# What `pipeplan model transformer` sets that a description without the keys leaves as it was
# before them: the matmul ceiling of a GPU in a format (its measured largest matmul throughput
# over its peak), by catalogue name and alias, which load_ceilings reads, and whether a preset's
# model trained with dropout, which preset_dropout asks the same binary for.
CEILINGS = {}
DROPOUT = {}
BINARY = []


def load_ceilings(binary):
    """Reads the ceilings from `pipeplan model gpus --json`, so that every description here is
    costed as `model transformer` costs it (docs/transformer-model.md, "The matmul ceiling",
    "Dropout"), and keeps the binary for preset_dropout."""
    done = subprocess.run([binary, "model", "gpus", "--json"], capture_output=True, text=True,
                          check=True)
    for gpu in json.loads(done.stdout):
        for name in [gpu["name"]] + gpu["aliases"]:
            CEILINGS[name] = gpu.get("matmul_ceiling", {})
    BINARY[:] = [binary]


def preset_dropout(preset):
    """Whether `pipeplan model transformer --preset PRESET` writes a model with dropout (once
    per preset); True without a preset or before load_ceilings."""
    if preset is None or not BINARY:
        return True
    if preset not in DROPOUT:
        done = subprocess.run([BINARY[0], "-q", "model", "transformer", "--preset", preset,
                               "--layers", "1"], capture_output=True, text=True, check=True)
        DROPOUT[preset] = json.loads(done.stdout)["transformer"].get("dropout", True)
    return DROPOUT[preset]


def model(run, system, fixed_size):
    description = dict(run["transformer"])
    description["gpu"] = system["gpu"]
    if fixed_size:
        description["micro_batch_size"] = run["micro_batch_size"]
    ceiling = CEILINGS.get(description["gpu"], {}).get(description.get("dtype", "bf16"))
    if ceiling is not None and "matmul_ceiling" not in description:
        description["matmul_ceiling"] = ceiling
    if "dropout" not in description and not preset_dropout(description.get("preset")):
        description["dropout"] = False
    # What `model transformer --dtype fp8` writes: Transformer Engine's default recipe computes
    # the attention in bf16 (docs/transformer-model.md, "Time", FP8).
    if description.get("dtype") == "fp8" and "attention_dtype" not in description:
        description["attention_dtype"] = "bf16"
    return {"schema": "pipeplan/model/v2", "name": run["id"], "transformer": description}


def plan(binary, work, name, model_json, topo_json, options):
    """Runs `pipeplan plan`; returns (plan JSON or None, failure text)."""
    model_path = os.path.join(work, name + "-model.json")
    topo_path = os.path.join(work, name + "-topo.json")
    with open(model_path, "w") as out:
        json.dump(model_json, out)
    with open(topo_path, "w") as out:
        json.dump(topo_json, out)
    command = [binary, "-q", "plan", model_path, topo_path] + options
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        text = lines[-1] if lines else "exit %d" % done.returncode
        return None, text.replace("pipeplan: error: ", "") + " (exit %d)" % done.returncode
    return json.loads(done.stdout), ""


def kernel_floor(binary, work, name, model_json):
    """`pipeplan validate`'s kernel floor of a run's model (docs/transformer-model.md, "Fixed
    time per kernel"): (floor ms per micro-batch, forward and backward ms per micro-batch at
    degree 1, the text after "above the FLOP and byte time on "), or None."""
    model_path = os.path.join(work, name + "-floor-model.json")
    with open(model_path, "w") as out:
        json.dump(model_json, out)
    done = subprocess.run([binary, "validate", model_path], capture_output=True, text=True)
    time = r"([0-9.]+) (ms|s)"  # io::format_ms: milliseconds, or seconds from 10 s
    match = re.search(r"forward " + time + " and backward " + time + " per micro-batch.*"
                      r"kernel floor .* = " + time + r" per micro-batch .*above the FLOP and"
                      r" byte time on (.*)$", done.stderr.strip())
    if done.returncode != 0 or not match:
        return None

    def ms(group):
        return float(match.group(group)) * (1000.0 if match.group(group + 1) == "s" else 1.0)
    return ms(5), ms(1) + ms(3), match.group(7)


def shape(plan_json):
    """`S stages, t T, r R, b B[, N recomputed][, V per device]` of a plan, from its stages
    (`1 stage, ...` for one)."""
    stages = plan_json["stages"]
    ts = sorted({stage.get("tensor_parallel", 1) for stage in stages})
    rs = sorted({len(stage["gpus"]) // stage.get("tensor_parallel", 1) for stage in stages})
    recomputed = sum(1 for stage in stages if stage.get("recompute", False))
    text = "%d %s, t %s, r %s, b %s" % (
        len(stages), "stage" if len(stages) == 1 else "stages", "/".join(map(str, ts)),
        "/".join(map(str, rs)),
        plan_json.get("micro_batch_size", "?"))
    if recomputed:
        text += ", %d recomputed" % recomputed
    if plan_json.get("virtual_stages", 1) > 1:
        text += ", %d per device" % plan_json["virtual_stages"]
    return text


def schedule(run):
    """The published schedule: Megatron-LM's interleaved 1F1B with the run's model chunks per
    GPU (`virtual_stages`), else the megatron planner's 1F1B."""
    if run.get("virtual_stages", 1) > 1:
        return ["--schedule", "interleaved-1f1b", "--virtual-stages", str(run["virtual_stages"])]
    return []


def seconds(ms):
    return "%.2f" % (ms / 1000.0)


def percent(value):
    return "%+.1f%%" % (100.0 * value)


def escape(text):
    return text.replace("|", "\\|")


def batch_options(run):
    """The options every plan of a run takes: its global batch."""
    return ["--global-batch", str(run["global_batch"])]


def optimizer_options(run):
    """The published configuration's optimizer: fully sharded, sharded or (none) replicated.
    spp chooses its own (issue 33 item 8)."""
    if run.get("optimizer"):
        return ["--optimizer", run["optimizer"]]
    if run.get("shard_optimizer"):
        return ["--shard-optimizer"]
    return []


def published_options(run):
    """The megatron planner's options for a run's published configuration: its tensor,
    pipeline and data degrees, its recomputation, its schedule, and where the run split the
    layers unevenly, the decoder layers of its first and last pipeline stages or the embedding
    and the loss counted as decoder layers (Megatron-LM's --account-for-*-in-pipeline-split)."""
    options = ["--planner", "megatron", "--tensor-parallel", str(run["tensor_parallel"]),
               "--pipeline-parallel", str(run["pipeline_parallel"]),
               "--data-parallel", str(run["data_parallel"]),
               "--recompute", RECOMPUTE[run["recompute"]]] + schedule(run)
    for key in ("first_stage_layers", "last_stage_layers"):
        if key in run:
            options += ["--" + key.replace("_", "-"), str(run[key])]
    for key in ("account_for_embedding", "account_for_loss"):
        if run.get(key):
            options.append("--" + key.replace("_", "-"))
    return options


def plan_both(binary, work, run, system, topo, options, script="validate.py", with_spp=True):
    """Plans a run's published configuration (`--planner megatron`, the micro-batch size and
    the optimizer fixed) and lets spp plan the same GPUs freely (`--schedule auto`, the size
    and the optimizer chosen; skipped without `with_spp`). Returns (megatron plan, its
    failure, spp plan, its failure); a plan is None on failure."""
    print("%s: %s (megatron)" % (script, run["id"]), file=sys.stderr)
    megatron, failure = plan(binary, work, run["id"], model(run, system, True), topo,
                             options + published_options(run) + optimizer_options(run))
    if not with_spp:
        return megatron, failure, None, ""
    print("%s: %s (spp)" % (script, run["id"]), file=sys.stderr)
    # spp chooses the schedule too (--schedule auto): the published runs interleave.
    spp, spp_failure = plan(binary, work, run["id"] + "-spp", model(run, system, False),
                            topo, options + ["--schedule", "auto"])
    return megatron, failure, spp, spp_failure


def settings(plan_json):
    """`, sharded, SP on, selective on`: the settings spp chose (a sharded optimizer, and the
    description's flags the plan records where they differ from the model file's)."""
    optimizer = plan_json.get("optimizer", "replicated")
    text = "" if optimizer == "replicated" else ", " + optimizer
    for key, name in (("sequence_parallel", "SP"), ("selective_recompute", "selective")):
        if key in plan_json:
            text += ", %s %s" % (name, "on" if plan_json[key] else "off")
    return text


def spp_cell(spp, megatron):
    """The spp column: its time, the shape of its plan, its schedule, the settings it chose
    and its speed-up over the published configuration's estimate."""
    text = "%s (%s, %s%s)" % (seconds(spp["iteration_ms"]), shape(spp), spp["schedule_policy"],
                              settings(spp))
    if megatron:
        text += ", %.2fx" % (megatron["iteration_ms"] / spp["iteration_ms"])
    return text


def main(argv):
    argv, _ = parse_args(argv, __doc__)
    binary = find_binary(argv)
    load_ceilings(binary)
    output = argv[2] if len(argv) > 2 else os.path.join(ROOT, "docs", "validation.md")
    with open(RUNS) as f:
        data = json.load(f)
    systems = data["systems"]
    rows, errors, series, sources, notes, by_team, floors = [], {}, {}, [], [], {}, []
    # VALIDATE_KEEP=DIR keeps every model and topology written, to rerun one plan by hand.
    keep = os.environ.get("VALIDATE_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = keep or scratch
        for run in data["runs"]:
            system = systems[run["system"]]
            gpus = run["nodes"] * system["gpus_per_node"]
            t, p, d = run["tensor_parallel"], run["pipeline_parallel"], run["data_parallel"]
            if t * p * d != gpus:
                sys.exit("validate.py: %s: t x p x d = %d, but %d GPUs"
                         % (run["id"], t * p * d, gpus))
            topo = topology(system, run["nodes"])
            megatron, failure, spp, spp_failure = plan_both(binary, work, run, system, topo,
                                                            batch_options(run))
            floor = kernel_floor(binary, work, run["id"], model(run, system, True))
            floors.append("%s: %s" % (run["id"], "no floor (validate failed)" if not floor else
                                      "%.1f ms of launches per micro-batch against %.0f ms of"
                                      " FLOP and byte time at degree 1 (%.1f%%), above it on %s"
                                      % (floor[0], floor[1], 100 * floor[0] / floor[1],
                                         floor[2])))
            sources.append(run["source"] + (" Measured: " + run["measured_note"] + "."
                                            if run.get("measured_note") else ""))
            if run.get("measured_schedule"):
                notes.append("%s: the measured run used %s."
                             % (run["id"], run["measured_schedule"]))
            measured_ms = run["measured_s"] * 1000.0
            if megatron:
                error = megatron["iteration_ms"] / measured_ms - 1
                errors.setdefault(run["group"], []).append(abs(error))
                by_team.setdefault(team(run["id"]), []).append(error)
                estimate, error_text = seconds(megatron["iteration_ms"]), percent(error)
                if run.get("scaling"):
                    series.setdefault(run["scaling"], []).append(
                        (run["id"], measured_ms, megatron["iteration_ms"]))
            else:
                estimate, error_text = "refused", ""
                notes.append("%s, megatron: %s" % (run["id"], failure))
            if spp:
                spp_text = spp_cell(spp, megatron)
            else:
                spp_text = "no plan"
                notes.append("%s, spp: %s" % (run["id"], spp_failure))
            desc = run["transformer"]
            recompute = run["recompute"] + (", SP" if desc.get("sequence_parallel") else "")
            rows.append("| %s [%d] | %s | %d %s | %d/%d/%d | %d | %d | %d | %s | %.2f | %s | %s |"
                        " %s |" % (
                            run["id"], len(sources), run["model"], gpus, system["gpu"], t, p, d,
                            run["micro_batch_size"], run["global_batch"],
                            desc.get("sequence", 2048), recompute, run["measured_s"], estimate,
                            error_text, escape(spp_text)))
    lines = [BEGIN, "",
             "Generated by `examples/validation/validate.py` from `examples/validation/runs.json`.",
             "",
             "| run | model | GPUs | t/p/d | b | global batch | sequence | recompute | measured s |"
             " pipeplan s | error | spp s (its plan), speed-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows
    lines += ["", "Median absolute error of the published configurations:", ""]
    for group in sorted(errors):
        values = errors[group]
        lines.append("* %s runs: %.1f%% over %d runs (largest %.1f%%)" % (
            group, 100 * statistics.median(values), len(values), 100 * max(values)))
    lines += ["", "By source (runs of one team's code share its per-unit-of-work speed):", ""]
    for name in sorted(by_team):
        values = by_team[name]
        lines.append("* %s: median error %s over %d runs (from %s to %s)" % (
            name, percent(statistics.median(values)), len(values), percent(min(values)),
            percent(max(values))))
    lines += ["", "Scaling (each run's estimated speed-up over the series' first run, divided by"
              " the measured one, minus 1):", ""]
    if not series:
        lines.append("* no series has two estimated runs")
    for name in sorted(series):
        points = series[name]
        base = points[0]
        parts = ["%s %s" % (run_id, percent((estimate / base[2]) / (measured / base[1]) - 1))
                 for run_id, measured, estimate in points[1:]]
        lines.append("* %s (from %s): %s" % (name, base[0], ", ".join(parts) or "one run only"))
    lines += ["", "Kernel floor at the published micro-batch size (`pipeplan validate` of each"
              " run's model; 10 us per kernel launch, docs/transformer-model.md, \"Fixed time per"
              " kernel\"; a layer where it is above a pass's FLOP and byte time takes the"
              " floor's):", ""] + ["* " + escape(floor) for floor in floors]
    lines += ["", "Notes:", ""] + ["* " + escape(note) for note in notes]
    lines += ["", "Sources:", ""] + ["%d. %s" % (i + 1, s) for i, s in enumerate(sources)]
    lines += ["", END]
    replace_section(output, BEGIN, END, lines)


def replace_section(output, begin, end, lines):
    """Writes `lines` (from the `begin` marker to the `end` one) over that part of `output`, or
    appends them when the file has no such part; then the prose between `prose.py` markers
    from its template and the tables (examples/prose/prose.py), which stops when a sentence's
    claim no longer holds."""
    generated = "\n".join(lines) + "\n"
    text = open(output).read() if os.path.exists(output) else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + generated + text[text.index(end) + len(end) + 1:]
    else:
        text += ("\n" if text else "") + generated
    with open(output, "w") as out:
        out.write(text)
    if "<!-- prose.py: " in text:
        done = subprocess.run([sys.executable, PROSE, output])
        if done.returncode != 0:
            sys.exit("%s: the tables are written, the prose is not (above)"
                     % os.path.basename(sys.argv[0]))


if __name__ == "__main__":
    main(sys.argv)
