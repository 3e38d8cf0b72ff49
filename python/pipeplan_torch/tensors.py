"""Devices and tensors: what profile, probe and run share once torch is imported."""

import os
from typing import Any, Optional

import torch


def rank_device(backend: str, rank: int) -> torch.device:
    """The device of a rank: a CUDA device for NCCL (LOCAL_RANK under torchrun, else the rank,
    modulo the devices present), the CPU for gloo."""
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Waits for the device's queued work, so that a timer measures it (CUDA); nothing on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(value: Any, device: torch.device, dtype: Optional[torch.dtype] = None) -> Any:
    """A micro-batch (a tensor or nested tuples and lists of them) on `device`, its floating
    tensors converted to `dtype` when given."""
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if dtype is not None and value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device, dtype) for v in value)
    return value
