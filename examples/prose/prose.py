#!/usr/bin/env python3
"""Writes the prose of docs/results.md and docs/validation.md from the tables in the same file.

The findings of docs/results.md and the readings of docs/validation.md quote figures (speed-ups,
counts of pairs, errors, milliseconds) that the generated tables below them hold. So that a
regeneration can never leave the prose behind its tables, that prose is a template here
(examples/prose/*.md.in) whose figures are `{{name}}` placeholders, and this script fills them
from the document's own tables: the tables as they are printed, so that every figure in the
prose can be checked by reading the table it comes from.

Each template is paired with a function below that reads the tables, computes its named figures
and checks the claims its sentences make in words ("never slower", "ties", "the largest win is
gnmt"): when a claim no longer holds, the script stops with the sentence and what the tables say
instead, and the template's sentence must be rewritten. A placeholder without a figure, or a
figure no placeholder uses, is an error too. What cannot come from the tables stays literal:
the inputs (link speeds, published measurements, layer counts), history ("before issue 13:
1.64x"), and planning times, which are measured, not deterministic.

In a document, each filled template sits between the markers
`<!-- prose.py: NAME begin ... -->` and `<!-- prose.py: NAME end -->`, NAME being the template's
name; nothing outside them is touched. examples/compare.sh, examples/validation/validate.py and
schedules.py run this script after writing their tables.

Usage: examples/prose/prose.py [--check] [DOC ...]
  DOC      a document with prose markers (default: docs/results.md and docs/validation.md)
  --check  change nothing; exit 1 with a diff when a document's prose is not what its
           templates and its own tables give (the test suite runs this)

Python 3 standard library only. Deterministic: the same tables give the same bytes.
"""

import difflib
import json
import os
import re
import statistics
import sys
import textwrap
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNS = os.path.join(ROOT, "examples", "validation", "runs.json")


class ClaimError(Exception):
    """A sentence of a template says what the tables no longer show, or a table is missing."""


# ---------------------------------------------------------------------------------------------
# Numbers as the prose writes them. Figures are computed from the tables' printed values
# (Decimal, so that "1.575x" rounds as a reader rounds it, to even on a tie).

WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve"]


def word(n):
    """`four` for 4 (numbers a sentence spells out), digits from 13 on."""
    return WORDS[n] if 0 <= n < len(WORDS) else str(n)


def number(text):
    """The Decimal of a printed figure: `1.59x`, `-7.1%`, `+0.5%`, `0.93`; None for `-`."""
    text = text.strip().rstrip("x%").lstrip("+")
    if text == "-":
        return None
    try:
        return Decimal(text)
    except ArithmeticError:
        raise ClaimError("unreadable figure %r" % text) from None


def fixed(value, places):
    """`value` with `places` decimals (0: an integer), rounded half to even."""
    quantum = Decimal(1).scaleb(-places)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_EVEN))


def ceiling(value):
    return str(Decimal(value).quantize(Decimal(1), rounding=ROUND_CEILING))


def times(value, places=2):
    """A speed-up as the prose writes it: `1.59x`."""
    return fixed(value, places) + "x"


def rough_times(value):
    """A speed-up to two significant figures: `2.3x`, `27x`."""
    return (fixed(value, 0) if value >= 10 else fixed(value, 1)) + "x"


def thousands(n):
    return "{:,}".format(n)


def series(items):
    """`a`, `a and b`, `a, b and c`."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def alternatives(items):
    """`a`, `a or b`, `a, b or c`."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def milliseconds(text):
    """The Decimal milliseconds of a table's `757.8 ms` or `10.13 s`; None for `-`."""
    text = text.strip()
    if text == "-":
        return None
    value, unit = text.split()
    return Decimal(value) * (1000 if unit == "s" else 1)


def claim(holds, sentence, shown):
    """Stops when a sentence's claim does not hold: `sentence` quotes it, `shown` says what the
    tables show instead."""
    if not holds:
        raise ClaimError("the prose says %s, but the tables show %s" % (sentence, shown))


# ---------------------------------------------------------------------------------------------
# Reading the tables of a document.

def section(text, begin, end):
    """The part of `text` between the lines starting with `begin` and `end`."""
    start = text.find(begin)
    stop = text.find(end, start + 1)
    if start < 0 or stop < 0:
        raise ClaimError("no section between %r and %r" % (begin, end))
    return text[start:stop]


def cells(line):
    """The cells of a Markdown table row (`\\|` is a literal bar)."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [part.strip().replace("\\|", "|") for part in parts]


def table_rows(text, header):
    """The rows (lists of cells) of the Markdown table whose header line starts with `header`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(cells(row))
            return rows
    raise ClaimError("no table with the header %r" % header)


def bullets(text, heading):
    """The `* ` items of the list after the line `heading`."""
    lines = text.splitlines()
    start = lines.index(heading)
    items = []
    for line in lines[start + 2:]:
        if not line.startswith("* "):
            break
        items.append(line[2:])
    return items


# ---------------------------------------------------------------------------------------------
# docs/results.md: the compare tables, the summary and the geometric means (examples/compare.sh).

COMPARE_BEGIN = "<!-- compare.sh: begin"
COMPARE_END = "<!-- compare.sh: end -->"

# How the findings name each example topology; a new topology needs its name here.
TOPOLOGY_NAMES = {
    "dgx1-hybrid-mesh": "the DGX-1",
    "geo-distributed": "the geo-distributed cluster",
    "heterogeneous": "the heterogeneous cluster",
    "pcie-server": "the PCIe server",
    "two-node-nvlink-ib": "the two-node cluster",
}
BASELINE_NAMES = {"data-parallel": "data parallelism", "pipedream": "`pipedream`",
                  "gpipe": "`gpipe`", "uniform": "`uniform`"}
COMPARE_FIELDS = ["planner", "policy", "stages", "iteration", "speed_up", "vs_partition",
                  "vs_any_plan", "peak_memory", "status"]


def stage_fields(stage):
    """(replicas, tensor-parallel degree, recomputed) of a compare table's stage, `0-21x2t4r`."""
    match = re.fullmatch(r"\d+-\d+x(\d+)(?:t(\d+))?(r?)", stage)
    if not match:
        raise ClaimError("unreadable stage %r" % stage)
    replicas, degree, recomputed = match.groups()
    return int(replicas), int(degree or 1), bool(recomputed)


def pair_name(topology, model):
    if topology not in TOPOLOGY_NAMES:
        raise ClaimError("no prose name for topology %s: add it to TOPOLOGY_NAMES in %s"
                         % (topology, os.path.relpath(__file__, ROOT)))
    return "%s on %s" % (model, TOPOLOGY_NAMES[topology])


class Pair:
    """One `pipeplan compare` table: the rows of one model on one topology."""

    def __init__(self, topology, model, body):
        self.topology, self.model = topology, model
        self.rows = []
        for line in body.splitlines()[1:]:
            fields = re.split(r"\s{2,}", line.strip(), maxsplit=len(COMPARE_FIELDS) - 1)
            if len(fields) != len(COMPARE_FIELDS):
                raise ClaimError("%s on %s: unreadable row %r" % (model, topology, line))
            row = dict(zip(COMPARE_FIELDS, fields))
            row["ms"] = milliseconds(row["iteration"])
            self.rows.append(row)

    def row(self, planner, policy):
        for row in self.rows:
            if row["planner"] == planner and row["policy"] == policy:
                return row
        return None

    def ms(self, planner, policy):
        row = self.row(planner, policy)
        return row["ms"] if row else None

    def baselines(self, policy):
        """The feasible rows under `policy` of the planners that are not spp."""
        return [row for row in self.rows if row["policy"] == policy and row["ms"] is not None
                and not row["planner"].startswith("spp")]

    @property
    def name(self):
        return pair_name(self.topology, self.model)


class Results:
    """The generated part of docs/results.md."""

    def __init__(self, text):
        generated = section(text, COMPARE_BEGIN, COMPARE_END)
        self.pairs, self.llm = [], {}
        for match in re.finditer(r"^#### `([^`]+)` on `([^`]+)`\n\n```text\n(.*?)```",
                                 generated, re.S | re.M):
            model, topology, body = match.groups()
            if topology.startswith("llm/"):
                self.llm[topology[4:]] = Pair(topology[4:], model[4:], body)
            else:
                self.pairs.append(Pair(topology, model, body))
        self.summary = []
        for row in table_rows(generated, "| topology | model | spp |"):
            best, name = re.fullmatch(r"(\S+)(?: \((\S+)\))?", row[3]).groups()
            self.summary.append({
                "topology": row[0], "model": row[1], "spp": number(row[2]),
                "best": number(best), "best_name": name, "speed_up": row[4],
                "pipedream": row[5], "over_pipedream": row[6]})
        self.means = {}
        for row in table_rows(generated, "| topologies |"):
            self.means[row[0]] = {"best": row[1], "pipedream": row[2], "instances": int(row[3])}
        if not self.pairs or len(self.summary) != len(self.pairs):
            raise ClaimError("the summary has %d rows for %d compare tables"
                             % (len(self.summary), len(self.pairs)))

    def pair(self, topology, model):
        for pair in self.pairs:
            if pair.topology == topology and pair.model == model:
                return pair
        raise ClaimError("no compare table of %s on %s" % (model, topology))

    def summary_rows(self, *topologies):
        return [row for row in self.summary if row["topology"] in topologies]


def results_findings(text):
    """The figures of docs/results.md's findings (examples/prose/results-findings.md.in), one
    function per paragraph."""
    results = Results(text)
    figures = {"pairs": str(len(results.pairs))}
    for paragraph in (never_slower, under_each_schedule, where_it_wins, uniformity, large_models,
                      where_it_does_not):
        figures.update(paragraph(results))
    return figures


def never_slower(results):
    """spp against the baselines, under list (the summary) and under each fixed policy, and the
    geometric means."""
    pairs, summary, means = results.pairs, results.summary, results.means
    figures = {}
    slower = [row for row in summary if row["spp"] is None
              or row["best"] is not None and row["spp"] > row["best"]]
    claim(not slower, "spp's default plan is at least as fast as the fastest baseline on every "
          "pair", "it is slower on " + ", ".join(
              "%s on %s" % (row["model"], row["topology"]) for row in slower))
    for policy in ("list", "1f1b", "gpipe"):
        for pair in pairs:
            spp = pair.ms("spp", policy)
            faster = [row["planner"] for row in pair.baselines(policy)
                      if spp is None or row["ms"] < spp]
            claim(not faster, "spp under %s is at least as fast as every baseline under it"
                  % policy, "%s faster on %s" % (", ".join(faster), pair.name))
    figures["gpipe_baseline_pairs"] = str(sum(1 for pair in pairs if pair.baselines("gpipe")))

    irregular = [key for key in means if key.startswith("irregular")]
    claim(len(irregular) == 1, "one row of irregular topologies", "%d" % len(irregular))
    irregular, every = means[irregular[0]], means["all"]
    figures["irregular_pairs"] = str(irregular["instances"])
    figures["irregular_over_best"] = times(number(irregular["best"]))
    figures["irregular_over_pipedream"] = times(number(irregular["pipedream"]))
    figures["all_over_best"] = times(number(every["best"]))
    figures["all_over_pipedream"] = times(number(every["pipedream"]))
    claim(every["instances"] == len(pairs), "the means are over all %d pairs" % len(pairs),
          "%d instances" % every["instances"])
    return figures


def under_each_schedule(results):
    """spp's zb-v row against its own list schedule."""
    figures, zb_v = {}, []
    for pair in results.pairs:
        listed, spread = pair.ms("spp", "list"), pair.ms("spp", "zb-v")
        if listed is not None and spread is not None and spread < listed:
            zb_v.append((1 - spread / listed, pair, spread, listed))
    claim(zb_v, "spp's zb-v row is faster than its list schedule on some pairs", "none")
    least, most = min(zb_v, key=lambda x: x[0]), max(zb_v, key=lambda x: x[0])
    figures["zb_v_faster"] = str(len(zb_v))
    figures["zb_v_least"] = fixed(100 * least[0], 0)
    figures["zb_v_least_pair"] = least[1].name
    figures["zb_v_most"] = fixed(100 * most[0], 0)
    figures["zb_v_most_pair"] = most[1].name
    figures["zb_v_most_ms"] = fixed(most[2], 0)
    figures["zb_v_most_list_ms"] = fixed(most[3], 0)
    return figures


def where_it_wins(results):
    """The geo-distributed cluster, the heterogeneous one, the PCIe server, NVLink."""
    figures = {}
    geo = results.summary_rows("geo-distributed")
    over_best = [number(row["speed_up"]) for row in geo]
    figures["geo_least"], figures["geo_most"] = rough_times(min(over_best)), rough_times(
        max(over_best))
    for model in ("vgg16", "gnmt"):
        stages = results.pair("geo-distributed", model).row("spp", "list")["stages"]
        claim(re.fullmatch(r"0-\d+x2", stages), "%s on the geo-distributed cluster runs "
              "data-parallel on the two GPUs of one region" % model, "stages " + stages)
    hetero = results.summary_rows("heterogeneous")
    figures["hetero_least"] = min((row["speed_up"] for row in hetero), key=number)
    figures["hetero_most"] = max((row["speed_up"] for row in hetero), key=number)
    figures["hetero_most_over_pipedream"] = rough_times(max(
        number(row["over_pipedream"]) for row in hetero if row["over_pipedream"] != "-"))
    pcie = results.summary_rows("pcie-server")
    largest = max(pcie, key=lambda row: number(row["speed_up"]))
    claim(largest["model"] == "gnmt", "the largest win on the PCIe server is gnmt",
          "%s (%s)" % (largest["model"], largest["speed_up"]))
    figures["pcie_gnmt_speed_up"] = largest["speed_up"]
    figures["pcie_gnmt_baseline"] = BASELINE_NAMES[largest["best_name"]]
    stages = results.pair("pcie-server", "gnmt").row("spp", "list")["stages"].split()
    replicas = [stage_fields(stage)[0] for stage in stages]
    claim(len(stages) == 4 and replicas[-1] == 4 and sum(replicas[:3]) == 4,
          "gnmt on the PCIe server fills socket 0 (four GPUs) with three small stages and "
          "replicates the last one on socket 1", "stages " + " ".join(stages))
    amoeba = []
    for topology in ("dgx1-hybrid-mesh", "two-node-nvlink-ib"):
        row = [row for row in results.summary_rows(topology) if row["model"] == "amoeba-36"][0]
        amoeba.append(row["speed_up"])
        stages = results.pair(topology, "amoeba-36").row("spp", "list")["stages"].split()
        claim(len(stages) == 2 and stage_fields(stages[0]) == stage_fields(stages[1]),
              "amoeba-36 splits into two replicated stages on %s" % topology,
              "stages " + " ".join(stages))
    figures["nvlink_amoeba_least"] = min(amoeba, key=number)
    figures["nvlink_amoeba_most"] = max(amoeba, key=number)
    return figures


def uniformity(results):
    """What uniformity costs: spp --uniform against spp, both under list."""
    figures, slower, ties = {}, [], 0
    for pair in results.pairs:
        spp, uniform = pair.ms("spp", "list"), pair.ms("spp --uniform", "list")
        claim(uniform is None or uniform >= spp, "spp --uniform is never faster than spp",
              "it is on " + pair.name)
        if uniform == spp:
            ties += 1
        elif uniform is not None:
            slower.append((pair, uniform, spp))
    claim(slower, "spp --uniform is slower on some pairs", "it ties on all")
    figures["uniform_ties"] = str(ties)
    figures["uniform_slower"] = word(len(slower))
    most = max(slower, key=lambda x: x[1] / x[2])
    parts = []
    for pair, uniform, spp in slower:
        percent = fixed(100 * (uniform / spp - 1), 0) + "%"
        if pair is most[0]:
            percent += ", %s against %s ms" % (fixed(uniform, 0), fixed(spp, 0))
        parts.append("%s (%s)" % (pair.name, percent))
    figures["uniform_slower_pairs"] = series(parts)
    for topology, model in (("geo-distributed", "bert-48"), ("heterogeneous", "resnet50"),
                            ("heterogeneous", "vgg16")):
        pair = results.pair(topology, model)
        claim(pair.ms("spp", "list") == pair.ms("spp --uniform", "list"),
              "spp and spp --uniform now tie on %s" % pair.name, "%s against %s" % (
                  pair.row("spp --uniform", "list")["iteration"],
                  pair.row("spp", "list")["iteration"]))
    for model, before in (("gnmt", 309), ("bert-48", 1725)):
        now = results.pair("pcie-server", model).ms("spp", "1f1b")
        claim(now is not None and now < before, "spp under 1F1B gained on %s on the PCIe server"
              " (from %d ms)" % (model, before), "%s ms" % now)
        figures["pcie_%s_1f1b_ms" % model.replace("-", "_")] = fixed(now, 0)
    return figures


def where_it_does_not(results):
    """Fast homogeneous interconnects, fixed orders, the partition bound."""
    figures = {}
    homogeneous = [row for row in results.summary_rows("dgx1-hybrid-mesh", "two-node-nvlink-ib")
                   if row["best_name"] == "data-parallel"]
    itself = [row for row in homogeneous if re.fullmatch(
        r"0-\d+x\d+", results.pair(row["topology"], row["model"]).row("spp", "list")["stages"])]
    figures["homogeneous_data_parallel"] = word(len(itself))
    figures["homogeneous_pairs"] = word(len(homogeneous))
    figures["homogeneous_least"] = min((row["speed_up"] for row in homogeneous), key=number)
    figures["homogeneous_most"] = max((row["speed_up"] for row in homogeneous), key=number)
    no_gpipe = sorted(pair.name for pair in results.pairs if pair.ms("spp", "gpipe") is None)
    expected = sorted(pair_name(topology, "resnet50")
                      for topology in ("pcie-server", "geo-distributed"))
    claim(no_gpipe == expected, "only resnet50 on the PCIe server and on the geo cluster has no "
          "plan under GPipe", ", ".join(no_gpipe) or "every pair has one")
    above = [number(row["vs_partition"]) for pair in results.pairs
             if pair.topology == "geo-distributed"
             for row in pair.rows if row["planner"] == "spp" and row["vs_partition"] != "-"
             and row["policy"] in ("list", "1f1b", "gpipe")]
    figures["geo_above_partition"] = rough_times(max(above))
    return figures


def group_shape(stages):
    """`two stages of two 4-way groups, recomputed` for `0-21x2t4r 22-41x2t4r`, when every stage
    has the same replicas, degree and recomputation; None otherwise."""
    shapes = {stage_fields(stage) for stage in stages.split()}
    if len(shapes) != 1:
        return None
    replicas, degree, recomputed = shapes.pop()
    count = len(stages.split())
    text = "%s of %s %d-way groups" % ("one stage" if count == 1 else word(count) + " stages",
                                       word(replicas), degree)
    return text + (", recomputed" if recomputed else "")


def megatron_rows(pair, tensor_parallel=None):
    rows = [row for row in pair.rows if row["planner"].startswith("megatron ")
            and row["ms"] is not None]
    if tensor_parallel is not None:
        rows = [row for row in rows if row["planner"].split()[1] == "t%d" % tensor_parallel]
    return rows


def configuration(row):
    """`t8 p1 d2` (`, recomputed` when its stages are) of a megatron row."""
    text = row["planner"][len("megatron "):]
    return text + (", recomputed" if row["stages"].endswith("r") else "")


def large_models(results):
    """The large-model paragraph: GPT-3 13B on two and eight DGX A100 servers."""
    figures = {}
    two, eight = results.llm["dgx-a100-40gb-2x8"], results.llm["dgx-a100-8x8"]
    spp = two.row("spp", "list")
    plain = [row["planner"] for row in two.rows if row["ms"] is not None and not any(
        degree > 1 or recomputed for _, degree, recomputed in map(
            stage_fields, row["stages"].split()))]
    claim(not plain, "nothing fits on two servers without tensor parallelism or recomputation",
          "plans by " + ", ".join(plain))
    shape = group_shape(spp["stages"])
    claim(shape is not None, "spp's plan on two servers has stages of one shape", spp["stages"])
    best = min(megatron_rows(two), key=lambda row: row["ms"])
    best_t1 = min(megatron_rows(two, 1), key=lambda row: row["ms"])
    claim(spp["ms"] < best["ms"], "spp is faster than every Megatron configuration on two "
          "servers", "%s against %s" % (spp["iteration"], best["iteration"]))
    figures.update({
        "llm_two_spp_shape": shape, "llm_two_spp": spp["iteration"],
        "llm_two_over_megatron": times(best["ms"] / spp["ms"]),
        "llm_two_megatron": configuration(best), "llm_two_megatron_time": best["iteration"],
        "llm_two_over_t1": times(best_t1["ms"] / spp["ms"]),
        "llm_two_t1": configuration(best_t1), "llm_two_t1_time": best_t1["iteration"]})
    spp = eight.row("spp", "list")
    best = min(megatron_rows(eight), key=lambda row: row["ms"])
    claim(spp["ms"] < best["ms"] and best["planner"] == "megatron t8 p1 d8"
          and spp["stages"] == best["stages"],
          "spp plans Megatron's t8 p1 d8 shape on eight servers, faster",
          "spp %s (%s), %s %s (%s)" % (spp["iteration"], spp["stages"], best["planner"],
                                       best["iteration"], best["stages"]))
    one_stage = [row for row in eight.rows if row["ms"] is not None and row["policy"] != "zb-v"]
    claim(all(row["ms"] >= spp["ms"] for row in one_stage),
          "no plan with one stage per device is faster than spp's on eight servers",
          ", ".join("%s %s" % (row["planner"], row["iteration"]) for row in one_stage
                    if row["ms"] < spp["ms"]))
    spread = eight.row("spp", "zb-v")
    claim(spread["ms"] is not None and spread["ms"] < spp["ms"],
          "spp's zb-v row is faster on eight servers", spread["iteration"])
    figures.update({"llm_eight_spp": spp["iteration"],
                    "llm_eight_megatron_time": best["iteration"],
                    "llm_eight_zb_v": spread["iteration"]})
    with open(RUNS) as f:  # the count of published runs, docs/validation.md's source
        figures["validation_runs"] = str(len(json.load(f)["runs"]))
    return figures


# ---------------------------------------------------------------------------------------------
# docs/validation.md: the published runs (validate.py) and the Zero Bubble schedules
# (schedules.py).

VALIDATE_BEGIN = "<!-- validate.py: begin"
VALIDATE_END = "<!-- validate.py: end -->"
SCHEDULES_BEGIN = "<!-- schedules.py: begin"
SCHEDULES_END = "<!-- schedules.py: end -->"

# How the prose names the schedules spp chooses, in the order it lists them.
SCHEDULE_NAMES = {"zb-v": "zb-v", "zb-h1": "zb-h1", "interleaved-1f1b": "interleaved 1F1B",
                  "looped-bfs": "looped BFS", "gpipe": "GPipe", "1f1b": "1F1B",
                  "list": "the list schedule"}


# The settings validate.py writes after a plan's schedule (`settings`): what spp chose.
SETTINGS = ("sharded", "SP on", "SP off", "selective on", "selective off")


def plan_shape(text):
    """The fields of a plan's shape `0.93 (4 stages, t 4, r 1, b 1, 2 per device, zb-v,
    sharded, SP on), 1.48x` (validate.py's spp column, schedules.py's last one); the settings
    after the schedule are optional."""
    match = re.fullmatch(r"([\d.]+) \((.*)\)(?:, ([\d.]+x))?", text)
    if not match:
        raise ClaimError("unreadable plan %r" % text)
    figure, inside, speed_up = match.groups()
    parts = inside.split(", ")
    settings = []
    while parts and parts[-1] in SETTINGS:
        settings.insert(0, parts.pop())
    shape = {"figure": Decimal(figure), "speed_up": speed_up, "schedule": parts[-1],
             "stages": int(parts[0].split()[0]), "per_device": 1, "recomputed": 0,
             "settings": settings}
    for part in parts[1:-1]:
        key, _, value = part.partition(" ")
        if key in ("t", "r", "b"):
            shape[key] = [int(v) for v in value.split("/")]
        elif part.endswith(" per device"):
            shape["per_device"] = int(key)
        elif part.endswith(" recomputed"):
            shape["recomputed"] = int(key)
    return shape


class Validation:
    """The generated part of docs/validation.md written by validate.py."""

    def __init__(self, text):
        generated = section(text, VALIDATE_BEGIN, VALIDATE_END)
        self.runs = []
        for row in table_rows(generated, "| run | model |"):
            run = {"id": row[0].split(" [")[0], "model": row[1], "gpus": int(row[2].split()[0]),
                   "degrees": [int(v) for v in row[3].split("/")], "global_batch": int(row[5]),
                   "recomputation": row[7], "estimate": row[9], "error": row[10],
                   "spp": row[11]}
            run["team"] = run["id"].split("-")[0]
            self.runs.append(run)
        self.notes = bullets(generated, "Notes:")
        self.scaling = {}
        for item in bullets(generated, "Scaling (each run's estimated speed-up over the series'"
                                       " first run, divided by the measured one, minus 1):"):
            name, points = re.fullmatch(r"(\S+) \(from \S+\): (.*)", item).groups()
            self.scaling[name] = [point.split()[1] for point in points.split(", ")]
        self.sources = {}
        for item in bullets(generated, "By source (runs of one team's code share its "
                                       "per-unit-of-work speed):"):
            name, median = re.fullmatch(r"(\S+): median error ([-+\d.]+)% over .*", item).groups()
            self.sources[name] = median
        self.groups = {}
        for item in bullets(generated, "Median absolute error of the published configurations:"):
            group, median, count = re.fullmatch(r"(\w+) runs: ([\d.]+)% over (\d+) runs.*",
                                                item).groups()
            self.groups[group] = (median, int(count))

    def team(self, name):
        return [run for run in self.runs if run["team"] == name]

    def run(self, run_id):
        for run in self.runs:
            if run["id"] == run_id:
                return run
        raise ClaimError("no run %s in the table" % run_id)


def error_range(runs):
    """The least and the most optimistic errors of `runs` (`10.9`, `13.5`), all optimistic."""
    errors = [number(run["error"]) for run in runs]
    claim(all(error < 0 for error in errors), "the runs of %s are all optimistic"
          % runs[0]["team"], ", ".join(run["error"] for run in runs))
    return str(-max(errors)), str(-min(errors))


def median_text(values):
    return fixed(statistics.median(values), 1)


def speed_ups(runs):
    values = [number(plan_shape(run["spp"])["speed_up"]) for run in runs]
    return min(values), max(values)


def validation_results(text):
    """The figures of docs/validation.md's results (examples/prose/validation-results.md.in)."""
    table = Validation(text)
    runs = table.runs
    figures = {"runs": str(len(runs))}
    unplanned = [run["id"] for run in runs if run["estimate"] == "refused"
                 or not run["spp"][0].isdigit()]
    claim(not unplanned, "every run is planned, published and by spp", ", ".join(unplanned))

    korthikanti = table.team("korthikanti")
    korthikanti_errors = [number(run["error"]) for run in korthikanti]
    median = table.sources["korthikanti"]
    claim(median.startswith("-"), "Korthikanti's runs are optimistic on the median", median)
    figures.update({"korthikanti_runs": str(len(korthikanti)),
                    "korthikanti_median_signed": median,
                    "korthikanti_most_optimistic": signed(min(korthikanti_errors)),
                    "korthikanti_least_optimistic": signed(max(korthikanti_errors))})
    interleaved = [run for run in korthikanti if any(
        note.startswith(run["id"] + ": the measured run used interleaved 1F1B")
        for note in table.notes)]
    inter_errors = [number(run["error"]) for run in interleaved]
    figures["korthikanti_interleaved"] = word(len(interleaved))
    figures["korthikanti_interleaved_least"] = str(max(inter_errors))
    figures["korthikanti_interleaved_most"] = str(min(inter_errors))
    figures["korthikanti_interleaved_least_rounded"] = fixed(max(inter_errors), 0)
    figures["korthikanti_interleaved_most_rounded"] = fixed(min(inter_errors), 0)
    trillion = [run for run in korthikanti if run["model"].endswith(" 1T")]
    claim(len(trillion) == 2 and not set(map(id, trillion)) & set(map(id, interleaved)),
          "the two 1T runs are not interleaved", ", ".join(run["id"] for run in trillion))
    figures["trillion_full"], figures["trillion_selective"] = [
        signed(number(run["error"])) for run in trillion]

    narayanan = table.team("narayanan")
    figures["narayanan_runs"] = str(len(narayanan))
    figures["narayanan_gpus_least"] = thousands(min(run["gpus"] for run in narayanan))
    figures["narayanan_gpus_most"] = thousands(max(run["gpus"] for run in narayanan))
    figures["narayanan_least"], figures["narayanan_most"] = error_range(narayanan)
    figures["narayanan_median_signed"] = table.sources["narayanan"]
    both = [abs(number(run["error"])) for run in korthikanti + narayanan]
    figures["megatron_team_runs"] = str(len(both))
    figures["megatron_team_median"] = median_text(both)

    mt_nlg = table.team("mt")
    figures["mt_nlg_runs"] = str(len(mt_nlg))
    figures["mt_nlg_least"], figures["mt_nlg_most"] = error_range(mt_nlg)
    mt_2240, narayanan_2240 = table.run("mt-nlg-2240"), table.run("narayanan-530b-2240")
    claim(mt_2240["gpus"] == narayanan_2240["gpus"] == 2240 and mt_2240["global_batch"] == 1920
          and narayanan_2240["global_batch"] == 2240, "MT-NLG ran 1,920 sequences and Narayanan"
          " 2,240 on the same 2,240 GPUs", "otherwise")
    figures["mt_nlg_2240_estimate"] = fixed(Decimal(mt_2240["estimate"]), 1)
    figures["narayanan_2240_estimate"] = fixed(Decimal(narayanan_2240["estimate"]), 1)
    bloom = table.team("bloom")
    claim(len(bloom) == 1, "one BLOOM run", str(len(bloom)))
    figures["bloom_error"] = error_range(bloom)[0]

    large_median, large_runs = table.groups["large"]
    outside = sorted({run["team"] for run in runs if run["team"] != "megatron"
                      and abs(number(run["error"])) > 10})
    claim(Decimal(large_median) <= 10 and outside == ["bloom", "mt"],
          "the large runs' median is within the 10 % target, the MT-NLG and BLOOM rows outside "
          "it", "%s %% (outside: %s)" % (large_median, ", ".join(outside)))
    figures["large_runs"], figures["large_median"] = str(large_runs), large_median
    small = table.team("megatron")
    small_median = table.groups["small"][0]
    least, most = error_range(small)
    claim(Decimal(most) < 25, "the small runs are within the 25 % target", most)
    figures.update({"small_least": fixed(Decimal(least), 0), "small_most": fixed(Decimal(most), 0),
                    "small_median": small_median})

    scaling = [number(value) for values in table.scaling.values() for value in values]
    claim(all(abs(value) <= 5 for value in scaling), "scaling is within 5 % on every series",
          ", ".join(map(str, scaling)))
    narayanan_scaling = [number(value) for name, values in table.scaling.items()
                         if name.startswith("narayanan") for value in values]
    figures["scaling_narayanan_least"] = "%+.1f" % min(narayanan_scaling)
    figures["scaling_narayanan_most"] = "%+.1f" % max(narayanan_scaling)
    mt_scaling = table.scaling["mt-nlg"]
    claim(len(mt_scaling) == 2, "MT-NLG's series has three node counts", str(len(mt_scaling) + 1))
    figures["scaling_mt_nlg_first"], figures["scaling_mt_nlg_second"] = [
        value.rstrip("%") for value in mt_scaling]

    figures.update(spp_against_published(table))
    sizes = max(sum(1 for b in range(1, run["global_batch"] + 1) if run["global_batch"] % b == 0)
                for run in runs)
    figures["most_micro_batch_sizes"] = str(sizes)
    return figures


def spp_against_published(table):
    """The paragraph "Does spp beat the published configuration?"."""
    figures = {}
    slower = [run["id"] for run in table.runs if number(plan_shape(run["spp"])["speed_up"]) <= 1]
    claim(not slower, "spp is faster than every published configuration", ", ".join(slower))

    def span(runs, format_=times):
        least, most = speed_ups(runs)
        return format_(least), format_(most)

    figures["spp_least"], figures["spp_most"] = span(table.runs)
    full = [run for run in table.runs if run["recomputation"] == "full"]
    figures["full_runs"] = str(len(full))
    selective = [run for run in full if "selective on" in plan_shape(run["spp"])["settings"]]
    claim(2 * len(selective) > len(full), "spp turns selective recomputation on in most runs "
          "that recomputed every layer", "%d of %d" % (len(selective), len(full)))
    figures["full_selective"] = str(len(selective))
    sharded = [run for run in table.runs if "sharded" in plan_shape(run["spp"])["settings"]]
    figures["sharded_runs"] = str(len(sharded))
    seqsel = [run for run in table.runs if run["recomputation"].startswith("selective")]
    figures["seqsel_runs"] = word(len(seqsel))
    figures["seqsel_least"], figures["seqsel_most"] = span(seqsel)
    chosen = {plan_shape(run["spp"])["schedule"] for run in seqsel}
    claim(chosen <= set(SCHEDULE_NAMES), "spp's schedules have prose names",
          ", ".join(sorted(chosen - set(SCHEDULE_NAMES))))
    figures["seqsel_schedules"] = alternatives(
        name for key, name in SCHEDULE_NAMES.items() if key in chosen)
    figures["narayanan_175b_least"], figures["narayanan_175b_most"] = span(
        [run for run in table.team("narayanan") if "-175b-" in run["id"]])
    for run in table.team("narayanan"):
        if "-175b-" in run["id"]:
            shape = plan_shape(run["spp"])
            claim(not shape["recomputed"] and shape["stages"] > run["degrees"][1] and
                  max(shape["r"]) > 1, "spp's plans of Narayanan's 175B runs have more stages, "
                  "data parallelism and no recomputation", run["id"] + ": " + run["spp"])
    gpt2 = table.team("megatron")
    claim(all(run["degrees"][2] == 64 for run in gpt2), "the GPT-2 runs are 64-way data "
          "parallel", ", ".join(run["id"] for run in gpt2))
    figures["gpt2_least"], figures["gpt2_most"] = span(gpt2, rough_times)
    return figures


class Schedules:
    """The generated part of docs/validation.md written by schedules.py."""

    def __init__(self, text):
        generated = section(text, SCHEDULES_BEGIN, SCHEDULES_END)
        header = [line for line in generated.splitlines()
                  if line.startswith("| model | GPUs |")][0]
        self.names = cells(header)[3:-1]
        self.rows = []
        for row in table_rows(generated, "| model | GPUs |"):
            entry = {"model": row[0], "gpus": int(row[1]), "size": int(row[2].split(" x ")[1]),
                     "spp": plan_shape(row[-1]), "measured": {}, "estimate": {}, "error": {}}
            for name, cell in zip(self.names, row[3:-1]):
                match = re.fullmatch(r"([\d.]+) / (?:([\d.]+) \(([-+\d.]+)%\)|refused)", cell)
                entry["measured"][name] = Decimal(match.group(1))
                if match.group(2):
                    entry["estimate"][name] = Decimal(match.group(2))
                    entry["error"][name] = Decimal(match.group(3))
            self.rows.append(entry)
        self.ratios = []
        for row in table_rows(generated, "| model | micro-batches |"):
            entry = {"model": row[0]}
            for name, cell in zip(self.names[1:], row[2:]):
                measured, estimated = cell.split(" / ")
                entry[name] = (number(measured), None if estimated == "-" else number(estimated))
            self.ratios.append(entry)


def validation_schedules(text):
    """The figures of docs/validation.md's schedule readings
    (examples/prose/validation-schedules.md.in)."""
    table = Schedules(text)
    claim(table.names == ["1F1B", "1F1B-I", "ZB-1p", "ZB-2p"],
          "the four schedules are 1F1B, 1F1B-I, ZB-1p and ZB-2p", ", ".join(table.names))
    figures = {"schedule_rows": str(len(table.ratios))}
    zb1 = [row["ZB-1p"] for row in table.ratios]
    claim(all(estimated is not None for _, estimated in zb1), "ZB-1p is estimated on every row",
          "a refused row")
    figures["zb1_gap"] = fixed(max(abs(measured - estimated) for measured, estimated in zb1), 2)
    figures["zb1_estimated_least"] = times(min(estimated for _, estimated in zb1))
    figures["zb1_estimated_most"] = times(max(estimated for _, estimated in zb1))
    figures["zb1_measured_least"] = times(min(measured for measured, _ in zb1))
    figures["zb1_measured_most"] = times(max(measured for measured, _ in zb1))
    zb2 = [measured - estimated for measured, estimated in (row["ZB-2p"] for row in table.ratios)]
    claim(all(gap > 0 for gap in zb2), "ZB-2p's gain is underestimated on every row",
          ", ".join(map(str, zb2)))
    figures["zb2_gap_least"], figures["zb2_gap_most"] = fixed(min(zb2), 2), fixed(max(zb2), 2)

    models = list(dict.fromkeys(row["model"] for row in table.ratios))
    under = [model for model in models if all(
        row["1F1B-I"][1] is not None and row["1F1B-I"][1] < row["1F1B-I"][0]
        for row in table.ratios if row["model"] == model)]
    refused = [model for model in models if all(
        row["1F1B-I"][1] is None for row in table.ratios if row["model"] == model)]
    claim(under == ["1.5B", "14.6B"] and refused == ["28.3B"], "interleaving is underestimated "
          "on 1.5B and 14.6B, and refused on 28.3B", "underestimated on %s, refused on %s"
          % (series(under) if under else "none", series(refused) if refused else "none"))

    def errors(model_test):
        return [row["error"]["1F1B"] for row in table.rows if model_test(row["model"])]

    large = errors(lambda model: model != "1.5B")
    claim(all(error < 0 for error in large), "1F1B is optimistic from 6.2B up",
          ", ".join(map(str, large)))
    figures["optimistic_from_6b"] = fixed(-statistics.median(large), 0)
    figures["close_on_1b"] = ceiling(max(abs(error) for error in errors(lambda m: m == "1.5B")))
    claim(models[0] == "1.5B" and models[1] == "6.2B", "the models start with 1.5B and 6.2B",
          ", ".join(models))
    slower = ["%s %s" % (row["model"], name) for row in table.rows
              for name, estimate in row["estimate"].items() if row["spp"]["figure"] < estimate]
    claim(not slower, "spp --schedule auto is never slower than any of the four schedules",
          ", ".join(slower))
    small = [row for row in table.rows if row["model"] == "1.5B"]
    stages = {row["spp"]["stages"] for row in small}
    gpus = {row["spp"]["stages"] * row["spp"]["r"][0] // row["spp"]["per_device"] for row in small}
    claim(len(stages) == 1 and gpus == {small[0]["gpus"]}, "spp keeps the same number of stages "
          "shared by all the GPUs on the 1.5B model", "stages %s on %s GPUs" % (stages, gpus))
    figures["small_spp_stages"] = str(stages.pop())
    figures["small_gpus"] = str(small[0]["gpus"])
    figures["small_spp_replicas"] = alternatives(
        str(r) for r in sorted({row["spp"]["r"][0] for row in small}))
    return figures


# ---------------------------------------------------------------------------------------------
# docs/validation.md: the H100-era runs (examples/validation/h100.py).

H100_BEGIN = "<!-- h100.py: begin"
H100_END = "<!-- h100.py: end -->"


class H100Table:
    """One precision's part of the section h100.py writes: its rows, the composition of each
    estimate and the weak-scaling lines."""

    def __init__(self, part):
        self.rows = []
        for row in table_rows(part, "| run [source] |"):
            self.rows.append({"id": row[0].split(" [")[0], "estimate": row[10],
                              "error": number(row[11]) if row[11] else None, "spp": row[12],
                              "stages": int(row[3].split("/")[1]) * int(row[4]),
                              "micro_batches": int(row[6]) // int(row[5])})
        self.parts = {}
        if "| run | measured s | pipeplan s |" in part:
            for row in table_rows(part, "| run | measured s | pipeplan s |"):
                self.parts[row[0]] = {"measured": Decimal(row[1]), "compute": Decimal(row[3]),
                                      "tp": Decimal(row[4]), "dp": Decimal(row[5]),
                                      "ratio": Decimal(row[6])}
        heading = [line for line in part.splitlines() if line.startswith("Weak scaling")][0]
        self.scaling = {item.split(" (")[0]: item for item in bullets(part, heading)}
        self.refusals = bullets(part, "Refusals:") if "\nRefusals:\n" in part else []

    def estimated(self, prefix=""):
        return [row for row in self.rows if row["error"] is not None
                and row["id"].startswith(prefix)]

    def errors(self, *prefixes):
        return [row["error"] for prefix in prefixes for row in self.estimated(prefix)]


# The most tasks of a plan a search (spp) considers: planners::kMaxSearchTasks.
SEARCH_TASKS = 2 ** 19


def published_tasks(row):
    """The tasks of a row's published plan: 4 S M - 2 M (forwards, backwards, transfers)."""
    return 4 * row["stages"] * row["micro_batches"] - 2 * row["micro_batches"]


def signed(value):
    return ("+" if value > 0 else "") + str(value)


def validation_h100(text):
    """The figures of docs/validation.md's H100 readings (examples/prose/validation-h100.md.in)."""
    generated = section(text, H100_BEGIN, H100_END)
    bf16 = H100Table(section(generated, "### BF16 runs", "### FP8 runs"))
    fp8 = H100Table(section(generated, "### FP8 runs", "\nNotes:"))
    figures = {"bf16_rows": str(len(bf16.rows)), "bf16_estimated": str(len(bf16.estimated()))}
    estimates = [row["estimate"] for row in bf16.rows]
    claim("needs context parallelism" not in estimates, "every context-parallel run is"
          " planned with --context-parallel", "a row still needs context parallelism")
    cp_rows = [row for row in bf16.estimated() if row["id"].startswith("dgxc-llama3.1")
               or row["id"].endswith("-cp16")]
    figures["cp_estimated"] = str(len(cp_rows))
    claim(not any("more than" in e for e in estimates), "every run is within the GPUs pipeplan"
          " plans", ", ".join(e for e in estimates if "more than" in e))
    refused = [row["id"] for row in bf16.rows if row["estimate"] == "refused"]
    claim(not refused and not bf16.refusals, "no BF16 run is refused",
          ", ".join(refused + bf16.refusals))
    beyond = [row for row in bf16.estimated() if published_tasks(row) > SEARCH_TASKS]
    claim(beyond and all(row["id"].startswith(("dgxc-gpt3", "nemotron4-340b")) for row in beyond),
          "the runs beyond a search's task limit are GPT-3's and Nemotron-4 340B's",
          ", ".join(row["id"] for row in beyond))
    figures["limit_rows"] = word(len(beyond))
    figures["largest_tasks"] = "{:,}".format(max(published_tasks(row) for row in beyond))
    figures["limit_errors"] = series(["%s %s %%" % (row["id"], row["error"]) for row in beyond])
    errors = [abs(row["error"]) for row in bf16.estimated()]
    figures["bf16_median"] = median_text(errors)
    figures["bf16_within"] = str(sum(error <= 15 for error in errors))
    outside = [row["id"] for row in bf16.estimated() if abs(row["error"]) > 15]
    claim(statistics.median(errors) <= 8 and outside[0] == "llama3-405b-16384"
          and all(row.startswith("torchtitan-8b-fsdp") for row in outside[1:]),
          "the median target is met and only Llama 3 405B on 16,384 GPUs and torchtitan's"
          " FSDP runs are outside 15 %",
          "median %s, outside: %s" % (median_text(errors), ", ".join(outside)))
    figures["bf16_outside"] = series(outside)
    figures["bf16_outside_count"] = word(len(outside))
    torchtitan = bf16.errors("torchtitan-8b-fsdp")
    claim(len(torchtitan) == 4 and all(error < -15 for error in torchtitan), "torchtitan's four"
          " runs are estimated, optimistic beyond 15 %", ", ".join(map(str, torchtitan)))
    figures["torchtitan_least"] = str(-max(torchtitan))
    figures["torchtitan_most"] = str(-min(torchtitan))
    llama3 = bf16.errors("llama3-405b")
    claim(len(llama3) == 3 and all(error > 0 for error in llama3), "Meta's three Llama 3"
          " runs are estimated, pessimistic", ", ".join(map(str, llama3)))
    figures["llama3_least"], figures["llama3_most"] = str(min(llama3)), str(max(llama3))
    n340_128 = bf16.errors("dgxc-nemotron4-340b-bf16-128")
    claim(len(n340_128) == 1 and abs(n340_128[0]) <= 15, "the 340B run on 128 GPUs is"
          " estimated, within 15 %", ", ".join(map(str, n340_128)))
    figures["n340_128_error"] = str(n340_128[0])
    cp_errors = bf16.errors("dgxc-llama3.1")
    claim(all(error < 0 for error in cp_errors), "every context-parallel run is optimistic",
          ", ".join(map(str, cp_errors)))
    figures["cp_least"], figures["cp_most"] = str(-max(cp_errors)), str(-min(cp_errors))
    n15 = bf16.errors("dgxc-nemotron4-15b")
    claim(all(0 < error < 15 for error in n15), "the 15B rows are pessimistic, within 15 %",
          ", ".join(map(str, n15)))
    figures["n15_least"], figures["n15_most"] = str(min(n15)), str(max(n15))
    pipelined = bf16.errors("dgxc-gpt3", "dgxc-nemotron4-340b")
    claim(all(error < 0 for error in pipelined), "every pipelined run is optimistic",
          ", ".join(map(str, pipelined)))
    figures["pipelined_least"] = str(-max(pipelined))
    figures["pipelined_most"] = str(-min(pipelined))
    both = [part["ratio"] for run, part in bf16.parts.items()
            if run.startswith(("dgxc-gpt3", "dgxc-nemotron4-15b"))]
    figures["ratio_least"], figures["ratio_most"] = str(min(both)), str(max(both))
    big = [part for run, part in bf16.parts.items() if run.startswith("dgxc-nemotron4-340b")]
    figures["ratio340_least"] = str(min(part["ratio"] for part in big))
    figures["ratio340_most"] = str(max(part["ratio"] for part in big))
    exposed = [(part["measured"] - part["tp"]) / part["compute"] for part in big]
    figures["exposed340_least"] = fixed(min(exposed), 2)
    figures["exposed340_most"] = fixed(max(exposed), 2)
    claim(all(Decimal("1.1") <= value <= Decimal("1.35") for value in both + exposed),
          "about a fifth more time than the modelled compute is left on all three models",
          ", ".join(map(str, both + exposed)))
    for key, prefix in (("share15", "dgxc-nemotron4-15b"), ("share_gpt3", "dgxc-gpt3")):
        shares = [100 * (part["tp"] + part["dp"]) / part["compute"]
                  for run, part in bf16.parts.items() if run.startswith(prefix)]
        figures[key + "_least"] = fixed(min(shares), 0)
        figures[key + "_most"] = fixed(max(shares), 0)
    line = bf16.scaling["dgxc-nemotron4-15b-bf16"]
    match = re.search(r"measured ([\d.]+), estimated ([\d.]+), ([-+\d.]+%) \(within 5%\)",
                      line)
    claim(match is not None, "the 15B series is estimated within 5 %", line)
    (figures["n15_scaling_measured"], figures["n15_scaling_estimated"],
     figures["n15_scaling_off"]) = match.groups()
    match = re.search(r"measured ([\d.]+), estimated ([\d.]+), ([-+\d.]+%) \(within 5%\)",
                      bf16.scaling["dgxc-nemotron4-340b-bf16"])
    claim(match is not None, "the 340B series is estimated whole, within 5 %",
          bf16.scaling["dgxc-nemotron4-340b-bf16"])
    (figures["n340_scaling_measured"], figures["n340_scaling_estimated"],
     figures["n340_scaling_off"]) = match.groups()
    match = re.search(r"measured ([\d.]+), estimated ([\d.]+), ([-+\d.]+%) \(within 5%\)",
                      bf16.scaling["dgxc-gpt3-175b-bf16"])
    claim(match is not None, "the GPT-3 series is estimated whole, within 5 %",
          bf16.scaling["dgxc-gpt3-175b-bf16"])
    (figures["gpt3_scaling_measured"], figures["gpt3_scaling_estimated"],
     figures["gpt3_scaling_off"]) = match.groups()
    claim(all("(within 5%)" in line for line in bf16.scaling.values()), "every BF16 weak-scaling"
          " series is estimated within 5 %", ", ".join(bf16.scaling.values()))
    (figures["tt_scaling_measured"], figures["tt_scaling_estimated"],
     figures["tt_scaling_off"]) = re.search(
         r"measured ([\d.]+), estimated ([\d.]+), ([-+\d.]+%)",
         bf16.scaling["torchtitan-8b-fsdp"]).groups()
    figures["tt_compile_scaling_off"] = re.search(
        r"([-+\d.]+%) \(within", bf16.scaling["torchtitan-8b-fsdp-compile"]).group(1)
    fp8_errors = [abs(row["error"]) for row in fp8.estimated()]
    figures["fp8_estimated"] = str(len(fp8_errors))
    figures["fp8_median"] = median_text(fp8_errors)
    claim(statistics.median(fp8_errors) > statistics.median(errors), "FP8 is estimated less"
          " well than BF16", "%s against %s" % (median_text(fp8_errors), median_text(errors)))
    ratios = [part["ratio"] for run, part in fp8.parts.items()
              if run.startswith(("dgxc-gpt3", "dgxc-nemotron4-15b"))]
    claim(min(ratios) > max(both), "FP8's ratios on GPT-3 and the 15B model are above BF16's",
          ", ".join(map(str, ratios)))
    figures["fp8_ratio_least"], figures["fp8_ratio_most"] = str(min(ratios)), str(max(ratios))
    for name, prefix in (("spp_15b", "dgxc-nemotron4-15b"), ("spp_340b", "dgxc-nemotron4-340b")):
        values = [number(plan_shape(row["spp"])["speed_up"]) for row in bf16.estimated(prefix)]
        figures[name + "_least"] = times(min(values))
        figures[name + "_most"] = times(max(values))
    llama3_spp = [number(plan_shape(row["spp"])["speed_up"])
                  for row in bf16.estimated("llama3-405b-16384")
                  if row["id"] == "llama3-405b-16384"]
    claim(len(llama3_spp) == 1 and llama3_spp[0] > 1, "spp is faster than Meta's published"
          " configuration on 16,384 GPUs", ", ".join(map(str, llama3_spp)))
    figures["spp_llama3_16384"] = times(llama3_spp[0])
    shapes = [row["spp"] for row in bf16.estimated("llama3-405b-16384")
              if row["id"] == "llama3-405b-16384"]
    claim(all("128 stages, t 8, r 64," in shape and "4 per device" in shape for shape in shapes),
          "spp plans Meta's run on 32 pipeline positions of four chunks", ", ".join(shapes))
    shapes = [row["spp"] for row in bf16.estimated("dgxc-nemotron4-340b")]
    claim(all("96 stages, t 8," in shape and "24 per device" in shape for shape in shapes),
          "spp plans the 340B runs as 96 one-layer chunks on 4 pipeline positions",
          ", ".join(shapes))
    rows = bf16.estimated() + fp8.estimated()
    every = [number(plan_shape(row["spp"])["speed_up"]) for row in rows]
    figures["spp_all_least"], figures["spp_all_most"] = times(min(every)), times(max(every))
    slower = [row["id"] for row in rows
              if plan_shape(row["spp"])["figure"] > number(row["estimate"])]
    claim(not slower, "spp is at least as fast as every published configuration", ", ".join(slower))
    beyond = [row for row in rows if published_tasks(row) > SEARCH_TASKS]
    claim(beyond and all(row["id"].startswith(("dgxc-gpt3-175b", "nemotron4-340b"))
                         for row in beyond),
          "the published plans past a search's task limit are GPT-3 175B's and Nemotron-4 340B's",
          ", ".join(row["id"] for row in beyond))
    figures["spp_beyond"] = series(sorted(row["id"] for row in beyond))
    figures["beyond_tasks"] = "{:,}".format(max(published_tasks(row) for row in beyond))
    speed_ups = [number(plan_shape(row["spp"])["speed_up"]) for row in beyond]
    figures["spp_beyond_least"] = times(min(speed_ups))
    figures["spp_beyond_most"] = times(max(speed_ups))
    interleaved = {plan_shape(row["spp"])["schedule"]
                   for row in bf16.estimated("dgxc-nemotron4-340b")}
    claim(number(figures["spp_15b_least"]) > 1 and number(figures["spp_340b_least"]) > 1 and
          interleaved == {"interleaved-1f1b"},
          "spp is faster on the 15B and 340B runs, interleaving the 340B runs",
          "%s to %s and %s to %s (%s)" % (figures["spp_15b_least"], figures["spp_15b_most"],
                                          figures["spp_340b_least"], figures["spp_340b_most"],
                                          ", ".join(sorted(interleaved))))
    return figures


# ---------------------------------------------------------------------------------------------
# Templates and documents.

TEMPLATES = {
    "results-findings": results_findings,
    "validation-results": validation_results,
    "validation-schedules": validation_schedules,
    "validation-h100": validation_h100,
}


def markers(name):
    return ("<!-- prose.py: %s begin (generated; edit examples/prose/%s.md.in, not this part) -->"
            % (name, name), "<!-- prose.py: %s end -->" % name)


def fill(template, figures, name):
    """`template` with every `{{figure}}` replaced; every figure must be used."""
    used = set()

    def replace(match):
        key = match.group(1)
        if key not in figures:
            raise ClaimError("examples/prose/%s.md.in: no figure {{%s}}" % (name, key))
        used.add(key)
        return figures[key]

    text = re.sub(r"\{\{(\w+)\}\}", replace, template)
    unused = sorted(set(figures) - used)
    if unused:
        raise ClaimError("examples/prose/%s.md.in uses no {{%s}}" % (name, "}}, {{".join(unused)))
    return text


def rewrap(text, width=100):
    """`text` with each line over `width` columns (a figure or a list longer than the template's
    line was written for) broken at spaces, greedily, its continuations indented as a list
    item's; every other line as the template has it."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = "  " if line.startswith(("* ", "  ")) else ""
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False)
    return "\n".join(out)


def render(text):
    """`text` with the prose between each pair of markers written from its template and the
    tables of `text`."""
    found = False
    for name, figures_of in TEMPLATES.items():
        begin, end = markers(name)
        if begin not in text:
            continue
        found = True
        if text.count(begin) != 1 or text.count(end) != 1 or text.index(end) < text.index(begin):
            raise ClaimError("markers of %s: one begin, then one end" % name)
        try:
            figures = figures_of(text)
        except ClaimError as error:
            raise ClaimError("examples/prose/%s.md.in: %s" % (name, error)) from None
        with open(os.path.join(HERE, name + ".md.in")) as f:
            prose = rewrap(fill(f.read(), figures, name))
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        text = head + begin + "\n\n" + prose + "\n" + end + tail
    if not found:
        raise ClaimError("no prose markers (<!-- prose.py: NAME begin ... -->)")
    return text


def update(path, check=False):
    """Writes the prose of the document at `path`; with `check`, returns whether it is already
    what render gives (and prints the difference when not)."""
    with open(path) as f:
        text = f.read()
    try:
        expected = render(text)
    except ClaimError as error:
        sys.exit("prose.py: %s: %s" % (path, error))
    if check:
        if expected != text:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), expected.splitlines(True), path, "from its tables"))
            return False
        return True
    if expected != text:
        with open(path, "w") as out:
            out.write(expected)
    return True


def main(argv):
    check = "--check" in argv[1:]
    paths = [arg for arg in argv[1:] if arg != "--check"] or [
        os.path.join(ROOT, "docs", "results.md"), os.path.join(ROOT, "docs", "validation.md")]
    ok = all([update(path, check) for path in paths])
    if not ok:
        print("prose.py: the prose above is not what its template and the tables give; run "
              "examples/prose/prose.py to rewrite it", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
