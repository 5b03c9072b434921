"""Runs the examples in README.md and docs/ as tests (collected by the repository's conftest.py).

The rules a doc writer needs (docs/design/docs.md explains them for maintainers):

- A ```` ```python ```` block runs; the blocks of one page share one namespace, in page order.
  When the next fenced block is ```` ```text ```` with only blank lines between, the code's
  stdout must match it.
- A ```` ```bash ```` block runs as one ``bash -euo pipefail`` script; its output is not checked.
- A ```` ```console ```` block is a transcript: each ``$ command`` runs and its stdout and stderr
  must match the lines that follow it.
- Fenced blocks with any other or no language (tables, benchmark prints) are shown, not run.
- ``<!-- skip: next "why" -->`` skips the next example; the reason is visible in the source.

Every page runs in its own temporary directory that holds links to the repository's top-level
entries, so commands work as a user types them at the repository root while the files an example
writes (``run.rec``, ``result.json``) land in the temporary directory. The virtual environment's
``bin`` comes first on ``PATH``, so ``rlmesh-gym`` and ``.venv/bin/python`` are this interpreter's.

Output comparison ignores what legitimately varies between runs: episode ids (UUIDs), the values
on speed lines (``env-steps/s``, ``per vector step``, ...) and trailing blanks.

A block that names a fixed local port (``127.0.0.1:50051``) runs holding a machine-wide lock on
that port (a file under the temporary directory), so the servers of two blocks never meet: not
on two pytest-xdist workers, not in two checkouts' suites running at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

REPO = Path(__file__).resolve().parent.parent
COMMAND_TIMEOUT = 540.0  # seconds per bash block or console command
EXAMPLE_TIMEOUT = 600.0  # pytest-timeout for one example (a page's training run is the longest)

# Summary lines whose values are measurements: only the label is compared.
VARYING_LINE_LABELS = ("env-steps/s", "env-steps", "per vector step", "resets")
_FIXED_LOCAL_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\]):([1-9][0-9]*)")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_VARYING_LINE = re.compile(
    r"^(\s*(?:" + "|".join(re.escape(label) for label in VARYING_LINE_LABELS) + r"))\s.*$"
)


def normalize_output(text: str) -> str:
    """The text with run-to-run variation removed (see the module docstring)."""
    lines = []
    for line in text.strip("\n").splitlines():
        line = _UUID.sub("<uuid>", line.rstrip())
        lines.append(_VARYING_LINE.sub(r"\1 <varies>", line))
    return "\n".join(lines)


def _check_output(expected: str, actual: str, what: str) -> str | None:
    want, got = normalize_output(expected), normalize_output(actual)
    if want == got:
        return None
    return f"{what}: the output differs from the one the page shows.\n--- page\n{want}\n--- actual\n{got}"


def fixed_ports(text: str) -> set[int]:
    """The fixed local ports ``text`` names (``127.0.0.1:0``, any free port, is not one)."""
    return {int(port) for port in _FIXED_LOCAL_PORT.findall(text)}


@contextlib.contextmanager
def _holding_ports(ports: Iterable[int]) -> Iterator[None]:
    """Hold the machine-wide lock of each port (in port order, so two holders never deadlock)."""
    with contextlib.ExitStack() as locks:
        for port in sorted(ports):
            path = Path(tempfile.gettempdir()) / f"rlmesh-gym-port-{port}.lock"
            lock = locks.enter_context(open(path, "a"))
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


@dataclass(frozen=True)
class _Block:
    language: str
    source: str
    start: int
    end: int


def _fenced_blocks(document: Document) -> list[_Block]:
    lexer = FencedCodeBlockLexer(language=r"[^\n]*", mapping={"language": "language", "source": "source"})
    return [
        _Block(region.lexemes["language"].strip(), str(region.lexemes["source"]), region.start, region.end)
        for region in lexer(document)
    ]


class _Page:
    """One page's run: its temporary working directory and the environment its commands see."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="rlmesh-gym-docs-"))
        for entry in REPO.iterdir():
            if entry.name not in {".git"}:
                (self.directory / entry.name).symlink_to(entry)
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.pop("RLMESH_GYM_TOKEN", None)

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        """Runs a bash script in the page's directory; background jobs it leaves are stopped."""
        # Output goes to a file, not a pipe: a background server that outlives the script would
        # hold a pipe open and block the read.
        with _holding_ports(fixed_ports(script)), tempfile.TemporaryFile(mode="w+") as output:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=self.directory,
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            try:
                process.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
            output.seek(0)
            text = output.read()
        if returncode == -signal.SIGKILL:
            text += f"\n[stopped after {COMMAND_TIMEOUT:g} s]"
        return subprocess.CompletedProcess(process.args, returncode, text, "")

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _page(example: Example) -> _Page:
    return example.namespace["__doc_page__"]


def _python_evaluator(expected_output: str | None):
    def evaluate(example: Example) -> str | None:
        __tracebackhide__ = True
        page = _page(example)
        code = compile("\n" * example.line + example.parsed, example.path, "exec", dont_inherit=True)
        stdout = io.StringIO()
        previous = Path.cwd()
        os.chdir(page.directory)
        try:
            with contextlib.redirect_stdout(stdout):
                exec(code, example.namespace)
        finally:
            os.chdir(previous)
        if expected_output is None:
            return None
        return _check_output(expected_output, stdout.getvalue(), f"python example at line {example.line}")

    return evaluate


def _bash_evaluator(example: Example) -> str | None:
    result = _page(example).shell(example.parsed)
    if result.returncode != 0:
        return (
            f"bash example at line {example.line} exited with {result.returncode}.\n"
            f"--- output\n{result.stdout}"
        )
    return None


def _console_commands(transcript: str) -> Iterator[tuple[str, str]]:
    """(command, expected output) pairs of a ``$ command`` transcript."""
    command: str | None = None
    expected: list[str] = []
    for line in transcript.splitlines():
        if line.startswith("$ "):
            if command is not None:
                yield command, "\n".join(expected)
            command, expected = line[2:], []
        elif command is None:
            if line.strip():
                raise ValueError(f"console block: output line {line!r} before any '$ ' command")
        else:
            expected.append(line)
    if command is not None:
        yield command, "\n".join(expected)


def _console_evaluator(example: Example) -> str | None:
    page = _page(example)
    for command, expected in _console_commands(example.parsed):
        result = page.shell(command)
        problem = _check_output(
            expected, result.stdout, f"console example at line {example.line}: $ {command}"
        )
        if problem is not None:
            return problem
    return None


class ExampleParser:
    """Finds the runnable fenced blocks of a page (see the module docstring for the rules)."""

    def __call__(self, document: Document) -> Iterable[Region]:
        blocks = _fenced_blocks(document)
        for index, block in enumerate(blocks):
            if block.language == "python":
                following = blocks[index + 1] if index + 1 < len(blocks) else None
                expected = None
                if (
                    following is not None
                    and following.language == "text"
                    and not document.text[block.end : following.start].strip()
                ):
                    expected = following.source
                yield Region(block.start, block.end, block.source, _python_evaluator(expected))
            elif block.language == "bash":
                yield Region(block.start, block.end, block.source, _bash_evaluator)
            elif block.language == "console":
                list(_console_commands(block.source))  # a malformed transcript fails at collection
                yield Region(block.start, block.end, block.source, _console_evaluator)


def runs_processes(example: Example) -> bool:
    """Whether the example runs shell commands (real processes: the CLI, servers, scripts)."""
    return example.region.evaluator in (_bash_evaluator, _console_evaluator)


def _set_up_page(namespace: dict[str, Any]) -> None:
    namespace["__doc_page__"] = _Page()
    namespace["__name__"] = "__doc_example__"


def _tear_down_page(namespace: dict[str, Any]) -> None:
    namespace["__doc_page__"].close()


def doc_examples(
    patterns: Iterable[str] = ("README.md", "docs/*.md", "docs/**/*.md"), path: str = "."
) -> Sybil:
    """The Sybil collector for the examples of the given pages (paths relative to ``path``)."""
    return Sybil(
        parsers=[ExampleParser(), SkipParser()],
        patterns=list(patterns),
        path=str(Path(path).resolve()),
        setup=_set_up_page,
        teardown=_tear_down_page,
    )
