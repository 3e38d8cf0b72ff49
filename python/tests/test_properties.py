"""Property tests (hypothesis, Debian's python3-hypothesis) over pipeplan_torch's command line:
whatever text an option is given, parsing either accepts a value that meets the option's rule or
raises the usage error naming the option, never another exception (issue 34); and over run's
check of a ranks export's order (issue 34 item 8): real exports pass, and whatever an order is
made into (malformed entries included), check_order accepts it or refuses it with one line
naming the rank and operation (or the entry), as an independent reading of its rules does,
check_operations raises nothing but InputError either, and what check_order accepts never waits
for a send that no other rank still has to make."""

import collections
import functools
import json
import math
import os
import re
import tempfile
import unittest
from typing import Any, Optional

from hypothesis import given, note, settings
from hypothesis import strategies as st

from pipeplan_torch import common, run
from pipeplan_torch.__main__ import parser
from pipeplan_torch.common import UsageError

from . import support

# Text of any kind, and text that looks like what users type.
TEXT = st.one_of(st.text(max_size=16),
                 st.from_regex(r"-?[0-9]{0,4}(\.[0-9]{0,3})?(e-?[0-9]{1,3})?", fullmatch=True),
                 st.sampled_from(["nan", "inf", "-inf", "0x10", "1_000", " 3", "016", "+5"]))


def parse(*argv):
    return parser().parse_args(list(argv))


class ArgumentPropertyTest(unittest.TestCase):
    def refused(self, option, argv):
        with self.assertRaises(UsageError) as caught:
            parse(*argv)
        self.assertIn(option, str(caught.exception))

    @settings(max_examples=300, deadline=None)
    @given(TEXT)
    def test_integers_are_decimal_digits_from_one(self, text):
        argv = ["probe", "--ranks", "2", "--threads", text, "-o", "t.json"]
        if text.isascii() and text.isdigit() and int(text) >= 1:
            self.assertEqual(parse(*argv).threads, int(text))
        else:
            self.refused("--threads", argv)

    @settings(max_examples=300, deadline=None)
    @given(TEXT)
    def test_timeouts_are_finite_and_positive(self, text):
        argv = ["probe", "--ranks", "2", "--timeout", text, "-o", "t.json"]
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value > 0 and not text.startswith("-"):
            self.assertEqual(parse(*argv).timeout, value)
        else:
            self.refused("--timeout", argv)

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(TEXT, st.builds(lambda n, u: f"{n} {u}", st.integers(0, 10**6),
                                     st.sampled_from(["B", "GiB", "Gib", "GB", "gb", "MiB"]))))
    def test_memory_has_a_unit_pipeplan_reads(self, text):
        argv = ["probe", "--ranks", "2", "--memory", text, "-o", "t.json"]
        units = ("B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
        number, _, unit = text.strip().rpartition(" ")
        plausible = unit in units and number.replace(".", "", 1).isdigit()
        if plausible:
            self.assertEqual(parse(*argv).memory, text)
        else:
            try:
                parse(*argv)
            except UsageError as e:
                self.assertIn("--memory", str(e))


# run.check_order over ranks exports (issue 34 item 8).

Json = dict[str, Any]
PATH = "plan.json"
ORDERED = ("forward", "backward", "send", "recv")  # the operations whose order check_order reads
KINDS = ("activation", "gradient")
MICRO_BATCHES = 2 ** 20  # pipeplan's limit: micro-batch numbers are 0 to 2^20 - 1
REFUSAL = re.compile(r"plan\.json: ranks export: rank ([0-9]+), operation ([0-9]+) \(")
ENTRY_REFUSAL = re.compile(r"plan\.json: ranks export: (?:(?:entry|rank) ([0-9]+): |must be a "
                           r"list of at least one rank, got )")
# check_order's order rules: what follows "(the operation): ", by the rule reference_refusal
# names; any other refusal of an operation is "unreadable".
N = "[0-9]+"
RULES = ((rf"rank {N} never sends it", "unsent"), (rf"rank {N} never receives it", "unreceived"),
         (rf"comes after this rank's forward of micro-batch {N}", "after forward"),
         (rf"comes after this rank's backward of micro-batch {N}", "after backward"),
         (rf"comes before this rank's forward of micro-batch {N}", "forward"),
         (rf"comes before this rank's backward of micro-batch {N}", "backward"),
         (rf"comes before this rank's receive of micro-batch {N}'s activation", "activation"),
         (rf"comes before this rank's receive of micro-batch {N}'s gradient", "gradient"),
         (rf"comes after this rank's send of micro-batch {N}'s gradient, with no receive of "
          rf"its activation between", "sent back"),
         (rf"this rank never receives micro-batch {N}'s activation", "no input"))
ORDER_REFUSAL = re.compile(rf"[^(]*\((forward|backward|send|recv)( activation| gradient)? of "
                           rf"micro-batch {N}\): (.*)")

# Plans of the example models whose exports run executes (v1 and v2 plans without a split
# backward or shared GPUs): every planner, the schedules that order differently, replicated
# and tensor-parallel stages.
MODELS = os.path.join(support.REPO, "examples", "models")
TOPOLOGIES = os.path.join(support.REPO, "examples", "topologies")
REAL_PLANS = (
    ("vgg16", "heterogeneous", ()),
    ("bert-24", "pcie-server", ("--planner", "gpipe")),
    ("resnet50", "two-node-nvlink-ib", ("--planner", "pipedream")),
    ("gnmt", "pcie-server", ("--planner", "uniform", "--schedule", "1f1b")),
    ("amoeba-36", "geo-distributed", ("--schedule", "gpipe")),
    ("bert-48", "heterogeneous", ("-m", "12", "--schedule", "1f1b")),
    ("vgg16", "two-node-nvlink-ib", ("--planner", "data-parallel", "-m", "4")),
    ("resnet50", "pcie-server", ("--shard-optimizer",)),
    ("llm/gpt3-13b-mb8", "llm/dgx-a100-40gb-2x8", ()),
)
# The exports kept in the repository (a plan with replicas; a v2 plan with tensor-parallel
# groups and update operations).
COMMITTED = ("toy.ranks.json", "hand-v2.ranks.json")


def committed_exports() -> list[tuple[str, str]]:
    """(name, JSON text) of the committed exports."""
    out = []
    for name in COMMITTED:
        with open(os.path.join(support.REPO, "tests", "data", "exports", name),
                  encoding="utf-8") as f:
            out.append((name, f.read()))
    return out


@functools.lru_cache(maxsize=None)
def built_exports() -> tuple[tuple[str, str], ...]:
    """(name, JSON text) of REAL_PLANS planned and exported by $PIPEPLAN_BIN now (as run gets
    them: common.ranks_export); none without $PIPEPLAN_BIN."""
    if not os.environ.get("PIPEPLAN_BIN"):
        return ()
    out = []
    with tempfile.TemporaryDirectory(prefix="pipeplan_torch-test-") as folder:
        for model, topology, flags in REAL_PLANS:
            name = f"{model}-{topology}{''.join(flags)}".replace("/", "_")
            model_file = os.path.join(MODELS, model + ".json")
            topology_file = os.path.join(TOPOLOGIES, topology + ".json")
            plan_file = os.path.join(folder, name + ".plan.json")
            support.plan(model_file, topology_file, plan_file, *flags)
            ranks = common.ranks_export(plan_file, model_file, topology_file)
            out.append((name, json.dumps(ranks)))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def real_exports() -> tuple[tuple[str, str], ...]:
    """The committed exports and those built now."""
    return tuple(committed_exports()) + built_exports()


def readable(op: Any, rank: int, numbers: list[int]) -> bool:
    """Whether check_order can read operation `op` of rank `rank` (the export's ranks are
    `numbers`): an object; for forward, backward, send and recv a micro-batch number from 0
    to 2^20 - 1; for send and recv an activation or gradient to or from another rank of the
    export. Other operations are check_operations' to refuse."""
    if not isinstance(op, dict):
        return False
    if op.get("op") not in ORDERED:
        return True
    m = op.get("micro_batch")
    if isinstance(m, bool) or not isinstance(m, int) or m < 0 or m >= MICRO_BATCHES:
        return False
    if op["op"] in ("send", "recv"):
        peer = op.get("peer")
        if op.get("kind") not in KINDS or isinstance(peer, bool) or not isinstance(peer, int):
            return False
        return peer != rank and peer in numbers
    return True


def well_formed(ranks: Any) -> Optional[int]:
    """The first entry of `ranks` run cannot read as rank number i with a list of operations
    (-1 when `ranks` is no list of at least one entry), or None."""
    if not isinstance(ranks, list) or len(ranks) == 0:
        return -1
    for i, entry in enumerate(ranks):
        if not isinstance(entry, dict) or "rank" not in entry or "operations" not in entry:
            return i
        number = entry["rank"]
        if isinstance(number, bool) or not isinstance(number, int) or number != i:
            return i
        if not isinstance(entry["operations"], list):
            return i
    return None


def reference_refusal(ranks: Any) -> Optional[tuple[int, Optional[int], str]]:
    """The rules check_order documents, written out operation by operation apart from it: the
    first refused operation, ranks in order and each rank's operations in order, as (rank,
    index, rule), or None. A malformed entry comes first (as (entry, None, "entry"), -1 for
    the export itself), then an unreadable operation anywhere; then per operation, a receive
    that the earlier receives of the same transfer on its rank leave no send for, a send that
    the earlier sends leave no receive for on the peer, and the order rules: a forward or
    backward after one of the same micro-batch, a forward before the rank's receive of its
    activation, a backward before the rank's receive of its gradient (when the rank has
    one), a gradient received, a backward run or an activation sent before the rank's forward
    of the micro-batch, a gradient received or an activation sent after its backward, a
    gradient sent before its backward, or without an activation received since the last
    gradient sent of the micro-batch."""
    entry_at = well_formed(ranks)
    if entry_at is not None:
        return entry_at, None, "entry"
    numbers = [entry["rank"] for entry in ranks]
    for entry in ranks:
        for i, op in enumerate(entry["operations"]):
            if not readable(op, entry["rank"], numbers):
                return entry["rank"], i, "unreadable"
    sent = collections.Counter((entry["rank"], op["peer"], op["kind"], op["micro_batch"])
                               for entry in ranks for op in entry["operations"]
                               if op.get("op") == "send")
    taken = collections.Counter((op["peer"], entry["rank"], op["kind"], op["micro_batch"])
                                for entry in ranks for op in entry["operations"]
                                if op.get("op") == "recv")
    for entry in ranks:
        ops, rank = entry["operations"], entry["rank"]
        for i, op in enumerate(ops):
            name = op.get("op")
            if name not in ORDERED:
                continue
            m, kind = op["micro_batch"], op.get("kind")

            def count(among: list[Any], what: str, kind: Optional[str] = None,
                      peer: Optional[int] = None) -> int:
                return sum(1 for o in among if o.get("op") == what and o["micro_batch"] == m
                           and (kind is None or o["kind"] == kind)
                           and (peer is None or o["peer"] == peer))

            def before(what: str, kind: Optional[str] = None, peer: Optional[int] = None) -> int:
                return count(ops[:i], what, kind, peer)

            def later(what: str, kind: Optional[str] = None) -> int:
                return count(ops[i + 1:], what, kind)

            if name == "recv":
                if before("recv", kind, op["peer"]) >= sent[(op["peer"], rank, kind, m)]:
                    return rank, i, "unsent"
                if kind == "gradient" and not before("forward"):
                    return rank, i, "forward"
                if kind == "gradient" and before("backward"):
                    return rank, i, "after backward"
            elif name == "forward":
                if before("forward"):
                    return rank, i, "after forward"
                if not before("recv", "activation") and later("recv", "activation"):
                    return rank, i, "activation"
            elif name == "backward":
                if not before("forward"):
                    return rank, i, "forward"
                if before("backward"):
                    return rank, i, "after backward"
                if not before("recv", "gradient") and later("recv", "gradient"):
                    return rank, i, "gradient"
            else:
                if before("send", kind, op["peer"]) >= taken[(rank, op["peer"], kind, m)]:
                    return rank, i, "unreceived"
                if kind == "activation":
                    if not before("forward"):
                        return rank, i, "forward"
                    if before("backward"):
                        return rank, i, "after backward"
                    continue
                if not before("backward"):
                    return rank, i, "backward"
                # The runner's input of m: the last activation received before, unless a
                # gradient of m was sent since.
                arrivals = [j for j in range(i) if ops[j].get("op") == "recv"
                            and ops[j]["kind"] == "activation" and ops[j]["micro_batch"] == m]
                if not arrivals:
                    # (None after either: the forward of m before would have been refused.)
                    return rank, i, "no input"
                if count(ops[arrivals[-1]:i], "send", "gradient"):
                    return rank, i, "sent back"
    return None


def simulate(ranks: list[Json]) -> dict[int, Json]:
    """Runs the ranks a step at a time until none can move: computations, AllReduces, updates
    and sends (posted without waiting, as run's isend) execute at once; a receive once its peer
    has executed a send of the transfer that no earlier receive took. Returns the operation
    each unfinished rank waits in (a receive), by rank."""
    sent: collections.Counter[tuple[Any, ...]] = collections.Counter()
    at = {entry["rank"]: 0 for entry in ranks}
    moved = True
    while moved:
        moved = False
        for entry in ranks:
            ops, rank = entry["operations"], entry["rank"]
            while at[rank] < len(ops):
                op = ops[at[rank]]
                if op.get("op") == "recv":
                    key = (op["peer"], rank, op["kind"], op["micro_batch"])
                    if not sent[key]:
                        break
                    sent[key] -= 1
                elif op.get("op") == "send":
                    sent[(rank, op["peer"], op["kind"], op["micro_batch"])] += 1
                at[rank] += 1
                moved = True
    return {e["rank"]: e["operations"][at[e["rank"]]] for e in ranks
            if at[e["rank"]] < len(e["operations"])}


# Values for the fields of an operation: what an order could plausibly hold, and what a hostile
# export could (other JSON types, huge integers, control characters).
HUGE = "10 ** 5000"
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.floats(), st.text(max_size=6),
    st.lists(st.integers(-2, 2), max_size=2),
    st.dictionaries(st.sampled_from(["op", "micro_batch", "kind"]), st.integers(0, 2),
                    max_size=2),
    st.sampled_from([-1, 2 ** 20 - 1, 2 ** 20, 2 ** 63, 1.0, 0.0, "0", "activation\n",
                     "gradient\x1b[2J", "Activation", "", "send", HUGE, "-" + HUGE]))


def hostile(value: Any) -> Any:
    """A drawn value, with HUGE made the integer Python cannot write as text
    (sys.get_int_max_str_digits; hypothesis writes every value drawn, so it is made after)."""
    if value in (HUGE, "-" + HUGE):
        return int(value.replace(HUGE, "1")) * 10 ** 5000
    return value


def field_values(field: str, ranks: list[Json]) -> st.SearchStrategy[Any]:
    n = len(ranks)
    plausible = {"op": st.sampled_from(run.OPERATIONS + ("prefetch",)),
                 "micro_batch": st.one_of(st.integers(0, 33),
                                          st.sampled_from([-1, MICRO_BATCHES - 1, MICRO_BATCHES])),
                 "peer": st.integers(-1, n),
                 "kind": st.sampled_from(KINDS)}[field]
    return st.one_of(plausible, plausible, HOSTILE)


MUTATIONS = ("swap", "move", "delete", "duplicate", "to another rank", "set", "remove",
             "replace", "entry", "duplicate transfer")
ENTRY_MUTATIONS = ("replace", "set rank", "remove rank", "set operations", "remove operations")


def mutate_entry(data: st.DataObject, ranks: list[Any], r: int) -> None:
    """Makes entry `r` of `ranks` malformed, or not: another value, another rank number (a
    repeated one, say), or operations that are no list."""
    mutation = data.draw(st.sampled_from(ENTRY_MUTATIONS), label="entry mutation")
    if mutation == "replace":
        ranks[r] = hostile(data.draw(HOSTILE, label="entry"))
    elif mutation == "set rank":
        ranks[r]["rank"] = hostile(data.draw(st.one_of(st.integers(-1, len(ranks)), HOSTILE),
                                             label="rank number"))
    elif mutation == "set operations":
        ranks[r]["operations"] = hostile(data.draw(HOSTILE, label="operations"))
    else:
        del ranks[r][mutation.split()[1]]


def usable(entry: Any) -> bool:
    """Whether mutate can change the operations of `entry`."""
    return isinstance(entry, dict) and isinstance(entry.get("operations"), list)


def mutate(data: st.DataObject, ranks: list[Any]) -> None:
    """Changes `ranks` by one drawn mutation of one drawn rank's operations."""
    r = data.draw(st.integers(0, len(ranks) - 1), label="rank")
    if not usable(ranks[r]):
        return
    mutation = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    if mutation == "entry":
        mutate_entry(data, ranks, r)
        return
    ops = ranks[r]["operations"]
    if not ops:
        ops.append({"op": "forward", "micro_batch": 0})
        return
    i = data.draw(st.integers(0, len(ops) - 1), label="operation")
    j = data.draw(st.integers(0, len(ops) - 1), label="to")
    if mutation == "swap":
        ops[i], ops[j] = ops[j], ops[i]
    elif mutation == "move":
        ops.insert(j, ops.pop(i))
    elif mutation == "delete":
        del ops[i]
    elif mutation == "duplicate":
        ops.insert(j, json.loads(json.dumps(ops[i])))
    elif mutation == "duplicate transfer":
        # A transfer once more on both ranks (each copy at a drawn place), which the rules on
        # sends and receives alone do not refuse.
        op = ops[i]
        if not isinstance(op, dict) or op.get("op") not in ("send", "recv"):
            return
        peer = op.get("peer")
        if type(peer) is not int or not 0 <= peer < len(ranks) or not usable(ranks[peer]):
            return
        ops.insert(j, dict(op))
        mirror = dict(op, op="send" if op["op"] == "recv" else "recv", peer=r)
        theirs = ranks[peer]["operations"]
        theirs.insert(data.draw(st.integers(0, len(theirs)), label="mirror at"), mirror)
    elif mutation == "to another rank":
        other = ranks[data.draw(st.integers(0, len(ranks) - 1), label="other rank")]
        if not usable(other):
            return
        other["operations"].insert(
            data.draw(st.integers(0, len(other["operations"])), label="at"), ops.pop(i))
    elif mutation == "replace":
        ops[i] = hostile(data.draw(HOSTILE, label="operation"))
    elif not isinstance(ops[i], dict):
        return
    elif mutation == "set":
        field = data.draw(st.sampled_from(["op", "micro_batch", "peer", "kind"]), label="field")
        ops[i][field] = hostile(data.draw(field_values(field, ranks), label="value"))
    elif ops[i]:  # remove
        del ops[i][data.draw(st.sampled_from(sorted(ops[i])), label="key")]


def small_operations(rank: int, n: int) -> st.SearchStrategy[Any]:
    """Operations of rank `rank` of `n` over micro-batches 0 and 1, their peers mostly the
    other ranks (the rank itself when alone), sometimes the rank itself or no rank of the
    export."""
    others = [r for r in range(n) if r != rank] or [rank]
    peers = st.sampled_from(others * 12 + [rank, n])
    return st.builds(
        lambda name, m, kind, peer: ({"op": name, "micro_batch": m, "kind": kind, "peer": peer}
                                     if name in ("send", "recv") else
                                     {"op": name, "micro_batch": m} if name in ORDERED else
                                     {"op": name}),
        st.sampled_from(ORDERED + ORDERED + ("allreduce",)), st.integers(0, 1),
        st.sampled_from(KINDS), peers)


# Small orders made from scratch: one to three ranks of up to eight operations.
SMALL_ORDERS = st.integers(1, 3).flatmap(lambda n: st.tuples(
    *[st.lists(small_operations(r, n), max_size=8) for r in range(n)])).map(
    lambda lists: [{"rank": r, "operations": ops} for r, ops in enumerate(lists)])


@st.composite
def pipelines(draw: st.DrawFn) -> list[Json]:
    """Two to four ranks, one stage each, over one to three micro-batches, each rank's
    operations in a drawn order that meets its own rules (a forward after its activation
    arrived, a gradient received after the forward, a backward after it, sends after what
    they send, the activation sent before the backward): check_order accepts it, and the
    ranks may still wait for each other."""
    n, micro_batches = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    ranks = []
    for r in range(n):
        def transfer(name: str, kind: str, m: int, peer: int) -> list[Json]:
            if 0 <= peer < n:
                return [{"op": name, "kind": kind, "micro_batch": m, "peer": peer}]
            return []

        # Per micro-batch, the forward's chain, and the backward's, which starts once the
        # forward's is done (its activation sent: the backward frees the output it sends).
        chains = []
        for m in range(micro_batches):
            chains.append((m, transfer("recv", "activation", m, r - 1)
                           + [{"op": "forward", "micro_batch": m}]
                           + transfer("send", "activation", m, r + 1)))
            chains.append((m, transfer("recv", "gradient", m, r + 1)
                           + [{"op": "backward", "micro_batch": m}]
                           + transfer("send", "gradient", m, r - 1)))
        ops: list[Json] = []
        while any(chain for _, chain in chains):
            ready = [chain for k, (m, chain) in enumerate(chains)
                     if chain and (k % 2 == 0 or not chains[k - 1][1])]
            ops.append(ready[draw(st.integers(0, len(ready) - 1))].pop(0))
        ranks.append({"rank": r, "operations": ops})
    return ranks


class OrderCheckPropertyTest(unittest.TestCase):
    """check_order as a fuzz target: real exports pass; every order made of them, or from
    scratch, is accepted or refused in one line naming the rank and operation (or the entry),
    never with another exception (check_operations neither); it refuses exactly what
    reference_refusal refuses, at the same operation for the same rule; and what it accepts
    never leaves a rank waiting for a send that no other waiting rank still has to make (so
    one rank alone always finishes)."""

    def verdict(self, ranks: Any) -> Optional[tuple[int, Optional[int], str]]:
        """check_order's verdict as reference_refusal gives it, after checking the message."""
        try:
            run.check_order(ranks, PATH)
        except common.InputError as e:
            message = str(e)
            note(f"refused: {message}")
            self.assertTrue(message.isprintable(), repr(message))
            self.assertLessEqual(len(message), 250, message)
            entry = ENTRY_REFUSAL.match(message)
            if entry is not None:
                return int(entry.group(1) or -1), None, "entry"
            match = REFUSAL.match(message)
            self.assertIsNotNone(match, message)
            assert match is not None
            rule = "unreadable"
            order = ORDER_REFUSAL.fullmatch(message)
            if order is not None:
                rule = next((rule for text, rule in RULES if re.fullmatch(text, order.group(3))),
                            "unreadable")
            return int(match.group(1)), int(match.group(2)), rule
        note("accepted")
        return None

    def holds(self, ranks: Any) -> None:
        """The properties for one order."""
        try:
            run.check_operations(ranks, PATH)
        except common.InputError as e:
            self.assertTrue(str(e).isprintable(), repr(str(e)))
            self.assertLessEqual(len(str(e)), 250, str(e))
        verdict = self.verdict(ranks)
        self.assertEqual(verdict, reference_refusal(ranks))
        if verdict is not None:
            return
        waiting = simulate(ranks)
        note(f"waiting: {waiting}")
        for rank, op in waiting.items():
            self.assertEqual(op["op"], "recv")
            self.assertNotEqual(op["peer"], rank, f"rank {rank} waits for a send of its own")
            self.assertIn(op["peer"], waiting, f"rank {rank} waits for a send rank "
                          f"{op['peer']} does not have left")
        if len(ranks) == 1:
            self.assertEqual(waiting, {}, "a rank alone waits")

    def test_real_exports_pass(self) -> None:
        for name, text in real_exports():
            with self.subTest(export=name):
                ranks = json.loads(text)
                run.check_operations(ranks, name)
                run.check_order(ranks, name)
                self.assertIsNone(reference_refusal(ranks))
                # The order guarantee of docs/formats.md: no wait at all.
                self.assertEqual(simulate(ranks), {})

    def test_exports_built_now(self) -> None:
        if not os.environ.get("PIPEPLAN_BIN"):
            self.skipTest("set PIPEPLAN_BIN to the pipeplan binary to check the exports of "
                          "every planner made now (the committed exports are checked)")
        self.assertEqual(len(built_exports()), len(REAL_PLANS))

    @settings(max_examples=1500, deadline=None, derandomize=True, database=None)
    @given(st.data())
    def test_mutated_exports(self, data: st.DataObject) -> None:
        exports = dict(real_exports())
        ranks = json.loads(exports[data.draw(st.sampled_from(sorted(exports)), label="export")])
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            mutate(data, ranks)
        self.holds(ranks)

    @settings(max_examples=1000, deadline=None, derandomize=True, database=None)
    @given(pipelines(), st.data())
    def test_pipelines(self, ranks: list[Json], data: st.DataObject) -> None:
        self.assertIsNone(self.verdict(ranks))
        for _ in range(data.draw(st.integers(0, 2), label="mutations")):
            mutate(data, ranks)
        self.holds(ranks)

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(st.permutations(
        [{"op": name, "micro_batch": 0} for name in ("forward", "backward")]
        + [{"op": name, "kind": kind, "micro_batch": 0, "peer": 0}
           for name in ("send", "recv") for kind in KINDS] + [{"op": "update"}]),
        st.integers(0, 6))
    def test_one_rank(self, ops: list[Json], cut: int) -> None:
        """A rank alone, its transfers to itself: what check_order accepts finishes."""
        self.holds([{"rank": 0, "operations": ops[cut:]}])

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(st.one_of(HOSTILE.map(hostile), st.lists(HOSTILE.map(hostile), max_size=3),
                     st.lists(st.fixed_dictionaries({}, optional={
                         "rank": st.one_of(st.integers(-1, 3), HOSTILE.map(hostile)),
                         "operations": st.one_of(st.just([]), HOSTILE.map(hostile))}),
                         max_size=3)))
    def test_hostile_exports(self, ranks: Any) -> None:
        """Whatever the export is made of, both checks answer InputError or pass, in either
        order (run calls check_operations first)."""
        self.holds(ranks)

    @settings(max_examples=1000, deadline=None, derandomize=True, database=None)
    @given(SMALL_ORDERS)
    def test_small_orders(self, ranks: list[Json]) -> None:
        self.holds(ranks)


if __name__ == "__main__":
    unittest.main()
