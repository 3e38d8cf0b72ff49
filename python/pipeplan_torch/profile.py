"""profile: per-layer forward and backward times, activation, parameter and stash bytes of a
model built by a factory, written as a pipeplan model.json."""

import os
import statistics
import sys
import argparse
import time
from typing import Any, Callable, Iterable

import torch

from .common import InputError, UsageError, build, one_line, write_json
from .tensors import synchronize, to_device


def tensor_bytes(t: torch.Tensor) -> int:
    """The bytes of a tensor's elements."""
    return t.numel() * t.element_size()


def _storage(t: torch.Tensor) -> Any:
    # torch 2.x has untyped_storage(); torch 1.13's storage() is a TypedStorage with the same
    # data_ptr() and nbytes().
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class StashMeter:
    """Counts the bytes autograd saves for backward (saved-tensor hooks), each storage once,
    parameters excluded (they are the layer's parameter_bytes)."""

    def __init__(self, parameters: Iterable[torch.Tensor]) -> None:
        self.excluded = {_storage(p).data_ptr() for p in parameters}
        self.seen: set[int] = set()
        self.bytes = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        """The pack hook: counts `t`'s storage, returns `t` unchanged."""
        storage = _storage(t)
        key = storage.data_ptr()
        if key not in self.excluded and key not in self.seen:
            self.seen.add(key)
            self.bytes += storage.nbytes()
        return t

    def hooks(self) -> Any:
        """The context manager that installs the hooks."""
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def _leaf(x: Any) -> Any:
    """The input of a layer as a fresh leaf, so that its backward can be timed alone."""
    x = x.detach()
    if x.is_floating_point():
        x.requires_grad_(True)
    return x


def measure(model: torch.nn.Sequential, make_micro_batch: Callable[[int, int], Any],
            loss_fn: Callable[[Any, Any], torch.Tensor], batch_size: int,
            device: torch.device, warmup: int, repeat: int) -> list[dict[str, Any]]:
    """Times every layer's forward and backward (the last layer's include the loss) and
    measures its output, parameter and saved-tensor bytes. Returns one dict per layer."""
    layers = list(model.named_children())
    try:
        inputs, targets = to_device(make_micro_batch(batch_size, 0), device)
    except Exception as e:  # the user's function
        raise InputError(f"make_micro_batch({batch_size}, 0) raised {one_line(e)}") from e
    forward = [[] for _ in layers]
    backward = [[] for _ in layers]
    stash = [0] * len(layers)
    activation = [0] * len(layers)
    for run in range(warmup + repeat):
        xs, ys = [], []
        x = inputs
        for i, (_, layer) in enumerate(layers):
            x = _leaf(x) if i > 0 else x
            meter = StashMeter(layer.parameters())
            synchronize(device)
            start = time.perf_counter()
            with meter.hooks():
                name = layers[i][0]
                try:  # the user's layer: a shape it refuses, say
                    y = layer(x)
                except Exception as e:
                    label = f"layer {i}" + (f" ({name})" if name != str(i) else "")
                    raise InputError(f"{label} refused the micro-batch: {one_line(e)}") from e
                if i == len(layers) - 1:
                    try:
                        y = loss_fn(y, targets)
                    except Exception as e:
                        raise InputError(f"loss_fn raised {one_line(e)}") from e
            synchronize(device)
            if run >= warmup:
                forward[i].append(time.perf_counter() - start)
            if i < len(layers) - 1:
                activation[i] = tensor_bytes(y)
            stash[i] = meter.bytes
            xs.append(x)
            ys.append(y)
            x = y
        grad = None
        for i in reversed(range(len(layers))):
            synchronize(device)
            start = time.perf_counter()
            if ys[i].requires_grad:
                torch.autograd.backward(ys[i], grad)
            synchronize(device)
            if run >= warmup:
                backward[i].append(time.perf_counter() - start)
            grad = xs[i].grad if isinstance(xs[i], torch.Tensor) else None
        model.zero_grad(set_to_none=True)
    out = []
    for i, (name, layer) in enumerate(layers):
        out.append({
            "name": name,
            "forward_ms": round(1e3 * statistics.median(forward[i]), 6),
            "backward_ms": round(1e3 * statistics.median(backward[i]), 6),
            "activation_bytes": activation[i],
            "parameter_bytes": sum(tensor_bytes(p) for p in layer.parameters()),
            "stash_bytes": stash[i],
        })
    return out


def device_name(device: torch.device) -> str:
    """The device as profile.device records it: the GPU's name, or `cpu (N threads)`."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'s' if threads > 1 else ''})"


def model_name(spec: str) -> str:
    """gpt for examples/torch/gpt.py:build, mod for package.mod:build."""
    module = spec.rpartition(":")[0]
    if module.endswith(".py") or os.sep in module:
        return os.path.splitext(os.path.basename(module))[0]
    return module.rpartition(".")[2]


def profile(args: argparse.Namespace) -> None:
    """`profile MODULE:FACTORY -o MODEL`: measures the model and writes model.json."""
    if args.batch_size < 1 or args.warmup < 0 or args.repeat < 1:
        raise UsageError("--batch-size and --repeat must be >= 1, --warmup >= 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model, make_micro_batch, loss_fn = build(args.factory)
    model.to(device)
    try:
        layers = measure(model, make_micro_batch, loss_fn, args.batch_size, device,
                         args.warmup, args.repeat)
    except InputError as e:
        raise InputError(f"{args.factory}: {e}") from e
    result = {
        "schema": "pipeplan/model/v1",
        "name": model_name(args.factory),
    }
    if args.micro_batches is not None:
        result["micro_batches"] = args.micro_batches
    result["profile"] = {"batch_size": args.batch_size, "device": device_name(device)}
    # pipeplan_torch run trains with SGD without momentum: weights and gradients.
    result["parameter_memory_factor"] = 2
    result["x-pipeplan-torch"] = {"factory": args.factory, "warmup": args.warmup,
                                  "repeat": args.repeat, "torch": torch.__version__}
    result["layers"] = layers
    write_json(args.output, result)
    sys.stderr.write(
        f"pipeplan_torch: {result['name']}: {len(layers)} layers, forward "
        f"{sum(l['forward_ms'] for l in layers):.4g} ms and backward "
        f"{sum(l['backward_ms'] for l in layers):.4g} ms per micro-batch of {args.batch_size} "
        f"on {result['profile']['device']}, "
        f"{sum(l['parameter_bytes'] for l in layers)} bytes of parameters\n")
