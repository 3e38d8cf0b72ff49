"""ctest PipeplanTorch.install: pip installs the package from a copy of python/ into a new
virtual environment that sees the system's packages (torch, setuptools, pip), offline
(--no-deps --no-build-isolation --no-index), and the `pipeplan-torch` entry point prints the
same help as `python3 -m pipeplan_torch`. Run with the interpreter that imports torch.

Exit 0 when it works, 1 when it does not (with the reason), 77 (skipped) when this Python has
no venv, pip or setuptools to try with (Debian: python3-venv, python3-pip, python3-setuptools).
"""

import os
import shutil
import subprocess
import sys
import tempfile

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = 77


def skip(why: str) -> None:
    print(f"PipeplanTorch.install skipped: {why}")
    sys.exit(SKIPPED)


def fail(why: str) -> None:
    print(f"PipeplanTorch.install failed: {why}")
    sys.exit(1)


def output(command: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH="", PYTHONNOUSERSITE="1"))


def main() -> None:
    for module, package in (("venv", "python3-venv"), ("pip", "python3-pip"),
                            ("setuptools", "python3-setuptools")):
        if output([sys.executable, "-c", f"import {module}"], PYTHON_DIR).returncode != 0:
            skip(f"{sys.executable} cannot import {module}: apt-get install {package}")
    folder = tempfile.mkdtemp(prefix="pipeplan_torch-install-")
    try:
        # A copy, because setuptools builds in the source folder (build/, *.egg-info).
        source = os.path.join(folder, "src")
        shutil.copytree(PYTHON_DIR, source,
                        ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                      "__pycache__"))
        venv = os.path.join(folder, "venv")
        made = output([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                       venv], folder)
        if made.returncode != 0:
            skip(f"{sys.executable} -m venv failed: {made.stderr.strip()}")
        python = os.path.join(venv, "bin", "python")
        installed = output([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                            "--no-index", "--quiet", source], folder)
        if installed.returncode != 0:
            fail(f"pip install failed:\n{installed.stdout}{installed.stderr}")
        where = output([python, "-c", "import pipeplan_torch, os; "
                        "print(os.path.dirname(pipeplan_torch.__file__))"], folder)
        package = where.stdout.strip()
        if not package.startswith(venv) or not os.path.isfile(os.path.join(package, "py.typed")):
            fail(f"the venv imports pipeplan_torch from {package!r}, without py.typed there")
        entry = output([os.path.join(venv, "bin", "pipeplan-torch"), "--help"], folder)
        module = output([python, "-m", "pipeplan_torch", "--help"], folder)
        if entry.returncode != 0 or module.returncode != 0:
            fail(f"--help failed: {entry.stderr}{module.stderr}")
        if not entry.stdout.startswith("usage: pipeplan-torch "):
            fail(f"pipeplan-torch --help prints {entry.stdout!r}")
        if entry.stdout.replace("pipeplan-torch", "python3 -m pipeplan_torch") != module.stdout:
            fail(f"pipeplan-torch --help differs from python3 -m pipeplan_torch --help:\n"
                 f"{entry.stdout}\n{module.stdout}")
        print(f"pipeplan_torch installed into {venv}; pipeplan-torch --help runs main")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
