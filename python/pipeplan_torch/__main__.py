"""python3 -m pipeplan_torch profile|probe|run: see docs/torch.md."""

import argparse
import math
import os
import re
import sys
from typing import Callable, NoReturn, Optional

from .common import PROG, Error, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _prog() -> str:
    """How the command was started: the `pipeplan-torch` entry point or `python3 -m`."""
    if os.path.basename(sys.argv[0]) == "pipeplan-torch":
        return "pipeplan-torch"
    return f"python3 -m {PROG}"


def _integer(least: int) -> Callable[[str], int]:
    """An argparse type: decimal digits only, at least `least` (a usage error otherwise)."""
    def read(text: str) -> int:
        if not text.isdigit() or not text.isascii() or int(text) < least:
            raise argparse.ArgumentTypeError(f"must be an integer from {least}, got {text!r}")
        return int(text)
    return read


def _positive(text: str) -> float:
    """An argparse type: a finite number above 0 (seconds, a learning rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


_MEMORY = re.compile(
    r"\s*[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\s*(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*")


def _memory(text: str) -> str:
    """An argparse type: a size as topo.json takes it ("16 GiB"; docs/formats.md)."""
    if not _MEMORY.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "must be a size with a unit of B, kB, MB, GB, TB, KiB, MiB, GiB or TiB, "
            f"got {text!r}")
    return text


def parser() -> argparse.ArgumentParser:
    """The command line of every subcommand."""
    p = _Parser(prog=_prog(), description="PyTorch in the loop for pipeplan.")
    commands = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    prof = commands.add_parser("profile", help="per-layer profile of a model -> model.json")
    prof.add_argument("factory", metavar="MODULE:FACTORY")
    prof.add_argument("--batch-size", type=_integer(1), default=8)
    prof.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    prof.add_argument("--warmup", type=_integer(0), default=3)
    prof.add_argument("--repeat", type=_integer(1), default=20)
    prof.add_argument("--micro-batches", type=_integer(1),
                      help="written as the model's micro_batches")
    prof.add_argument("--threads", type=_integer(1), help="torch.set_num_threads (CPU)")
    prof.add_argument("-o", "--output", required=True, metavar="MODEL")

    probe = commands.add_parser("probe", help="measure point-to-point links -> topo.json")
    probe.add_argument("--ranks", type=_integer(1), required=True)
    probe.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    probe.add_argument("--memory", type=_memory,
                       help="every GPU's memory, as in topo.json (\"16 GiB\")")
    probe.add_argument("--repeat", type=_integer(1), default=10)
    probe.add_argument("--threads", type=_integer(1), default=1, help="torch threads per rank")
    probe.add_argument("--timeout", type=_positive, default=60.0)
    probe.add_argument("-o", "--output", required=True, metavar="TOPO")

    run = commands.add_parser("run", help="execute a plan's per-rank operations")
    run.add_argument("plan", metavar="PLAN")
    run.add_argument("model", metavar="MODEL")
    run.add_argument("topology", metavar="TOPO")
    run.add_argument("--module", required=True, metavar="MODULE:FACTORY")
    run.add_argument("--iterations", type=_integer(1), default=3)
    run.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    run.add_argument("--check", action="store_true",
                     help="compare the loss and gradients with single-process float64 training")
    run.add_argument("--timeout", type=_positive, default=60.0,
                     help="seconds a rank may wait in one operation (default 60)")
    run.add_argument("--threads", type=_integer(1), default=1, help="torch threads per rank")
    run.add_argument("--lr", type=_positive, default=0.01, help="SGD learning rate")
    run.add_argument("-o", "--output", metavar="REPORT")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    """Runs the command line `argv` (default: sys.argv[1:]); returns the exit code. The
    `pipeplan-torch` entry point and `python3 -m pipeplan_torch` both run it."""
    try:
        args = parser().parse_args(argv)
        if args.command == "profile":
            from .profile import profile
            profile(args)
        elif args.command == "probe":
            from .probe import probe
            probe(args)
        else:
            from .run import run
            run(args)
    except Error as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return e.code
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        sys.stderr.write(f"{PROG}: error: PyTorch is not installed for {sys.executable} "
                         "(Debian: apt-get install python3-torch)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
