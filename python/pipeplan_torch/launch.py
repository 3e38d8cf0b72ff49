"""Starting ranks and watching them: one process per rank on 127.0.0.1 with a file store (or
the processes of a torchrun launch), a shared progress table, and the watchdog that turns a
stuck rank into one line naming the rank and the operation it waits in."""

import datetime
import os
import queue
import shutil
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, MutableSequence, Optional

from .common import Error

# Progress states of a rank: running an operation, blocked in one (a receive, an AllReduce, or
# the completion of a send), or outside the plan's operations (setting up, between
# iterations, finished).
BUSY, WAITING, OUTSIDE = 0.0, 1.0, 2.0
_FIELDS = 3


class Progress:
    """One rank's row of the progress table: the operation index, the state, and since when
    (time.monotonic(), which is one clock for every process of a host)."""

    def __init__(self, table: MutableSequence[float], rank: int) -> None:
        self.table = table
        self.base = rank * _FIELDS
        self.outside()

    def _set(self, index: int, state: float) -> None:
        # The watchdog reads index, state, then since, while this writes since first and the
        # state last: a state it sees is never paired with an older operation's start.
        self.table[self.base + 2] = time.monotonic()
        self.table[self.base] = float(index)
        self.table[self.base + 1] = state

    def busy(self, index: int) -> None:
        """The rank runs operation `index`."""
        self._set(index, BUSY)

    def wait(self, index: int) -> None:
        """The rank is blocked in operation `index`."""
        self._set(index, WAITING)

    def outside(self) -> None:
        """The rank is outside the plan's operations."""
        self._set(-1, OUTSIDE)


# What a rank runs: target(rank, world_size, progress, payload) -> rank 0's result.
Target = Callable[[int, int, Progress, dict[str, Any]], Any]


def stuck_message(table: MutableSequence[float], world_size: int, timeout_s: float,
                  describe: Callable[[int, int], str]) -> Optional[str]:
    """None while no rank has waited in one operation for more than `timeout_s`; otherwise the
    watchdog's line naming every rank that waits in an operation, in rank order.
    `describe(rank, index)` names a rank's operation."""
    now = time.monotonic()
    rows = [(r, int(table[r * _FIELDS]), table[r * _FIELDS + 1], table[r * _FIELDS + 2])
            for r in range(world_size)]
    waiting = [(r, index) for r, index, state, since in rows if state == WAITING]
    if not any(state == WAITING and now - since > timeout_s for _, _, state, since in rows):
        return None
    return (f"watchdog: no progress in {timeout_s:g} s: "
            + "; ".join(f"{describe(r, index)}" for r, index in waiting))


def _kill(processes: list[Any]) -> None:
    for p in processes:
        if p.is_alive():
            p.kill()
    for p in processes:
        p.join()


def _child(rank: int, world_size: int, store_path: str, table: MutableSequence[float],
           messages: Any, threads: int, target: Target, payload: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    progress = Progress(table, rank)
    try:
        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(payload["backend"], store=store, rank=rank,
                                world_size=world_size,
                                timeout=datetime.timedelta(seconds=2 * payload["timeout"] + 30))
        result = target(rank, world_size, progress, payload)
        if rank == 0:
            messages.put(("result", 0, result))
        dist.destroy_process_group()
    except Error as e:
        messages.put(("error", e.code, str(e)))
    except Exception as e:  # a bug or a failing model: one line, the details on stderr
        traceback.print_exc()
        first_line = (str(e).splitlines() or [""])[0]
        messages.put(("error", 1, f"rank {rank}: {type(e).__name__}: {first_line}"))


def spawn(target: Target, world_size: int, payload: dict[str, Any], threads: int,
          describe: Callable[[int, int], str]) -> Any:
    """Runs `target(rank, world_size, progress, payload)` in `world_size` new processes (gloo
    or NCCL over 127.0.0.1) and returns what rank 0's returns. Raises the first error a rank
    reports, or the watchdog's when a rank waits in one operation for more than
    payload["timeout"] seconds; no process is left behind either way."""
    import torch.multiprocessing as mp

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    # Forked ranks start at once, with torch already imported; CUDA needs fresh processes.
    context = mp.get_context("spawn" if payload["backend"] == "nccl" else "fork")
    folder = tempfile.mkdtemp(prefix="pipeplan_torch-")
    table = context.Array("d", world_size * _FIELDS, lock=False)
    messages = context.Queue()
    processes = [context.Process(
        target=_child,
        args=(r, world_size, os.path.join(folder, "store"), table, messages, threads, target,
              payload), daemon=True) for r in range(world_size)]
    try:
        for p in processes:
            p.start()
        result = None
        while True:
            try:
                kind, code, value = messages.get(timeout=0.05)
            except queue.Empty:
                kind = None
            if kind == "error":
                error = Error(value)
                error.code = code
                raise error
            if kind == "result":
                result = value
            message = stuck_message(table, world_size, payload["timeout"], describe)
            if message:
                raise Error(message)
            if all(p.exitcode is not None for p in processes) and messages.empty():
                break
        for r, p in enumerate(processes):
            if p.exitcode != 0:
                raise Error(f"rank {r} ended with exit code {p.exitcode}")
        if result is None:
            raise Error("rank 0 ended without a result")
        return result
    finally:
        _kill(processes)
        shutil.rmtree(folder, ignore_errors=True)


def under_torchrun() -> bool:
    """Whether a launcher such as torchrun started this process as one rank."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def join_torchrun(target: Target, payload: dict[str, Any], threads: int,
                  describe: Callable[[int, int], str]) -> Any:
    """Runs `target` as this process's rank of a torchrun launch, with a watchdog thread that
    ends the process (exit 1, one line) when it waits in one operation too long. Returns what
    the target returns (rank 0's result; None on the other ranks)."""
    import sys

    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Only this rank's row is filled in: each process watches itself.
    table = [0.0] * (world_size * _FIELDS)
    progress = Progress(table, rank)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            message = stuck_message(table, world_size, payload["timeout"], describe)
            if message:
                sys.stderr.write(f"pipeplan_torch: error: {message}\n")
                sys.stderr.flush()
                os._exit(1)

    dist.init_process_group(payload["backend"], init_method="env://", rank=rank,
                            world_size=world_size,
                            timeout=datetime.timedelta(seconds=2 * payload["timeout"] + 30))
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return target(rank, world_size, progress, payload)
    finally:
        stop.set()
        dist.destroy_process_group()
