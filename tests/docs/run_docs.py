#!/usr/bin/env python3
"""Every documented command is a test: run the runnable blocks of pipeplan's Markdown files.

The docs mark the fenced code blocks a reader can run with the built binary and the examples
(docs/hacking.md, "Documented commands are tests"). The marker is the block's info string,
which GitHub and most renderers do not show; the first word stays the language:

    ```sh run                 a script: its lines run as one bash script (set -e, pipefail)
    ```sh run exit=2          ... which its last command must end with exit code 2 (default 0)
    ```text output            what the script just above printed (standard output and error,
                              as a terminal shows them); only prose may stand between the two
    ```console run            a transcript: each `$ COMMAND` line runs on its own and must
                              print exactly the lines below it, up to the next `$ ` line
    ```console run exit=3     ... and every command of the block must exit with code 3
    ```console run dir=DIR    ... whose prompts name folders of DIR (below)
    ```console norun: WHY     shown but not run, for the reason given (always give one)

A transcript's prompt may name the folder a command runs in, as shells do: `case$ COMMAND`
runs COMMAND in `DIR/case/` (`case/` without `dir=`), and `$ COMMAND` at the root of the
scratch folder. Each command runs in a shell of its own. A command line that ends with `\\`
continues on the next line.

Expected output is compared line by line, trailing blanks of a line and trailing empty lines
ignored. Where the output varies (timings, a scratch path) or is abridged, `…` (U+2026) in an
expected line matches any text within the line, and a line that is just `…` matches any number
of lines.

Each Markdown file runs in a fresh scratch folder holding copies of the repository's
`examples/` (and of `tests/data/` when the file names it), with `pipeplan` (the binary under
test) first on PATH and as `./build/release/pipeplan`. Its blocks run in order, so a block may
use the files an earlier block of the same file wrote.

With `--error-catalogue FILE`, every `pipeplan: error:` line quoted in a fenced block of FILE
must be the expected output of a runnable command or stand in a `norun:` block.

Usage: run_docs.py --pipeplan BUILD/pipeplan [--root REPO] [--error-catalogue FILE] FILE...
Exit 0 when every command behaves as its doc says, 1 otherwise (each failure names the file,
the line and the mismatch), 2 on a bad command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Sequence

WILDCARD = "\u2026"  # …
COPIED = ("examples", "tests/data")  # tests/data only for a file that names it (1,000 files)
SCRIPT_LANGUAGES = ("sh", "bash", "shell")
TRANSCRIPT_LANGUAGES = ("console", "shell-session")
ERROR_PREFIX = "pipeplan: error:"
PROMPT = re.compile(r"^(?P<folder>[A-Za-z0-9_.+/-]*)\$ (?P<command>.*)$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
DEFAULT_TIMEOUT_S = 300.0
SHOWN_OUTPUT_LINES = 12


@dataclasses.dataclass
class Failure:
    """One way a doc and the binary disagree, at a line of a Markdown file."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclasses.dataclass
class Fence:
    """A fenced code block: its info string and its content lines with their line numbers."""

    line: int  # 1-based line of the opening fence
    info: str
    lines: list[tuple[int, str]]

    @property
    def language(self) -> str:
        words = self.info.split()
        return words[0] if words and not is_marker_word(words[0]) else ""


@dataclasses.dataclass
class Marker:
    """What a block's info string asks of the harness."""

    run: bool = False
    output: bool = False
    norun_reason: Optional[str] = None
    exit_code: int = 0
    folders: str = ""  # dir=: where the folders of prompts are


@dataclasses.dataclass
class Command:
    """One command of a block, what it must print and how it must end."""

    line: int  # the doc line of the command (its first line)
    text: str
    folder: str  # relative to the scratch root
    exit_code: int
    expected: Optional[list[tuple[int, str]]]  # None: output not checked


@dataclasses.dataclass
class Report:
    """What running one file found."""

    commands: int = 0
    failures: list[Failure] = dataclasses.field(default_factory=list)


def parse_fences(text: str) -> list[Fence]:
    """The fenced code blocks of a CommonMark document (an unclosed one runs to the end)."""
    fences: list[Fence] = []
    open_fence: Optional[tuple[Fence, str, int]] = None  # fence, its marker, its indent
    for number, line in enumerate(text.split("\n"), start=1):
        if open_fence is None:
            match = FENCE.match(line)
            if match and not (match["fence"][0] == "`" and "`" in match["info"]):
                fence = Fence(number, match["info"].strip(), [])
                open_fence = (fence, match["fence"], len(match["indent"]))
            continue
        fence, marker, indent = open_fence
        stripped = line.strip()
        if (stripped.startswith(marker[0] * len(marker)) and set(stripped) == {marker[0]}
                and len(line) - len(line.lstrip(" ")) <= 3):
            fences.append(fence)
            open_fence = None
            continue
        removable = min(indent, len(line) - len(line.lstrip(" ")))
        fence.lines.append((number, line[removable:]))
    if open_fence is not None:
        fences.append(open_fence[0])
    return fences


MARKER_KEYS = ("exit", "dir")
MARKER_WORDS = ("run", "output", "norun")


def is_marker_word(word: str) -> bool:
    """Whether a word of an info string belongs to the marker (and is not the language)."""
    return (word in MARKER_WORDS or word.startswith("norun:")
            or word.partition("=")[0] in MARKER_KEYS + MARKER_WORDS)


def parse_marker(fence: Fence) -> tuple[Marker, list[str]]:
    """The marker of a block's info string, and what is wrong with it (empty when nothing)."""
    marker = Marker()
    problems: list[str] = []
    info = fence.info
    norun = re.search(r"(^|\s)norun:", info)
    if norun:
        marker.norun_reason = info[norun.end():].strip()
        if not marker.norun_reason:
            problems.append("`norun:` needs a reason after it")
        info = info[:norun.start()]
    words = info.split()
    if words and not is_marker_word(words[0]):
        words = words[1:]  # the language
    for word in words:
        key, equals, value = word.partition("=")
        if word == "run":
            marker.run = True
        elif word == "output":
            marker.output = True
        elif key == "exit" and equals:
            if re.fullmatch(r"[0-9]{1,3}", value) and int(value) <= 255:
                marker.exit_code = int(value)
            else:
                problems.append(f"exit={value}: an exit code is an integer from 0 to 255")
        elif key == "dir" and equals:
            if not value or value.startswith("/") or ".." in Path(value).parts:
                problems.append(f"dir={value}: give a folder inside the scratch folder")
            marker.folders = value
        else:
            problems.append(f"unknown marker {word!r} (known: run, output, exit=N, dir=DIR, "
                            "norun: REASON)")
    marked = marker.run or marker.output or marker.norun_reason is not None
    if not marked and (marker.exit_code != 0 or marker.folders):
        problems.append("exit= and dir= apply only to a block marked `run`")
    if sum([marker.run, marker.output, marker.norun_reason is not None]) > 1:
        problems.append("a block is `run`, `output` or `norun:`, not several")
    if marker.output and marker.exit_code != 0:
        problems.append("an `output` block takes no exit= (give it to the script above)")
    if marker.folders and fence.language not in TRANSCRIPT_LANGUAGES:
        problems.append("dir= names the folders of a transcript's prompts; a script cds itself")
    if marker.run and fence.language not in SCRIPT_LANGUAGES + TRANSCRIPT_LANGUAGES:
        problems.append(f"a runnable block is a script ({', '.join(SCRIPT_LANGUAGES)}) or a "
                        f"transcript ({', '.join(TRANSCRIPT_LANGUAGES)}), not "
                        f"{fence.language or 'a block without a language'!r}")
    return marker, problems


def script_command_lines(lines: Sequence[tuple[int, str]]) -> list[int]:
    """The doc lines on which a script block's commands start (not blank lines, comments or
    continuations)."""
    starts = []
    continued = False
    for number, line in lines:
        stripped = line.strip()
        if not continued and stripped and not stripped.startswith("#"):
            starts.append(number)
        continued = stripped.endswith("\\")
    return starts


def transcript_commands(path: str, fence: Fence,
                        marker: Marker) -> tuple[list[Command], list[Failure]]:
    """The commands of a transcript block, each with the lines it must print."""
    commands: list[Command] = []
    failures: list[Failure] = []
    lines = fence.lines
    index = 0
    while index < len(lines):
        number, line = lines[index]
        prompt = PROMPT.match(line)
        if prompt is None:
            if line.strip():
                failures.append(Failure(path, number, "a transcript's output comes after a "
                                        "`$ COMMAND` line; this line has no command above it"))
            index += 1
            continue
        text = prompt["command"]
        index += 1
        while text.endswith("\\") and index < len(lines):
            text += "\n" + lines[index][1]
            index += 1
        expected: list[tuple[int, str]] = []
        while index < len(lines) and PROMPT.match(lines[index][1]) is None:
            expected.append(lines[index])
            index += 1
        folder = ""
        if prompt["folder"]:
            folder = os.path.normpath(os.path.join(marker.folders, prompt["folder"]))
            if folder.startswith(".."):
                failures.append(Failure(path, number, f"the prompt's folder {folder} is outside "
                                        "the scratch folder"))
        commands.append(Command(number, text, folder, marker.exit_code, expected))
    if not commands:
        failures.append(Failure(path, fence.line, "a transcript marked `run` has no `$ COMMAND`"))
    return commands, failures


def line_pattern(line: str) -> str:
    """A regular expression for one expected line, `…` matching any text within it."""
    return "[^\n]*?".join(re.escape(piece) for piece in line.split(WILDCARD))


def normalise(lines: Sequence[str]) -> list[str]:
    """Lines without trailing blanks, without trailing empty lines."""
    result = [line.rstrip() for line in lines]
    while result and not result[-1]:
        result.pop()
    return result


def output_matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether `actual` is what `expected` quotes, with its wildcards."""
    pattern = "".join("(?:[^\n]*\n)*?" if line == WILDCARD else line_pattern(line) + "\n"
                      for line in normalise(expected))
    text = "".join(line + "\n" for line in normalise(actual))
    return re.fullmatch(pattern, text) is not None


def first_difference(expected: Sequence[str],
                     actual: Sequence[str]) -> tuple[int, Optional[str], bool]:
    """Where a mismatch shows first, for the message: the index of the first expected line that
    does not match (len(expected) when the command printed more), the line printed there (None
    when there is none) and whether a `…` line before it found no line like it. A `…` line
    skips to the first line that matches the line after it."""
    expected = normalise(expected)
    actual = normalise(actual)
    position = 0
    index = 0
    while index < len(expected):
        line = expected[index]
        if line == WILDCARD:
            if index + 1 == len(expected):
                return len(expected), None, False  # matches: cannot be the difference
            following = re.compile(line_pattern(expected[index + 1]))
            while position < len(actual) and not following.fullmatch(actual[position]):
                position += 1
            if position == len(actual):
                return index + 1, None, True
            index += 1
            continue
        if position >= len(actual):
            return index, None, False
        if not re.fullmatch(line_pattern(line), actual[position]):
            return index, actual[position], False
        position += 1
        index += 1
    return len(expected), actual[position] if position < len(actual) else None, False


def shown(output: str) -> str:
    """The last lines of a command's output, indented, for a failure message."""
    lines = normalise(output.split("\n"))
    if not lines:
        return "\n    (no output)"
    if len(lines) > SHOWN_OUTPUT_LINES:
        lines = ["..."] + lines[-SHOWN_OUTPUT_LINES:]
    return "".join("\n    | " + line for line in lines)


class Scratch:
    """A scratch folder for one Markdown file: copies of the repository's inputs, the binary
    under test first on PATH and at ./build/release/pipeplan."""

    def __init__(self, root: Path, binary: Path, timeout_s: float, copied: Sequence[str]) -> None:
        self.timeout_s = timeout_s
        self.base = Path(tempfile.mkdtemp(prefix="pipeplan-docs-"))
        self.work = self.base / "work"
        self.work.mkdir()
        for relative in copied:
            if (root / relative).is_dir():
                shutil.copytree(root / relative, self.work / relative, symlinks=True)
        bin_dir = self.base / "bin"
        bin_dir.mkdir()
        (bin_dir / "pipeplan").symlink_to(binary)
        (self.work / "build" / "release").mkdir(parents=True)
        (self.work / "build" / "release" / "pipeplan").symlink_to(binary)
        self.failed_line = self.base / "failed-line"
        self.env = dict(os.environ)
        self.env["PATH"] = f"{bin_dir}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PIPEPLAN_DOCS_FAILED_LINE"] = str(self.failed_line)

    def close(self) -> None:
        """Remove the folder and everything the commands wrote."""
        shutil.rmtree(self.base, ignore_errors=True)

    def run(self, script: str, folder: str) -> tuple[Optional[int], str]:
        """Run bash on `script` in `folder`: the exit code (None on a timeout) and the output
        (standard output and error together, as a terminal shows them)."""
        cwd = self.work / folder
        if not cwd.is_dir():
            return 127, f"run_docs.py: no folder {folder} in the scratch folder"
        try:
            done = subprocess.run(["bash", "-c", script], cwd=cwd, env=self.env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=self.timeout_s)
        except subprocess.TimeoutExpired as expired:
            output = expired.output or b""
            return None, output.decode("utf-8", "backslashreplace")
        return done.returncode, done.stdout.decode("utf-8", "backslashreplace")


def check_output(path: str, command: Command, output: str) -> list[Failure]:
    """Compare what a command printed with what its doc quotes."""
    if command.expected is None:
        return []
    expected = [line for _, line in command.expected]
    actual = output.split("\n")
    if output_matches(expected, actual):
        return []
    index, got, skipped = first_difference(expected, actual)
    if index < len(command.expected):
        line, quoted = command.expected[index]
        printed = (" no line like it" if skipped else " nothing more" if got is None
                   else f":\n    {got}")
        what = f"the doc quotes\n    {quoted}\n  but the command printed{printed}"
    else:
        line = command.expected[-1][0] if command.expected else command.line
        what = f"the command printed a line the doc does not quote:\n    {got}"
    where = f", in {command.folder}/" if command.folder else ""
    return [Failure(path, line, f"`{first_line(command.text)}` (line {command.line}{where}): "
                    f"{what}\n  its whole output:{shown(output)}")]


def first_line(text: str) -> str:
    """A command's first line, for messages."""
    head = text.split("\n")[0]
    return head + " ..." if "\n" in text else head


def run_command(path: str, command: Command, scratch: Scratch) -> list[Failure]:
    """Run one transcript command and check its exit code and output."""
    code, output = scratch.run("set -o pipefail\n" + command.text, command.folder)
    where = f" (in {command.folder}/)" if command.folder else ""
    if code is None:
        return [Failure(path, command.line, f"`{first_line(command.text)}`{where} did not end "
                        f"within {scratch.timeout_s:g} s{shown(output)}")]
    if code != command.exit_code:
        return [Failure(path, command.line, f"`{first_line(command.text)}`{where} exited with "
                        f"{code}, but the doc says {command.exit_code}{shown(output)}")]
    return check_output(path, command, output)


def run_script(path: str, fence: Fence, marker: Marker, expected: Optional[Fence],
               scratch: Scratch) -> list[Failure]:
    """Run a script block and check its exit code and, when the doc quotes it, its output."""
    header = ['set -eo pipefail',
              'trap \'echo "$LINENO" > "$PIPEPLAN_DOCS_FAILED_LINE"\' ERR']
    body = [line for _, line in fence.lines]
    scratch.failed_line.unlink(missing_ok=True)
    code, output = scratch.run("\n".join(header + body) + "\n", "")
    first = fence.lines[0][0] if fence.lines else fence.line
    if code is None:
        return [Failure(path, first, f"the block did not end within {scratch.timeout_s:g} s"
                        f"{shown(output)}")]
    failed = first
    if code != 0 and scratch.failed_line.exists():
        text = scratch.failed_line.read_text().strip()
        if text.isdigit() and 0 < int(text) - len(header) <= len(fence.lines):
            failed = fence.lines[int(text) - len(header) - 1][0]
    command = next((text.strip() for number, text in fence.lines if number == failed), "")
    if code != marker.exit_code:
        return [Failure(path, failed, f"`{command}` exited with {code}, but the doc says the "
                        f"block ends with exit code {marker.exit_code}{shown(output)}")]
    starts = script_command_lines(fence.lines)
    if code != 0 and starts and failed < starts[-1]:
        return [Failure(path, failed, f"`{command}` exited with {code} and stopped the block "
                        f"before its last command (line {starts[-1]}){shown(output)}")]
    if expected is None:
        return []
    command = Command(first, "\n".join(body).strip(), "", marker.exit_code, expected.lines)
    return check_output(path, command, output)


def blocks(path: str, fences: Sequence[Fence]) -> Iterator[tuple[Fence, Marker, Optional[Fence],
                                                                 list[Failure]]]:
    """The marked blocks of a file in order: each with its marker, the `output` block that
    follows a script, and what is wrong with the markers."""
    pending: Optional[tuple[Fence, Marker, list[Failure]]] = None
    for fence in fences:
        marker, problems = parse_marker(fence)
        failures = [Failure(path, fence.line, problem) for problem in problems]
        if marker.output:
            if pending is None or pending[0].language not in SCRIPT_LANGUAGES:
                failures.append(Failure(path, fence.line, "an `output` block follows the script "
                                        "block (```sh run) whose output it quotes, with only "
                                        "prose between them"))
                yield fence, marker, None, failures
            else:
                yield pending[0], pending[1], fence, pending[2] + failures
                pending = None
            continue
        if pending is not None:
            yield pending[0], pending[1], None, pending[2]
            pending = None
        if marker.run and fence.language in SCRIPT_LANGUAGES:
            pending = (fence, marker, failures)
        elif marker.run or marker.norun_reason is not None or failures:
            yield fence, marker, None, failures
    if pending is not None:
        yield pending[0], pending[1], None, pending[2]


def catalogue_failures(path: str, fences: Sequence[Fence]) -> list[Failure]:
    """Every `pipeplan: error:` line a catalogue quotes must be run or marked `norun:`."""
    failures = []
    for fence in fences:
        marker, _ = parse_marker(fence)
        if marker.norun_reason is not None:
            continue
        transcript = marker.run and fence.language in TRANSCRIPT_LANGUAGES
        for number, line in fence.lines:
            if ERROR_PREFIX not in line:
                continue
            if transcript and PROMPT.match(line) is None:
                continue
            if marker.output:
                continue
            failures.append(Failure(path, number, "this error message is quoted without the "
                                    "command that prints it: show the command in a ```console "
                                    "run transcript, or mark the block ```console norun: WHY"))
    return failures


def check_file(path: Path, root: Path, binary: Path, catalogue: bool = False,
               timeout_s: float = DEFAULT_TIMEOUT_S, shown_path: Optional[str] = None) -> Report:
    """Run every runnable block of one Markdown file in a scratch folder of its own."""
    name = shown_path or str(path)
    text = path.read_text(encoding="utf-8")
    fences = parse_fences(text)
    copied = [relative for relative in COPIED if relative == COPIED[0] or relative in text]
    report = Report()
    if catalogue:
        report.failures += catalogue_failures(name, fences)
    scratch: Optional[Scratch] = None
    try:
        for fence, marker, expected, failures in blocks(name, fences):
            report.failures += failures
            if failures or not marker.run:
                continue
            if scratch is None:
                scratch = Scratch(root, binary, timeout_s, copied)
            if fence.language in SCRIPT_LANGUAGES:
                report.commands += len(script_command_lines(fence.lines))
                report.failures += run_script(name, fence, marker, expected, scratch)
                continue
            commands, problems = transcript_commands(name, fence, marker)
            report.failures += problems
            for command in commands:
                report.commands += 1
                report.failures += run_command(name, command, scratch)
    finally:
        if scratch is not None:
            scratch.close()
    return report


def plural(count: int, noun: str) -> str:
    """`1 file`, `2 files`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: check the files, print every failure, exit 1 when there is one."""
    parser = argparse.ArgumentParser(
        description="Run the commands that Markdown files mark runnable and check that they "
                    "behave as the files say (docs/hacking.md).")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="Markdown files")
    parser.add_argument("--pipeplan", required=True, type=Path, help="the binary under test")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the repository, whose examples/ and tests/data/ the commands "
                             "use (default: this checkout)")
    parser.add_argument("--error-catalogue", type=Path, action="append", default=[],
                        metavar="FILE", help="a file whose quoted `pipeplan: error:` lines "
                                             "must all be run or marked norun:")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds a block or command may take (default {DEFAULT_TIMEOUT_S:g})")
    args = parser.parse_args(argv)
    binary = args.pipeplan.resolve()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        parser.error(f"--pipeplan {args.pipeplan}: not an executable file")
    catalogues = {path.resolve() for path in args.error_catalogue}
    missing = [str(path) for path in list(args.files) + args.error_catalogue if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    root = args.root.resolve()
    failures: list[Failure] = []
    total = 0
    for path in args.files:
        try:
            shown_path = str(path.resolve().relative_to(root))
        except ValueError:
            shown_path = str(path)
        report = check_file(path, root, binary, path.resolve() in catalogues, args.timeout,
                            shown_path)
        total += report.commands
        failures += report.failures
        status = "ok" if not report.failures else f"{len(report.failures)} failed"
        print(f"{shown_path}: {plural(report.commands, 'command')}, {status}", flush=True)
    for failure in sorted(failures, key=lambda failure: (failure.path, failure.line)):
        print(failure)
    print(f"{plural(total, 'documented command')} in {plural(len(args.files), 'file')}: "
          + (plural(len(failures), "failure") if failures else "all behave as documented"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
