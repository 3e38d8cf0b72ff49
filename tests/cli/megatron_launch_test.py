#!/usr/bin/env python3
"""Runs docs/formats.md's Megatron-LM launch recipe through a real bash (issue 35).

The block marked ```bash norun: megatron-launch (the docs harness does not run it: it needs
torchrun) is run word for word in a scratch folder that holds a
model written by `pipeplan model transformer`, a topology and a plan, with the binary under
test as `pipeplan` and a stand-in `torchrun` first on PATH. The stand-in records its argv and
environment; `pretrain_gpt.py` must receive exactly the export's `arguments`, followed by the
recipe's own, and the process must have every `environment` entry. Plans cover an uneven
layout (whose `*` a shell would glob: a file that the glob matches lies in the folder) and
tensor parallelism (which needs `CUDA_DEVICE_MAX_CONNECTIONS=1`). The recipe the issue found
broken (`$(... command_line ...)`) is run too, and must fail the same check.

Usage: megatron_launch_test.py PIPEPLAN SOURCE_DIR
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

STAND_IN = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["LAUNCH_RECORD"], "w") as out:
    json.dump({"argv": sys.argv[1:], "environ": dict(os.environ)}, out)
"""

BROKEN = """pipeplan export plan.json --format megatron --model model.json --topology topo.json \
-o megatron.json
torchrun --nproc-per-node 4 pretrain_gpt.py \
    $(python3 -c 'import json; print(json.load(open("megatron.json"))["command_line"])') \
    --data-path my-data
"""

TOPOLOGY = {"nodes": [{"name": "n", "count": 2, "gpus": 4, "memory": "80 GiB",
                       "link": {"bandwidth": "200 GB/s", "latency": "2 us"}}],
            "network": {"bandwidth": "25 GB/s", "latency": "5 us"}}

# (what the plan shows, `plan` options): each gives a plan that Megatron-LM can run.
PLANS: List[Tuple[str, List[str]]] = [
    ("uneven layout", ["--uniform", "--tensor-parallel", "1", "--schedule", "1f1b", "-m", "8"]),
    ("tensor parallel", ["--planner", "megatron", "--tensor-parallel", "2",
                         "--pipeline-parallel", "2", "-m", "8"]),
]


def recipe(formats_md: Path) -> str:
    """The text of the one block marked `bash norun: megatron-launch`."""
    blocks = re.findall(r"^```bash norun: megatron-launch\b.*?\n(.*?)^```",
                        formats_md.read_text(), re.MULTILINE | re.DOTALL)
    if len(blocks) != 1:
        raise SystemExit(f"{formats_md}: expected one ```bash norun: megatron-launch block, "
                         f"found {len(blocks)}")
    return blocks[0]


def launch(script: str, folder: Path, binary: Path) -> Dict[str, object]:
    """Runs `script` with bash in `folder`; returns what the stand-in torchrun recorded."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pipeplan").unlink(missing_ok=True)
    (bin_dir / "pipeplan").symlink_to(binary)
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(STAND_IN)
    torchrun.chmod(0o755)
    record = folder / "record.json"
    record.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", LAUNCH_RECORD=str(record))
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    done = subprocess.run(["bash", "-e", "-c", script], cwd=folder, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not record.exists():
        raise AssertionError(f"the recipe failed (exit {done.returncode}): {done.stderr.strip()}")
    return json.loads(record.read_text())


def problem(record: Dict[str, object], export: Dict[str, object]) -> str:
    """What `pretrain_gpt.py` got that the export did not say, or ""."""
    argv = record["argv"]
    assert isinstance(argv, list)
    if "pretrain_gpt.py" not in argv:
        return f"pretrain_gpt.py is not in torchrun's arguments {argv}"
    given = argv[argv.index("pretrain_gpt.py") + 1:]
    wanted = export["arguments"]
    assert isinstance(wanted, list)
    if given[:len(wanted)] != wanted:
        return f"pretrain_gpt.py got {given}, the export says {wanted}"
    environ = record["environ"]
    assert isinstance(environ, dict)
    for entry in export["environment"]:
        name, value = entry.split("=", 1)
        if environ.get(name) != value:
            return f"{name} is {environ.get(name)!r} in the environment, the export says {value!r}"
    return ""


def glob_bait(folder: Path, export: Dict[str, object]) -> None:
    """A file that an unquoted layout would match as a glob pattern."""
    layout = export.get("pipeline_model_parallel_layout")
    if isinstance(layout, str) and "*" in layout:
        (folder / layout.replace("*", "x")).write_text("")


def main() -> int:
    binary, source = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    script = recipe(source / "docs" / "formats.md")
    failures: List[str] = []
    saw = {"layout": False, "environment": False}
    for what, options in PLANS:
        with tempfile.TemporaryDirectory(prefix="pipeplan-launch-") as scratch:
            folder = Path(scratch)
            (folder / "topo.json").write_text(json.dumps(TOPOLOGY))
            subprocess.run([str(binary), "model", "transformer", "--layers", "7", "--hidden",
                            "512", "--heads", "8", "--kv-heads", "4", "--ffn", "swiglu",
                            "--sequence", "256", "--vocab", "1000", "--sequence-parallel",
                            "--flash-attention", "-o", "model.json"],
                           cwd=folder, check=True, capture_output=True)
            subprocess.run([str(binary), "plan", "model.json", "topo.json", "-o", "plan.json",
                            *options], cwd=folder, check=True, capture_output=True)
            subprocess.run([str(binary), "export", "plan.json", "--format", "megatron",
                            "--model", "model.json", "--topology", "topo.json", "-o",
                            "expected.json"], cwd=folder, check=True, capture_output=True)
            export = json.loads((folder / "expected.json").read_text())
            saw["layout"] |= "*" in str(export.get("pipeline_model_parallel_layout"))
            saw["environment"] |= bool(export["environment"])
            glob_bait(folder, export)
            found = problem(launch(script, folder, binary), export)
            if found:
                failures.append(f"{what}: {found}")
            if export.get("pipeline_model_parallel_layout") and not problem(
                    launch(BROKEN, folder, binary), export):
                failures.append(f"{what}: the broken recipe passed the check, which proves "
                                "nothing")
    for name, seen in saw.items():
        if not seen:
            failures.append(f"no plan exercised the {name}: the test proves nothing there")
    for failure in failures:
        print(f"megatron launch recipe: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
