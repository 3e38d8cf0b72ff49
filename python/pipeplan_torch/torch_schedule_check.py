"""Checks a compute-only pipeline schedule CSV (`pipeplan export --format torch-schedule`) by
the rules torch.distributed.pipelining applies when it loads and lowers one, without importing
torch (whose 1.13 has no torch.distributed.pipelining).

Re-implemented from pytorch/pytorch torch/distributed/pipelining/schedules.py at commit
00722e648b740f91d0e71494baa17891749fd291
(https://github.com/pytorch/pytorch/blob/00722e648b740f91d0e71494baa17891749fd291/torch/distributed/pipelining/schedules.py):

* parsing: `_action_regex`, `_Action.from_str` and `PipelineScheduleMulti._load_csv` (one CSV
  row per rank, each cell one action; the regex is matched at the cell's start, as `re.match`
  does, so trailing text is ignored; an empty cell is no action);
* `_validate_schedule`: the number of ranks, every rank present, `B`/`I` of a micro-batch only
  after its `F` on that stage, `W` only after its `I`, a stage on one rank only, exactly
  `n_microbatches` distinct `F` per stage, as many `I` as `W`, and `B + (I + W) / 2 ==
  n_microbatches` backwards per stage;
* `_PipelineScheduleRuntime._prepare_schedule_with_comms(format="compute_only")`: only compute
  actions (`F`, `B`, `I`, `W`, `OVERLAP_F_B`);
* `_add_send_recv`: the lowering that inserts the sends and receives, with its progress rule (a
  rank's next `F` needs its input received, or the previous stage's `F` done on the same rank; a
  next `I` or `B` its output gradient received, or the next stage's `I` or `B` done on the same
  rank); "Malformed compute schedule, can't schedule sends/recvs" when no rank can go on, and an
  empty row fails its assertion;
* `_simulate_comms_compute`: the dry run of the lowered schedule that torch's own tests use to
  show a schedule completes ("Schedule is not progressing" otherwise).

The lowering passes `_add_unshard_reshard` and `_add_reduce_grad` run before `_add_send_recv` in
torch; they only add `UNSHARD`, `RESHARD` and `REDUCE_GRAD` actions, which are always ready and
carry no communication, so they change neither progress nor the verdict and are left out here
(as in torch's tests, which simulate `_add_send_recv` of the compute-only order). Every refusal
is a `ScheduleError` naming the rule (`ScheduleError.rule`) and carrying torch's message.

Command line: ``python3 -m pipeplan_torch.torch_schedule_check FILE [--ranks R] [--stages S]
[--micro-batches M]`` (defaults: the rows, one more than the largest stage index, the distinct
forwards of stage 0); exit 0 and one line when the file passes, exit 1 and the rule otherwise.
"""

import argparse
import csv
import io
import re
import sys
from typing import Callable, NamedTuple, Optional

# The computation types of `_ComputationType`, by their token.
F, I, W, B = "F", "I", "W", "B"
UNSHARD, RESHARD, REDUCE_GRAD = "UNSHARD", "RESHARD", "REDUCE_GRAD"
SEND_F, RECV_F, SEND_B, RECV_B = "SEND_F", "RECV_F", "SEND_B", "RECV_B"
OVERLAP_F_B = "OVERLAP_F_B"
COMPUTATION_TYPES = (F, I, W, UNSHARD, RESHARD, SEND_F, RECV_F, SEND_B, RECV_B, B, OVERLAP_F_B,
                     REDUCE_GRAD)
COMPUTE_TYPES = (F, B, I, W, OVERLAP_F_B)

ACTION_REGEX = re.compile(
    r"(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)")

# Every rule a schedule can break, and what it means.
RULES = {
    "parse": "a cell is no action (_Action.from_str)",
    "rank-count": "the rows are not one per pipeline rank (_validate_schedule)",
    "rank-missing": "a rank has no row (_validate_schedule)",
    "stage-out-of-range": "a stage index is not below num_stages (_validate_schedule)",
    "backward-before-forward": "a B or I before its F on the stage (_validate_schedule)",
    "weight-before-input": "a W before its I on the stage (_validate_schedule)",
    "stage-on-two-ranks": "a stage index on two ranks (_validate_schedule)",
    "forward-count": "a stage without exactly n_microbatches distinct F (_validate_schedule)",
    "weight-count": "a stage with a different number of I and W (_validate_schedule)",
    "backward-count": "a stage without n_microbatches backwards (_validate_schedule)",
    "compute-only": "a communication action in a compute-only file "
                    "(_prepare_schedule_with_comms)",
    "empty-rank": "a rank without actions (_add_send_recv's assertion)",
    "deadlock": "the send/recv lowering cannot go on (_add_send_recv)",
    "not-progressing": "the lowered schedule does not complete (_simulate_comms_compute)",
    "simulation-unsupported": "an action the dry run does not know, such as OVERLAP_F_B "
                              "(_simulate_comms_compute)",
}


class ScheduleError(Exception):
    """A schedule torch refuses: `rule` (a key of RULES) and torch's message."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


class Action(NamedTuple):
    """`_Action`: equal actions compare equal, as torch's NamedTuple does."""
    stage_index: int
    computation_type: str
    microbatch_index: Optional[int] = None
    sub_actions: Optional[tuple["Action", ...]] = None

    def __str__(self) -> str:
        if self.sub_actions is not None:
            return "(" + ";".join(str(a) for a in self.sub_actions) + ")" + self.computation_type
        mb = "" if self.microbatch_index is None else str(self.microbatch_index)
        return f"{self.stage_index}{self.computation_type}{mb}"


def _computation_type(token: str) -> str:
    if token not in COMPUTATION_TYPES:
        raise ScheduleError("parse", f"Invalid computation type {token}")
    return token


def action_from_str(text: str) -> Optional[Action]:
    """`_Action.from_str`: None for an empty cell; `(a;b)OVERLAP_F_B` holds sub-actions."""
    text = text.strip()
    if text == "":
        return None
    if text.startswith("(") and ")" in text:
        end = text.find(")")
        subs = [action_from_str(part.strip()) for part in text[1:end].split(";")] \
            if text[1:end].strip() else []
        subs = [a for a in subs if a is not None]
        return Action(-1, _computation_type(text[end + 1:]), None, tuple(subs) if subs else None)
    match = ACTION_REGEX.match(text)
    if match:
        stage, kind, mb = match.groups()
        return Action(int(stage), _computation_type(kind), int(mb) if len(mb) else None)
    raise ScheduleError("parse", f"Invalid action string: {text}, should be formatted as "
                                 f"[stage][action type][(microbatch)] e.g. 2F0")


def load_csv(text: str) -> dict[int, list[Optional[Action]]]:
    """`PipelineScheduleMulti._load_csv`'s reading: row k is rank k's actions."""
    return {rank: [action_from_str(cell) for cell in row]
            for rank, row in enumerate(csv.reader(io.StringIO(text, newline="")))}


def validate_schedule(actions: dict[int, list[Optional[Action]]], pp_group_size: int,
                      num_stages: int, num_microbatches: int) -> dict[int, int]:
    """`_validate_schedule`: returns the stage-to-rank map it infers."""
    if len(actions) != pp_group_size:
        raise ScheduleError("rank-count", f"Schedule has incorrect number of ranks - expected "
                                          f"{pp_group_size}, actual {len(actions)}")
    for rank in range(pp_group_size):
        if rank not in actions:
            raise ScheduleError("rank-missing", f"Schedule is missing actions for rank {rank}")
    seen = {s: {F: set(), B: set(), I: set(), W: set()} for s in range(num_stages)}
    stage_to_rank: dict[int, int] = {}

    def process(action: Action, rank: int, step: int) -> None:
        s, kind, mb = action.stage_index, action.computation_type, action.microbatch_index
        if kind in (F, B, I, W) and s not in seen:
            # torch indexes its per-stage table and fails with a KeyError.
            raise ScheduleError("stage-out-of-range", f"Rank {rank}, step {step}: stage {s} is "
                                                      f"not below num_stages {num_stages}")
        where = f"Rank {rank}, step {step}"
        if kind == F:
            seen[s][F].add(mb)
        elif kind in (B, I):
            if mb not in seen[s][F]:
                name = "Full Backward" if kind == B else "Backward Input"
                raise ScheduleError("backward-before-forward",
                                    f"{where}: Running {name} for stage {s}, microbatch {mb} "
                                    f"without first running Forward")
            seen[s][kind].add(mb)
        elif kind == W:
            if mb not in seen[s][I]:
                raise ScheduleError("weight-before-input",
                                    f"{where}: Running Backward Weight for stage {s}, microbatch "
                                    f"{mb} without first running Backward Input")
            seen[s][W].add(mb)
        if s not in stage_to_rank:
            stage_to_rank[s] = rank
        elif stage_to_rank[s] != rank:
            raise ScheduleError("stage-on-two-ranks",
                                f"{where}: Stage {s} is assigned to both rank {rank} and rank "
                                f"{stage_to_rank[s]}")

    for rank in actions:
        for step, action in enumerate(actions[rank]):
            if action is None:
                continue
            for a in action.sub_actions if action.sub_actions is not None else (action,):
                process(a, rank, step)
    for s, kinds in seen.items():
        f, b, i, w = (len(kinds[k]) for k in (F, B, I, W))
        if f != num_microbatches:
            raise ScheduleError("forward-count", f"Got {f} F microbatches for stage {s}, "
                                                 f"expected {num_microbatches}")
        if i != w:
            raise ScheduleError("weight-count", f"Invalid backward microbatches for stage {s}: "
                                                f"I and W must have equal counts, but got I={i}, "
                                                f"W={w}")
        if b + (i + w) // 2 != num_microbatches:
            raise ScheduleError("backward-count", f"Invalid backward microbatches for stage {s}: "
                                                  f"expected {num_microbatches} total backwards, "
                                                  f"but got B={b}, I={i}, W={w}")
    return stage_to_rank


def check_compute_only(actions: dict[int, list[Optional[Action]]]) -> None:
    """`_prepare_schedule_with_comms(format="compute_only")`'s check."""
    for rank, row in actions.items():
        for i, action in enumerate(row):
            if action is not None and action.computation_type not in COMPUTE_TYPES:
                raise ScheduleError("compute-only",
                                    f"Expected compute-only schedule but found communication "
                                    f"action '{action}' at rank {rank}, position {i}.")


def add_send_recv(compute_actions: dict[int, list[Optional[Action]]],
                  stage_to_rank: Callable[[int], int],
                  num_stages: int) -> dict[int, list[Action]]:
    """`_add_send_recv`: the schedule with SEND_F/RECV_F/SEND_B/RECV_B, or "deadlock". Each
    round offers every rank's next action once, in rank order. O(R A) rounds' work at most for R
    ranks and A actions."""
    compute_actions = {rank: list(row) for rank, row in compute_actions.items()}
    comm_actions: dict[int, list[Action]] = {rank: [] for rank in compute_actions}
    prev_actions: dict[int, set[Action]] = {rank: set() for rank in compute_actions}

    def has_comms(a: Action) -> bool:
        if a.computation_type == F:
            return a.stage_index != num_stages - 1 and \
                stage_to_rank(a.stage_index + 1) != stage_to_rank(a.stage_index)
        if a.computation_type in (I, B):
            return a.stage_index != 0 and \
                stage_to_rank(a.stage_index - 1) != stage_to_rank(a.stage_index)
        return False

    def ready(a: Optional[Action], prev: set[Action]) -> bool:
        if a is None:
            return True
        s, mb = a.stage_index, a.microbatch_index
        if a.computation_type == F and s != 0:
            return Action(s, RECV_F, mb) in prev or Action(s - 1, F, mb) in prev
        if a.computation_type in (I, B) and s != num_stages - 1:
            return (Action(s, RECV_B, mb) in prev or Action(s + 1, I, mb) in prev
                    or Action(s + 1, B, mb) in prev)
        return True

    while compute_actions:
        progress = False
        for rank in sorted(compute_actions):
            if not compute_actions[rank]:
                raise ScheduleError("empty-rank", f"rank={rank}, "
                                                  f"len(compute_actions[rank])=0")
            action = compute_actions[rank][0]
            parts = action.sub_actions if action is not None and action.sub_actions is not None \
                else (action,)
            if not all(ready(a, prev_actions[rank]) for a in parts):
                continue
            if action is not None:
                comm_actions[rank].append(action)
                for a in parts:
                    prev_actions[rank].add(a)
                    if has_comms(a):
                        kind = a.computation_type
                        send = Action(a.stage_index, SEND_F if kind == F else SEND_B,
                                      a.microbatch_index)
                        peer = a.stage_index + 1 if kind == F else a.stage_index - 1
                        recv = Action(peer, RECV_F if kind == F else RECV_B, a.microbatch_index)
                        comm_actions[rank].append(send)
                        prev_actions[rank].add(send)
                        comm_actions[stage_to_rank(peer)].append(recv)
                        prev_actions[stage_to_rank(peer)].add(recv)
            compute_actions[rank].pop(0)
            if not compute_actions[rank]:
                del compute_actions[rank]
            progress = True
        if not progress:
            raise ScheduleError("deadlock", "Malformed compute schedule, can't schedule "
                                            "sends/recvs")
    return comm_actions


def simulate_comms_compute(pipeline_order: dict[int, list[Action]],
                           stage_to_rank: Callable[[int], int],
                           num_stages: int) -> dict[int, list[Optional[Action]]]:
    """`_simulate_comms_compute`: steps every rank through its lowered actions, an action
    waiting for what it receives or computes on; the timeline (None for an idle step), or
    "not-progressing"."""
    order = {rank: [a for a in pipeline_order[rank] if a is not None]
             for rank in sorted(pipeline_order)}
    schedule: dict[int, list[Optional[Action]]] = {rank: [] for rank in order}
    prev_ops: dict[int, set[Action]] = {rank: set() for rank in order}

    def ready(a: Action) -> bool:
        s, kind, mb = a.stage_index, a.computation_type, a.microbatch_index
        prev = prev_ops[stage_to_rank(s)]
        if kind == F:
            return s == 0 or Action(s, RECV_F, mb) in prev or Action(s - 1, F, mb) in prev
        if kind in (I, B):
            return (s == num_stages - 1 or Action(s, RECV_B, mb) in prev
                    or Action(s + 1, I, mb) in prev or Action(s + 1, B, mb) in prev)
        if kind == W:
            return True
        if kind == SEND_F:
            return Action(s, F, mb) in prev
        if kind == RECV_F:
            return Action(s - 1, SEND_F, mb) in prev_ops[stage_to_rank(s - 1)]
        if kind == SEND_B:
            return Action(s, I, mb) in prev or Action(s, B, mb) in prev
        if kind == RECV_B:
            return Action(s + 1, SEND_B, mb) in prev_ops[stage_to_rank(s + 1)]
        raise ScheduleError("simulation-unsupported", f"Unsupported action type {a}")

    def drop_finished() -> None:
        for rank in sorted(order, reverse=True):
            if not order[rank]:
                del order[rank]

    while order:
        progress = False
        for rank in sorted(order):
            if not order[rank]:
                continue
            action = order[rank][0]
            if ready(action):
                schedule[rank].append(action)
                prev_ops[rank].add(action)
                order[rank].pop(0)
                progress = True
            else:
                schedule[rank].append(None)
        drop_finished()
        # torch's second pass: an idle step takes an action a later rank unblocked.
        for rank in sorted(order):
            if order[rank] and schedule[rank][-1] is None and ready(order[rank][0]):
                schedule[rank][-1] = order[rank][0]
                prev_ops[rank].add(order[rank][0])
                order[rank].pop(0)
        drop_finished()
        if not progress:
            raise ScheduleError("not-progressing", "Schedule is not progressing")
    return schedule


class Checked(NamedTuple):
    """What a passing schedule gives: the stage-to-rank map, the lowered schedule and the
    simulated steps."""
    stage_to_rank: dict[int, int]
    lowered: dict[int, list[Action]]
    steps: int


def check_schedule(text: str, ranks: Optional[int] = None, stages: Optional[int] = None,
                   micro_batches: Optional[int] = None) -> Checked:
    """Loads `text` as `_PipelineScheduleRuntime._load_csv(path, "compute_only")` does (parse,
    validate, compute-only, lower), then simulates the lowered schedule. The sizes default to
    what the file implies: its rows, one more than its largest stage index, the distinct
    forwards of stage 0. Raises `ScheduleError`."""
    actions = load_csv(text)
    leaves = [a for row in actions.values() for x in row if x is not None
              for a in (x.sub_actions if x.sub_actions is not None else (x,))]
    if ranks is None:
        ranks = len(actions)
    if stages is None:
        stages = 1 + max((a.stage_index for a in leaves), default=-1)
    if micro_batches is None:
        micro_batches = len({a.microbatch_index for a in leaves
                             if a.stage_index == 0 and a.computation_type == F})
    stage_to_rank = validate_schedule(actions, ranks, stages, micro_batches)
    check_compute_only(actions)
    lowered = add_send_recv(actions, lambda s: stage_to_rank[s], stages)
    simulated = simulate_comms_compute(lowered, lambda s: stage_to_rank[s], stages)
    return Checked(stage_to_rank, lowered, max((len(r) for r in simulated.values()), default=0))


def main(argv: Optional[list[str]] = None) -> int:
    """The command line; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python3 -m pipeplan_torch.torch_schedule_check",
        description="Check a compute-only schedule CSV by torch.distributed.pipelining's rules.")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--ranks", type=int, help="pipeline ranks (default: the rows)")
    parser.add_argument("--stages", type=int, help="stages (default: largest index + 1)")
    parser.add_argument("--micro-batches", type=int,
                        help="micro-batches per pipeline (default: stage 0's distinct F)")
    args = parser.parse_args(argv)
    try:
        with open(args.file, newline="") as f:
            text = f.read()
    except OSError as e:
        sys.stderr.write(f"{args.file}: cannot read: {e.strerror}\n")
        return 2
    try:
        checked = check_schedule(text, args.ranks, args.stages, args.micro_batches)
    except ScheduleError as e:
        sys.stderr.write(f"{args.file}: {e}\n")
        return 1
    ranks = len(checked.lowered)
    sys.stdout.write(f"{args.file}: ok: {ranks} ranks, {len(checked.stage_to_rank)} stages, "
                     f"lowered to {sum(len(r) for r in checked.lowered.values())} actions, "
                     f"{checked.steps} simulated steps\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
