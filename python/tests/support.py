"""Paths and process helpers shared by the pipeplan_torch tests."""

import json
import os
import subprocess
import sys

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PYTHON_DIR)
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GPT = os.path.join(REPO, "examples", "torch", "gpt.py") + ":build"
CNN = os.path.join(REPO, "examples", "torch", "cnn.py") + ":build"


def pipeplan():
    """The binary under test: CMake passes it in $PIPEPLAN_BIN."""
    path = os.environ.get("PIPEPLAN_BIN")
    if not path:
        raise RuntimeError("set PIPEPLAN_BIN to the pipeplan binary (ctest does)")
    return path


def env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = PYTHON_DIR + os.pathsep + e.get("PYTHONPATH", "")
    e["OMP_NUM_THREADS"] = "1"
    e.update(extra)
    return e


def tool(*args, **extra_env):
    """Runs python3 -m pipeplan_torch ARGS with this interpreter; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "pipeplan_torch", *args], capture_output=True,
                          text=True, env=env(**extra_env), check=False)


def plan(model, topology, output, *flags):
    result = subprocess.run([pipeplan(), "plan", model, topology, "-o", output, "--quiet", *flags],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"pipeplan plan failed: {result.stderr}")
    with open(output, encoding="utf-8") as f:
        return json.load(f)


def validate(*files):
    return subprocess.run([pipeplan(), "validate", *files], capture_output=True, text=True,
                          check=False)


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1)
    return path
