"""probe: point-to-point latency and bandwidth of every ordered pair of ranks, fitted from a
sweep of message sizes, written as a pipeplan topo.json with explicit GPUs and links."""

import argparse
import socket
import statistics
import sys
import time
from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist

from . import launch
from .launch import Progress
from .common import UsageError, write_json
from .tensors import rank_device, synchronize

SIZES_BYTES = (4 << 10, 64 << 10, 512 << 10, 2 << 20, 8 << 20)


def fit(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least squares t = a + b * size; returns (a, b)."""
    n = len(sizes)
    mean_x, mean_y = sum(sizes) / n, sum(seconds) / n
    sxx = sum((x - mean_x) ** 2 for x in sizes)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, seconds)) / sxx
    return mean_y - b * mean_x, b


def one_way(sizes: Sequence[float], round_trips: Sequence[float]) -> tuple[float, float]:
    """Latency (s) and bandwidth (bytes/s) of one direction from ping-pong round trips of
    size-byte messages answered by a one-element message: the round trip is two latencies and
    one size / bandwidth. A sweep that does not grow with the size (noise) keeps the largest
    message's throughput."""
    a, b = fit(sizes, round_trips)
    if b <= 0:
        b = round_trips[-1] / sizes[-1]
    return max(a / 2, 0.0), 1.0 / b


def pairs(world_size: int) -> list[tuple[int, int]]:
    """The ordered pairs in the order they are measured."""
    return [(src, dst) for src in range(world_size) for dst in range(world_size) if src != dst]


def probe_rank(rank: int, world_size: int, progress: Progress,
               payload: dict[str, Any]) -> Optional[dict[str, Any]]:
    """Every ordered pair in turn: the sender times `repeat` round trips per size."""
    device = rank_device(payload["backend"], rank)
    ack = torch.zeros(1, device=device)
    measured = {}
    for index, (src, dst) in enumerate(pairs(world_size)):
        progress.outside()
        dist.barrier()
        if rank in (src, dst):
            progress.wait(index)
            times = []
            for size in SIZES_BYTES:
                message = torch.zeros(size // 4, device=device)
                samples = []
                for k in range(payload["warmup"] + payload["repeat"]):
                    synchronize(device)
                    start = time.perf_counter()
                    if rank == src:
                        dist.send(message, dst)
                        dist.recv(ack, dst)
                    else:
                        dist.recv(message, src)
                        dist.send(ack, src)
                    synchronize(device)
                    if k >= payload["warmup"]:
                        samples.append(time.perf_counter() - start)
                times.append(statistics.median(samples))
            if rank == src:
                measured[(src, dst)] = one_way(list(SIZES_BYTES), times)
    progress.outside()
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory
    else:
        memory = None
    mine = {"host": socket.gethostname(), "device": device.type, "memory": memory,
            "pairs": measured}
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    return topology(gathered, payload) if rank == 0 else None


def _significant(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def topology(ranks: list[dict[str, Any]], payload: dict[str, Any]) -> dict[str, Any]:
    """The topo.json of the measured ranks: explicit GPUs, one link per pair."""
    ids = [f"{r['device']}{i}" for i, r in enumerate(ranks)]
    gpus = []
    for i, r in enumerate(ranks):
        gpu = {"id": ids[i], "node": r["host"]}
        memory = payload["memory"] if payload["memory"] is not None else r["memory"]
        if memory is not None:
            gpu["memory"] = memory
        gpus.append(gpu)
    pairs = {}
    for r in ranks:
        pairs.update(r["pairs"])
    links = []
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            (lat_ij, bw_ij), (lat_ji, bw_ji) = pairs[(i, j)], pairs[(j, i)]
            # A link is undirected: the slower direction, so that the plan does not promise
            # what one direction cannot deliver. Both directions are kept for reference.
            links.append({
                "between": [ids[i], ids[j]],
                "bandwidth": _significant(min(bw_ij, bw_ji)),
                "latency": _significant(max(lat_ij, lat_ji)),
                "x-measured": {
                    f"{ids[i]}->{ids[j]}": {"bandwidth": _significant(bw_ij),
                                            "latency": _significant(lat_ij)},
                    f"{ids[j]}->{ids[i]}": {"bandwidth": _significant(bw_ji),
                                            "latency": _significant(lat_ji)}}})
    return {
        "schema": "pipeplan/topology/v1",
        "name": f"probe of {len(ranks)} {ranks[0]['device']} ranks ({payload['backend']})",
        "x-pipeplan-torch": {"sizes_bytes": list(SIZES_BYTES), "repeat": payload["repeat"],
                             "warmup": payload["warmup"], "threads": payload["threads"],
                             "units": "bandwidth in bytes/s, latency in s",
                             "torch": torch.__version__},
        "gpus": gpus,
        "links": links,
    }


class Describe:
    """Names the pair a rank waits in, for the watchdog."""

    def __init__(self, world_size: int) -> None:
        self.pairs = pairs(world_size)

    def __call__(self, rank: int, index: int) -> str:
        src, dst = self.pairs[index]
        return f"rank {rank} waits in measuring rank {src} -> rank {dst}"


def probe(args: argparse.Namespace) -> None:
    """`probe --ranks N -o TOPO`: measures every pair and writes topo.json."""
    if args.ranks < 2:
        raise UsageError("--ranks must be >= 2 (a probe measures pairs)")
    if args.backend == "nccl" and not torch.cuda.is_available():
        raise UsageError("--backend nccl: no CUDA device is available")
    if args.repeat < 1:
        raise UsageError("--repeat must be >= 1")
    payload = {"backend": args.backend, "memory": args.memory, "repeat": args.repeat,
               "warmup": 2, "timeout": args.timeout, "threads": args.threads}
    if launch.under_torchrun():
        result = launch.join_torchrun(probe_rank, payload, args.threads, Describe(args.ranks))
        if result is None:
            return
    else:
        result = launch.spawn(probe_rank, args.ranks, payload, args.threads, Describe(args.ranks))
    write_json(args.output, result)
    links = result["links"]
    sys.stderr.write(
        f"pipeplan_torch: {args.ranks} ranks, {len(links)} link{'s' if len(links) > 1 else ''}: "
        f"slowest {min(l['bandwidth'] for l in links) / 1e9:.3g} GB/s, largest latency "
        f"{max(l['latency'] for l in links) * 1e3:.3g} ms\n")
