"""What every command shares: typed errors with exit codes, factories, files, the binary."""

import importlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from typing import Any, Callable, Optional

PROG = "pipeplan_torch"


class Error(Exception):
    """A failure that ends the command with one line on standard error and `code`."""

    code = 1


class UsageError(Error):
    code = 2


class InputError(Error):
    code = 3


class OutputError(Error):
    code = 5


class CheckError(Error):
    """--check found a loss, a gradient or an updated parameter that differs from
    single-process training."""

    code = 6


def one_line(error: BaseException) -> str:
    """`error` as one line: its type, and its message's first line (a SyntaxError's with the
    line number)."""
    text = str(error).strip().splitlines()
    return type(error).__name__ + (": " + text[0] if text else "")


def load_factory(spec: str) -> Callable[[], Any]:
    """Returns the function named by `spec`, "path/to/file.py:build" or "package.module:build"."""
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise UsageError(
            f"{spec}: expected MODULE:FACTORY, for example examples/torch/gpt.py:build")
    if module_name.endswith(".py") or os.sep in module_name:
        path = os.path.abspath(module_name)
        if not os.path.isfile(path):
            raise InputError(f"{spec}: no such file {module_name}")
        unique = "pipeplan_torch_factory_" + str(abs(hash(path)))
        module_spec = importlib.util.spec_from_file_location(unique, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[unique] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # the user's file: a syntax error, a failing import, ...
            raise InputError(f"{spec}: {module_name} does not load: {one_line(e)}") from e
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise InputError(f"{spec}: cannot import {module_name}: {e}") from e
        except Exception as e:
            raise InputError(f"{spec}: {module_name} does not load: {one_line(e)}") from e
    factory = getattr(module, function_name, None)
    if not callable(factory):
        raise InputError(f"{spec}: {module_name} has no function {function_name}")
    return factory


def build(spec: str, seed: int = 0) -> tuple[Any, Callable[..., Any], Callable[..., Any]]:
    """Calls the factory of `spec` after seeding torch, so that every process gets the same
    initial weights; checks and returns (model, make_micro_batch, loss_fn)."""
    import torch

    torch.manual_seed(seed)
    factory = load_factory(spec)
    try:
        result = factory()
    except Exception as e:  # the user's factory
        raise InputError(f"{spec}: the factory raised {one_line(e)}") from e
    if (not isinstance(result, tuple) or len(result) != 3
            or not isinstance(result[0], torch.nn.Sequential)
            or not callable(result[1]) or not callable(result[2])):
        raise InputError(f"{spec}: must return (torch.nn.Sequential, make_micro_batch, loss_fn)")
    return result


def layer_names(model: Any) -> list[str]:
    """The names of the children of a torch.nn.Sequential, in order: the layer names."""
    return [name for name, _ in model.named_children()]


def read_json(path: str, what: str) -> Any:
    """The JSON value in `path`; `what` names it in errors ("the plan")."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read the {what}: {e.strerror}") from e
    except ValueError as e:
        raise InputError(f"{path}: the {what} is not JSON: {e}") from e


def write_json(path: Optional[str], value: Any) -> None:
    """Writes `value` as JSON to `path` completely or not at all ("-" or None: standard
    output). Like pipeplan: a symbolic link's target is replaced, not the link, and a device or
    a pipe (/dev/null) is written directly, never renamed over."""
    text = json.dumps(value, indent=2) + "\n"
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{path}: cannot write: is a directory")
    try:
        if info is not None and not stat.S_ISREG(info.st_mode):
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
            return
        fd, temp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".tmp.",
                                    dir=os.path.dirname(target))
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if info is not None:
            os.chmod(temp, stat.S_IMODE(info.st_mode))
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(temp, 0o666 & ~mask)
        os.replace(temp, target)
    except OSError as e:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e


def pipeplan_binary() -> str:
    """The pipeplan executable: $PIPEPLAN_BIN, else `pipeplan` on PATH."""
    named = os.environ.get("PIPEPLAN_BIN")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise UsageError(f"$PIPEPLAN_BIN names {named}, which is not an executable file")
        return named
    path = shutil.which("pipeplan")
    if not path:
        raise UsageError("cannot find pipeplan: set $PIPEPLAN_BIN or put pipeplan on PATH")
    return path


def ranks_export(plan: str, model: str, topology: str) -> Any:
    """The per-rank operations of `plan`: `pipeplan export --format ranks`, parsed."""
    binary = pipeplan_binary()
    result = subprocess.run(
        [binary, "export", plan, "--format", "ranks", "--model", model, "--topology", topology,
         "--quiet"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()
        error = InputError if result.returncode == 3 else Error
        raise error(f"pipeplan export failed (exit {result.returncode}): "
                    + (message[-1] if message else "no message"))
    return json.loads(result.stdout)
