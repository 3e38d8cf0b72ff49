"""run: execute a plan's per-rank operations (`pipeplan export --format ranks`) with autograd
and torch.distributed, time it against the plan's estimate, and --check it against
single-process float64 training."""

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time
from typing import Any, NamedTuple, Optional

import torch
import torch.distributed as dist

from . import launch
from .common import (CheckError, InputError, UsageError, build, layer_names, pipeplan_binary,
                     ranks_export, read_json, write_json)
from .launch import Progress
from .tensors import rank_device, synchronize, to_device

CHECK_TOLERANCE = 1e-9
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]
_MAX_DIMS = 8
_KINDS = {"activation": 0, "gradient": 1}
OPERATIONS = ("forward", "backward", "send", "recv", "allreduce", "update")

# JSON objects as parsed: a rank's entry of the ranks export, one of its operations, the payload
# every rank receives, a report.
Json = dict[str, Any]


def tag(kind: str, micro_batch: int, part: int) -> int:
    """The point-to-point tag of a transfer (part 0: the activation's shape header, 1: the
    data), so that a receive only ever matches the transfer it names."""
    return (2 * micro_batch + _KINDS[kind]) * 2 + part


def header(t: torch.Tensor) -> torch.Tensor:
    """dtype code, number of dimensions, then the shape: what a receiver needs to allocate."""
    if t.dtype not in _DTYPES or t.dim() > _MAX_DIMS:
        raise InputError(f"cannot send a {t.dtype} tensor of {t.dim()} dimensions between stages")
    values = [_DTYPES.index(t.dtype), t.dim()] + list(t.shape)
    return torch.tensor(values + [0] * (2 + _MAX_DIMS - len(values)), dtype=torch.int64)


def from_header(h: torch.Tensor) -> tuple[torch.dtype, list[int]]:
    """The dtype and shape of a header made by `header`."""
    values = h.tolist()
    return _DTYPES[values[0]], values[2:2 + values[1]]


def backward_from_received(output: torch.Tensor, gradient: torch.Tensor) -> None:
    """Backward of a stage from the gradient its successor sent. The gradient is made
    contiguous first: Debian's torch 1.13 computes wrong float32 GELU gradients from a
    non-contiguous incoming gradient."""
    if output.requires_grad:
        torch.autograd.backward(output, gradient.contiguous())


def _cat(values: list[Any]) -> Any:
    first = values[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(values)
    return type(first)(_cat(list(parts)) for parts in zip(*values))


def describe_operation(op: Json) -> str:
    """An operation of the ranks export in words, for the watchdog."""
    if op["op"] == "update":
        return "update (the optimizer step)"
    if op["op"] in ("forward", "backward"):
        return f"{op['op']} micro-batch {op['micro_batch']}"
    if op["op"] == "send":
        return f"send {op['kind']} micro-batch {op['micro_batch']} to rank {op['peer']}"
    if op["op"] == "recv":
        return f"recv {op['kind']} micro-batch {op['micro_batch']} from rank {op['peer']}"
    return "allreduce over ranks " + ", ".join(str(r) for r in op["ranks"])


class Describe:
    """Names rank r's operation i for the watchdog."""

    def __init__(self, ranks: list[Json]) -> None:
        self.ranks = ranks

    def __call__(self, rank: int, index: int) -> str:
        entry = self.ranks[rank]
        where = f"rank {rank} ({entry['gpu']}, stage {entry['stage']})"
        ops = entry["operations"]
        if 0 <= index < len(ops):
            return f"{where} waits in operation {index}, {describe_operation(ops[index])}"
        return f"{where} waits outside the plan's operations"


class Figures(NamedTuple):
    """What one iteration of a rank measured."""

    elapsed: float  # seconds from the start barrier to the end of its last operation
    busy: float  # seconds in forwards and backwards
    update: Optional[float]  # seconds in the optimizer step; None without an update operation
    loss: Optional[float]  # this rank's share of the loss (last stage), else None


class Rank:
    """One rank of the plan: its stage (the factory's model cut to the stage's layers) and the
    execution of its operations."""

    def __init__(self, entry: Json, payload: Json, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.entry = entry
        self.ops: list[Json] = entry["operations"]
        self.M: int = payload["micro_batches"]
        self.batch_size: int = payload["batch_size"]
        self.device, self.dtype = device, dtype
        model, self.make_micro_batch, self.loss_fn = build(payload["factory"])
        names = layer_names(model)
        first, last = entry["layers"]["first"], entry["layers"]["last"]
        if names[first:last + 1] != entry["layers"]["names"]:
            raise InputError(f"{payload['model']}: the plan's layers {first}-{last} are named "
                             f"{entry['layers']['names']}, the factory's {names[first:last + 1]}")
        children = dict(model.named_children())
        self.stage = torch.nn.Sequential(collections.OrderedDict(
            (name, children[name]) for name in names[first:last + 1])).to(device, dtype)
        self.first = entry["stage"] == 0
        self.last = last == len(names) - 1
        self.optimizer = torch.optim.SGD(self.stage.parameters(), lr=payload["lr"])
        # A plan with update tasks (spec 8.3) places the optimizer step among the operations;
        # without them the step follows the iteration, outside the plan.
        self.steps_in_plan = any(op["op"] == "update" for op in self.ops)
        self.groups: dict[tuple[int, ...], Any] = {}

    def make_groups(self, ranks: list[Json]) -> None:
        """Creates the data-parallel groups of every stage with more than one replica."""
        # Every rank creates every group, in the same order (torch.distributed requires it).
        for group in sorted({tuple(e["data_parallel_group"]["ranks"]) for e in ranks}):
            if len(group) > 1:
                handle = dist.new_group(list(group))
                if self.entry["rank"] in group:
                    self.groups[group] = handle

    def data(self, iteration: int, m: int) -> Any:
        """Micro-batch `m` of `iteration`: (inputs, targets) on this rank's device."""
        return to_device(self.make_micro_batch(self.batch_size, iteration * self.M + m),
                         self.device, self.dtype)

    def iteration(self, iteration: int, progress: Progress) -> Figures:
        """Runs every operation once, in order."""
        self.optimizer.zero_grad(set_to_none=True)
        # Per micro-batch: the stage's input (received, or the data), its output (the loss on
        # the last stage), the gradient received for that output; and the sends in flight.
        inputs: dict[int, torch.Tensor] = {}
        outputs: dict[int, torch.Tensor] = {}
        gradients: dict[int, torch.Tensor] = {}
        sends: list[tuple[int, torch.Tensor, Any]] = []
        busy = 0.0
        update = None
        loss = 0.0 if self.last else None
        progress.outside()
        dist.barrier()
        start = time.perf_counter()
        for i, op in enumerate(self.ops):
            kind, m = op["op"], op.get("micro_batch")
            if kind in ("forward", "backward"):
                progress.busy(i)
                began = time.perf_counter()
                if kind == "forward":
                    if self.first:
                        x = self.data(iteration, m)[0]
                    else:
                        x = inputs[m]
                    y = self.stage(x)
                    if self.last:
                        y = self.loss_fn(y, self.data(iteration, m)[1]) / self.M
                        loss += y.item()
                    outputs[m] = y
                elif self.last:
                    outputs.pop(m).backward()
                else:
                    backward_from_received(outputs.pop(m), gradients.pop(m))
                synchronize(self.device)
                busy += time.perf_counter() - began
            elif kind == "send":
                progress.busy(i)
                # Each tensor stays referenced until its send completed.
                if op["kind"] == "activation":
                    t = outputs[m].detach().contiguous()
                    h = header(t).to(self.device)
                    sends.append((i, h, dist.isend(h, op["peer"], tag=tag("activation", m, 0))))
                else:
                    x = inputs.pop(m)
                    t = x.grad if x.grad is not None else torch.zeros_like(x)
                    t = t.contiguous()
                sends.append((i, t, dist.isend(t, op["peer"], tag=tag(op["kind"], m, 1))))
            elif kind == "recv":
                progress.wait(i)
                if op["kind"] == "activation":
                    h = torch.empty(2 + _MAX_DIMS, dtype=torch.int64, device=self.device)
                    dist.recv(h, op["peer"], tag=tag("activation", m, 0))
                    dtype, shape = from_header(h)
                    x = torch.empty(shape, dtype=dtype, device=self.device)
                    dist.recv(x, op["peer"], tag=tag("activation", m, 1))
                    inputs[m] = x.requires_grad_(x.is_floating_point())
                else:
                    y = outputs[m]
                    g = torch.empty(y.shape, dtype=y.dtype, device=self.device)
                    dist.recv(g, op["peer"], tag=tag("gradient", m, 1))
                    gradients[m] = g
            elif kind == "allreduce":
                progress.wait(i)
                self._allreduce(self.groups[tuple(op["ranks"])])
            elif kind == "update":
                progress.busy(i)
                update = self.step()
            else:  # check_operations refused it before any rank started
                raise InputError(f"rank {self.entry['rank']}: operation {i}: unknown op {kind}")
        for i, _, work in sends:
            progress.wait(i)
            work.wait()
        synchronize(self.device)
        elapsed = time.perf_counter() - start
        progress.outside()
        return Figures(elapsed, busy, update, loss)

    def step(self) -> float:
        """The optimizer step on the stage's parameters (their gradients are the global batch's
        once the stage's AllReduce ran); returns its seconds."""
        began = time.perf_counter()
        self.optimizer.step()
        synchronize(self.device)
        return time.perf_counter() - began

    def _allreduce(self, group: Any) -> None:
        params = list(self.stage.parameters())
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat, group=group)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    def gradients(self) -> dict[str, torch.Tensor]:
        """Every parameter's gradient (zero when it has none), on the CPU."""
        return {name: (p.grad.detach().cpu().clone() if p.grad is not None
                       else torch.zeros_like(p).cpu())
                for name, p in self.stage.named_parameters()}

    def parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter's value, on the CPU."""
        return {name: p.detach().cpu().clone() for name, p in self.stage.named_parameters()}


def rank_main(rank: int, world_size: int, progress: Progress, payload: Json) -> Optional[Json]:
    """What every rank runs: K iterations of its operations, then rank 0 gathers the
    figures (and for --check the gradients of the first iteration and the parameters after its
    optimizer step) and makes the report."""
    ranks = payload["ranks"]
    device = rank_device(payload["backend"], rank)
    dtype = torch.float64 if payload["check"] else torch.float32
    me = Rank(ranks[rank], payload, device, dtype)
    me.make_groups(ranks)
    control = dist.new_group(backend="gloo") if payload["backend"] != "gloo" else None
    figures: Json = {"elapsed": [], "busy": [], "update": [], "loss": [], "gradients": None,
                     "parameters": None}
    for iteration in range(payload["iterations"]):
        measured = me.iteration(iteration, progress)
        if not me.steps_in_plan:
            me.step()
        figures["elapsed"].append(measured.elapsed)
        figures["busy"].append(measured.busy)
        figures["update"].append(measured.update)
        figures["loss"].append(measured.loss)
        if iteration == 0 and payload["check"]:
            figures["gradients"] = me.gradients()
            figures["parameters"] = me.parameters()
    if device.type == "cuda":
        figures["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    else:
        figures["peak_memory_bytes"] = None
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(figures, gathered, dst=0, group=control)
    if rank != 0:
        return None
    return report(payload, gathered)


def _measured(values: list[float]) -> float:
    # The first iteration warms up (allocations, gloo connections); the median of the rest.
    return statistics.median(values[1:] if len(values) > 1 else values)


def _update_ms(seconds: list[Optional[float]]) -> Optional[float]:
    """A rank's measured optimizer step (ms), None when its plan has no update operation."""
    if any(s is None for s in seconds):
        return None
    return round(_measured([s for s in seconds if s is not None]) * 1e3, 4)


def report(payload: Json, figures: list[Json]) -> Json:
    """The run's report (docs/torch.md) from every rank's figures, in rank order."""
    ranks = payload["ranks"]
    iterations = payload["iterations"]
    elapsed = [max(f["elapsed"][k] for f in figures) * 1e3 for k in range(iterations)]
    losses = [sum(f["loss"][k] for f in figures if f["loss"][k] is not None)
              for k in range(iterations)]
    measured = _measured(elapsed)
    estimate = payload["iteration_ms"]
    out = {
        "schema": "pipeplan-torch/run/v1",
        "plan": payload["plan"],
        "planner": payload["planner"],
        "schedule_policy": payload["schedule_policy"],
        "micro_batches": payload["micro_batches"],
        "batch_size": payload["batch_size"],
        "backend": payload["backend"],
        "threads": payload["threads"],
        "dtype": "float64" if payload["check"] else "float32",
        "iterations": iterations,
        "estimate_ms": estimate,
        "measured_ms": round(measured, 4),
        "error": round((measured - estimate) / estimate, 4) if estimate > 0 else None,
        "iteration_ms": [round(v, 4) for v in elapsed],
        "losses": losses,
        "ranks": [{"rank": e["rank"], "gpu": e["gpu"], "stage": e["stage"],
                   "operations": len(e["operations"]),
                   "busy_ms": round(_measured(f["busy"]) * 1e3, 4),
                   "planned_busy_ms": payload["planned_busy_ms"].get(e["gpu"]),
                   "update_ms": _update_ms(f["update"]),
                   "planned_update_ms": payload["planned_update_ms"].get(e["gpu"]),
                   "peak_memory_bytes": f["peak_memory_bytes"]} for e, f in zip(ranks, figures)],
        "check": check(payload, figures) if payload["check"] else None,
    }
    return out


def _relative(value: torch.Tensor, reference: torch.Tensor) -> float:
    """max |value - reference| over max |reference| (infinite when only the reference is 0)."""
    difference = (value - reference).abs().max().item()
    scale = reference.abs().max().item()
    return difference / scale if scale > 0 else (math.inf if difference > 0 else 0.0)


def check(payload: Json, figures: list[Json]) -> Json:
    """Compares the first iteration's loss, every gradient of every rank and every parameter
    after the iteration's optimizer step with one single-process float64 iteration on the same
    global batch (all micro-batches at once) followed by one SGD step."""
    model, make_micro_batch, loss_fn = build(payload["factory"])
    model.double()
    batches = [to_device(make_micro_batch(payload["batch_size"], m), torch.device("cpu"),
                         torch.float64) for m in range(payload["micro_batches"])]
    inputs = _cat([b[0] for b in batches])
    targets = _cat([b[1] for b in batches])
    reference_loss = loss_fn(model(inputs), targets)
    reference_loss.backward()
    torch.optim.SGD(model.parameters(), lr=payload["lr"]).step()
    loss = sum(f["loss"][0] for f in figures if f["loss"][0] is not None)
    worst = abs(loss - reference_loss.item()) / max(abs(reference_loss.item()), sys.float_info.min)
    mismatch = None
    if worst > CHECK_TOLERANCE:
        mismatch = (f"the loss {loss:.12g} differs from single-process float64 training's "
                    f"{reference_loss.item():.12g}")
    count = 0
    for name, parameter in model.named_parameters():
        gradient = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        for entry, f in zip(payload["ranks"], figures):
            if name not in f["gradients"]:
                continue
            count += 1
            where = f"on rank {entry['rank']} ({entry['gpu']}, stage {entry['stage']})"
            for what, value, reference in (
                    (f"the gradient of {name}", f["gradients"][name], gradient),
                    (f"{name} after the optimizer step", f["parameters"][name],
                     parameter.detach())):
                relative = _relative(value, reference)
                worst = max(worst, relative)
                if relative > CHECK_TOLERANCE and mismatch is None:
                    mismatch = (f"{what} {where} differs from single-process float64 training: "
                                f"relative difference {relative:.3g} > {CHECK_TOLERANCE:g}")
    return {"passed": mismatch is None, "loss": loss, "reference_loss": reference_loss.item(),
            "gradients_compared": count, "parameters_compared": count,
            "max_relative_difference": worst, "tolerance": CHECK_TOLERANCE,
            "mismatch": mismatch}


def summary(result: Json) -> str:
    """The report in a few lines, for standard error."""
    ranks, iterations = len(result["ranks"]), result["iterations"]
    lines = [f"pipeplan_torch: {ranks} rank{'s' if ranks > 1 else ''}, {iterations} "
             f"iteration{'s' if iterations > 1 else ''} "
             f"({result['dtype']}): measured {result['measured_ms']:.4g} ms per iteration, "
             f"plan estimate {result['estimate_ms']:.4g} ms"
             + (f" ({100 * result['error']:+.0f}%)" if result["error"] is not None else "")]

    def planned(value: Optional[float]) -> str:
        return f" (plan {value:.4g} ms)" if value is not None else ""

    for r in result["ranks"]:
        lines.append(f"  rank {r['rank']} ({r['gpu']}, stage {r['stage']}): busy "
                     f"{r['busy_ms']:.4g} ms" + planned(r["planned_busy_ms"])
                     + (f", update {r['update_ms']:.4g} ms" + planned(r["planned_update_ms"])
                        if r["update_ms"] is not None else "")
                     + f", {r['operations']} operations"
                     + (f", peak memory {r['peak_memory_bytes']} bytes"
                        if r["peak_memory_bytes"] is not None else ""))
    c = result["check"]
    if c is not None and c["passed"]:
        lines.append(f"  check passed: the loss, {c['gradients_compared']} gradients and "
                     f"{c['parameters_compared']} parameters after the optimizer step equal "
                     f"single-process float64 training (largest relative difference "
                     f"{c['max_relative_difference']:.2g})")
    return "\n".join(lines) + "\n"


def check_runnable(plan: Any, path: str) -> None:
    """run executes v1 plans (spec sections 1-7) and v2 plans with update tasks (spec 8.3): a
    stage with a tensor-parallel degree above 1 or with recomputation (spec 8.2), update tasks
    with a sharded optimizer, a fully sharded plan, the v3 plans of spec 9.2 (a split backward,
    stages that share GPUs) and context parallelism (spec 10.2) are refused with one line naming
    the field."""
    if not isinstance(plan, dict):
        return
    if plan.get("split_backward", False) is not False:
        raise InputError(f"{path}: /split_backward: run executes whole backwards, and the plan "
                         f"splits every backward into its input-gradient and weight-gradient "
                         f"halves (I and W)")
    if plan.get("context_parallel", 1) != 1:
        raise InputError(f"{path}: /context_parallel: run executes plans without context "
                         f"parallelism, and the plan splits each sequence over "
                         f"{plan['context_parallel']} GPUs")
    stages = plan.get("stages")
    first_on: dict[str, int] = {}
    for i, stage in enumerate(stages if isinstance(stages, list) else []):
        if not isinstance(stage, dict):
            continue
        gpus = repr(stage.get("gpus"))
        if first_on.setdefault(gpus, i) != i:
            raise InputError(f"{path}: /stages/{i}/gpus: run executes one stage per GPU, and "
                             f"stage {i} runs on the GPUs of stage {first_on[gpus]}")
        degree = stage.get("tensor_parallel", 1)
        if degree != 1:
            raise InputError(f"{path}: /stages/{i}/tensor_parallel: run executes plans without "
                             f"tensor parallelism, and stage {i} has tensor-parallel degree "
                             f"{degree}")
        if stage.get("recompute", False) is not False:
            raise InputError(f"{path}: /stages/{i}/recompute: run executes plans without "
                             f"recomputation, and stage {i} recomputes its forward")
    if plan.get("optimizer") == "fully-sharded":
        raise InputError(f"{path}: /optimizer: run all-reduces each stage's gradients at the end "
                         f"of the iteration, and the plan is fully sharded (each layer's weights "
                         f"gathered and its gradients reduce-scattered as it computes)")
    if plan.get("optimizer") == "sharded-gradients":
        raise InputError(f"{path}: /optimizer: run all-reduces each stage's gradients at the end "
                         f"of the iteration, and the plan shards its gradients (each layer's "
                         f"gradients reduce-scattered as it computes)")
    schedule = plan.get("schedule")
    updates = schedule.get("updates") if isinstance(schedule, dict) else None
    if plan.get("optimizer", "replicated") != "replicated" and updates:
        raise InputError(f"{path}: /optimizer: run executes update tasks with a replicated "
                         f"optimizer (every replica steps all its parameters), and the plan's "
                         f"optimizer is {plan['optimizer']}")


def _entries(ranks: Any, path: str) -> None:
    """Refuses, with one line naming the entry, a ranks export that is not a list of at least
    one rank, an entry that is not an object, a rank number that is not the entry's place in
    the list (process r executes entry r, and peers are process ranks: a missing, mistyped,
    repeated or misplaced number would send to the wrong process or to none), and operations
    that are not a list. check_operations and check_order both start with it, so either may
    run first."""
    if not isinstance(ranks, list) or not ranks:
        raise InputError(f"{path}: ranks export: must be a list of at least one rank, got "
                         f"{_shown(ranks)}")
    for i, entry in enumerate(ranks):
        where = f"{path}: ranks export: entry {i}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: must be an object, got {_shown(entry)}")
        if "rank" not in entry:
            raise InputError(f'{where}: missing required key "rank"')
        rank = entry["rank"]
        if type(rank) is not int or rank != i:
            again = type(rank) is int and 0 <= rank < i
            raise InputError(f"{where}: rank must be {i} (ranks are numbered by their place "
                             f"in the list), got {_shown(rank)}"
                             + (f" (entry {rank}'s rank too)" if again else ""))
        if "operations" not in entry:
            raise InputError(f'{path}: ranks export: rank {i}: missing required key '
                             f'"operations"')
        if not isinstance(entry["operations"], list):
            raise InputError(f"{path}: ranks export: rank {i}: operations must be a list, got "
                             f"{_shown(entry['operations'])}")


def _named(value: Any) -> str:
    """An operation's name in a message: quoted as Python does for a short printable string,
    else as _shown writes it."""
    if isinstance(value, str) and value.isascii() and value.isprintable() and len(value) <= 38:
        return repr(value)
    return _shown(value)


def check_operations(ranks: list[Json], path: str) -> None:
    """Refuses, with one line naming the rank and operation, what _entries refuses, an
    operation that is not an object, an operation run does not know, an update that is not
    its rank's last operation (spec 8.3: the step follows the stage's AllReduce or last
    backward, and nothing waits for it), and updates on some ranks only (a stage without its
    step would drift from the others)."""
    _entries(ranks, path)
    for entry in ranks:
        where = f"{path}: ranks export: rank {entry['rank']}"
        ops = entry["operations"]
        for i, op in enumerate(ops):
            if not isinstance(op, dict):
                raise InputError(f"{where}, operation {i} ({_shown(op)}): must be an object")
            if op.get("op") not in OPERATIONS:
                raise InputError(f"{where}, operation {i}: run does not know the operation "
                                 f"{_named(op.get('op'))}")
            if op["op"] == "update" and i != len(ops) - 1:
                raise InputError(f"{where}, operation {i}: an update must be the rank's last "
                                 f"operation (one optimizer step per iteration)")
    stepping = [e["rank"] for e in ranks if any(op["op"] == "update" for op in e["operations"])]
    if stepping and len(stepping) != len(ranks):
        missing = next(e["rank"] for e in ranks if e["rank"] not in stepping)
        raise InputError(f"{path}: ranks export: rank {missing} has no update operation and "
                         f"rank {stepping[0]} has one: a plan's optimizer steps are all there "
                         f"or absent")


# Micro-batch numbers are below pipeplan's limit on micro-batches (docs/errors.md).
MICRO_BATCHES = 2 ** 20
_ORDERED = ("forward", "backward", "send", "recv")


def _shown(value: Any) -> str:
    """A value of the export in a message: JSON, in one printable ASCII line of at most 40
    characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 40:
        return "an integer of more than 40 digits"
    try:
        text = json.dumps(value, ensure_ascii=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def _unreadable(op: Any, rank: Any, numbers: list[Any]) -> Optional[str]:
    """What check_order cannot read in operation `op` of rank `rank` (the export's ranks are
    `numbers`), as "(the operation): the rule, got the value", or None. It reads the
    micro-batch of a forward, backward, send and recv, and the kind and peer of a send and
    recv; other operations are check_operations' to refuse."""
    if not isinstance(op, dict):
        return f"({_shown(op)}): must be an object"
    name = op.get("op")
    if name not in _ORDERED:
        return None
    if "micro_batch" not in op:
        return f'({name}): missing required key "micro_batch"'
    m = op["micro_batch"]
    if type(m) is not int or not 0 <= m < MICRO_BATCHES:
        return (f"({name}): micro_batch must be an integer from 0 to {MICRO_BATCHES - 1}, "
                f"got {_shown(m)}")
    if name in ("send", "recv"):
        if "kind" not in op:
            return f'({name} of micro-batch {m}): missing required key "kind"'
        kind = op["kind"]
        if kind not in ("activation", "gradient"):
            return (f'({name} of micro-batch {m}): kind must be "activation" or "gradient", '
                    f"got {_shown(kind)}")
        if "peer" not in op:
            return f'({name} {kind} of micro-batch {m}): missing required key "peer"'
        peer = op["peer"]
        if type(peer) is not int or peer == rank or peer not in numbers:
            return (f"({name} {kind} of micro-batch {m}): peer must be another rank of the "
                    f"export, got {_shown(peer)}"
                    + (" (this rank)" if type(peer) is int and peer == rank else ""))
    return None


def check_order(ranks: list[Json], path: str) -> None:
    """Refuses, with one line naming the rank, the operation's index and the operation, an
    order that would fail or wait forever once running (each rule below is a KeyError or a
    wait in Rank.iteration, or a micro-batch computed twice):
    * a receive no rank sends, a send no rank receives (a send left unmatched is waited for at
      the end of the iteration, forever);
    * a forward of micro-batch m after this rank's forward of m (m computed twice, its loss
      counted twice on the last stage), or before this rank's receive of m's activation (no
      input yet);
    * a backward of m before this rank's forward of m or after its backward of m (the output
      is gone), or before this rank's receive of m's gradient (no gradient yet);
    * a gradient received, or an activation sent, before this rank's forward of m or after
      its backward of m (the output it reads is not there);
    * a gradient of m sent before this rank's backward of m, or without an activation of m
      received and not sent back yet (the gradient is the received input's, which the send
      takes).
    A rank that receives no activation of m forwards its own data (the first stage), and one
    that receives no gradient of m backwards from the loss (the last stage): those are not
    refused. Before any of it, what _entries refuses and an operation it cannot read: one
    that is not an object, a forward, backward, send or recv without a micro-batch number from
    0 to 2^20 - 1, a send or recv whose kind is not activation or gradient or whose peer is
    not another rank of the export. O(operations)."""
    _entries(ranks, path)
    sends, recvs = _transfer_counts(ranks, path)
    for entry in ranks:
        _check_rank_order(entry, path, sends, recvs)


Transfers = dict[tuple[int, int, str, int], int]


def _transfer_counts(ranks: list[Json], path: str) -> tuple[Transfers, Transfers]:
    """Per transfer (sender, receiver, kind, micro-batch), how many sends and receives the
    export holds, after refusing the first operation that cannot be read. O(operations)."""
    numbers = [entry["rank"] for entry in ranks]
    sends: Transfers = {}
    recvs: Transfers = {}
    for entry in ranks:
        for i, op in enumerate(entry["operations"]):
            why = _unreadable(op, entry["rank"], numbers)
            if why is not None:
                raise InputError(f"{path}: ranks export: rank {entry['rank']}, operation {i} "
                                 f"{why}")
            if op.get("op") == "send":
                key = (entry["rank"], op["peer"], op["kind"], op["micro_batch"])
                sends[key] = sends.get(key, 0) + 1
            elif op.get("op") == "recv":
                key = (op["peer"], entry["rank"], op["kind"], op["micro_batch"])
                recvs[key] = recvs.get(key, 0) + 1
    return sends, recvs


def _check_rank_order(entry: Json, path: str, sends: Transfers, recvs: Transfers) -> None:
    """check_order's rules for one rank's operations, taking its transfers from the counts
    left in `sends` and `recvs`. O(operations of the rank)."""
    where = f"{path}: ranks export: rank {entry['rank']}"
    ops = entry["operations"]
    # Per micro-batch and kind, the index of this rank's last receive of it.
    last_recv: dict[tuple[str, int], int] = {}
    for i, op in enumerate(ops):
        if op.get("op") == "recv":
            last_recv[(op["kind"], op["micro_batch"])] = i
    forwarded: set[int] = set()
    backwarded: set[int] = set()
    received: dict[str, set[int]] = {"activation": set(), "gradient": set()}
    inputs: set[int] = set()  # activations received and not sent back: Rank's `inputs`
    for i, op in enumerate(ops):
        if op.get("op") not in _ORDERED:
            continue
        m = op["micro_batch"]
        kind = op["kind"] if op["op"] in ("send", "recv") else None
        what = f"operation {i} ({op['op']} {kind + ' ' if kind else ''}of micro-batch {m})"

        def refuse(why: str) -> InputError:
            return InputError(f"{where}, {what}: {why}")

        def receive_first(of: str) -> None:
            # A computation that needs this rank's receive of m's `of` when it has one.
            if m not in received[of] and last_recv.get((of, m), -1) > i:
                raise refuse(f"comes before this rank's receive of micro-batch {m}'s {of}")

        if op["op"] == "forward":
            if m in forwarded:
                raise refuse(f"comes after this rank's forward of micro-batch {m}")
            receive_first("activation")
            forwarded.add(m)
        elif op["op"] == "backward":
            if m not in forwarded:
                raise refuse(f"comes before this rank's forward of micro-batch {m}")
            if m in backwarded:
                raise refuse(f"comes after this rank's backward of micro-batch {m}")
            receive_first("gradient")
            backwarded.add(m)
        elif op["op"] == "recv":
            key = (op["peer"], entry["rank"], kind, m)
            if not sends.get(key):
                raise refuse(f"rank {op['peer']} never sends it")
            sends[key] -= 1
            if kind == "gradient":
                if m not in forwarded:
                    raise refuse(f"comes before this rank's forward of micro-batch {m}")
                if m in backwarded:
                    raise refuse(f"comes after this rank's backward of micro-batch {m}")
            else:
                inputs.add(m)
            received[kind].add(m)
        else:
            key = (entry["rank"], op["peer"], kind, m)
            if not recvs.get(key):
                raise refuse(f"rank {op['peer']} never receives it")
            recvs[key] -= 1
            step = "forward" if kind == "activation" else "backward"
            if m not in (forwarded if kind == "activation" else backwarded):
                raise refuse(f"comes before this rank's {step} of micro-batch {m}")
            if kind == "activation" and m in backwarded:
                raise refuse(f"comes after this rank's backward of micro-batch {m}")
            if kind == "gradient":
                if m in inputs:
                    inputs.discard(m)
                elif m in received["activation"]:
                    raise refuse(f"comes after this rank's send of micro-batch {m}'s "
                                 f"gradient, with no receive of its activation between")
                else:
                    # None later either: the forward before it would have been refused.
                    raise refuse(f"this rank never receives micro-batch {m}'s activation")


def _planned_updates(plan: Json) -> dict[str, float]:
    """Per GPU, the duration of its update task in the plan (spec 8.3); GPUs without one are
    absent."""
    updates = plan.get("schedule", {}).get("updates", [])
    return {u["gpu"]: round(u["end_ms"] - u["start_ms"], 6) for u in updates}


def run(args: argparse.Namespace) -> None:
    """`run PLAN MODEL TOPO`: executes the plan's operations on its ranks and reports."""
    if args.iterations < 1:
        raise UsageError("--iterations must be >= 1")
    if args.timeout <= 0:
        raise UsageError("--timeout must be > 0")
    if args.backend == "nccl" and not torch.cuda.is_available():
        raise UsageError("--backend nccl: no CUDA device is available")
    pipeplan_binary()
    plan = read_json(args.plan, "plan")
    check_runnable(plan, args.plan)
    model = read_json(args.model, "model")
    ranks = ranks_export(args.plan, args.model, args.topology)
    check_operations(ranks, args.plan)
    check_order(ranks, args.plan)
    batch_size = model.get("profile", {}).get("batch_size")
    if not isinstance(batch_size, int):
        raise InputError(f"{args.model}: /profile/batch_size: run needs the micro-batch size "
                         "the model was profiled with")
    payload = {
        "factory": args.module, "model": args.model, "plan": args.plan, "ranks": ranks,
        "micro_batches": plan["micro_batches"], "batch_size": batch_size,
        "iteration_ms": plan["iteration_ms"], "planner": plan.get("planner"),
        "schedule_policy": plan.get("schedule_policy"), "iterations": args.iterations,
        "backend": args.backend, "check": args.check, "timeout": args.timeout, "lr": args.lr,
        "threads": args.threads,
        "planned_busy_ms": {g["id"]: g.get("busy_ms") for g in plan.get("gpus", [])},
        "planned_update_ms": _planned_updates(plan),
    }
    describe = Describe(ranks)
    if launch.under_torchrun():
        if int(os.environ["WORLD_SIZE"]) != len(ranks):
            raise UsageError(f"the plan uses {len(ranks)} GPUs, torchrun started "
                             f"{os.environ['WORLD_SIZE']} ranks")
        result = launch.join_torchrun(rank_main, payload, args.threads, describe)
        if result is None:
            return
    else:
        # The factory once here, so that a file that does not load or a factory that raises is
        # one line before any rank starts, not one traceback per rank.
        build(args.module)
        result = launch.spawn(rank_main, len(ranks), payload, args.threads, describe)
    write_json(args.output, result)
    sys.stderr.write(summary(result))
    if result["check"] is not None and not result["check"]["passed"]:
        raise CheckError("--check: " + result["check"]["mismatch"])
