"""The task has one owner: `attnmatch.tasks`. Outside it, no code branches on the task kind,
except the data layer's inference of a task from labels (a kind name read off a label column),
file by file with its count. A new branch fails here: ask the task instead (a method of
`Task`), or, in the data layer, raise the count on purpose."""

from __future__ import annotations

import re
from pathlib import Path

import attnmatch

PACKAGE = Path(attnmatch.__file__).resolve().parent
OWNER = "tasks.py"

KINDS = r"""["'](?:ranking|classification|regression)["']"""
BRANCH = re.compile(
    "|".join(
        [
            rf"(?:==|!=|\bin\b|\bnot\s+in\b)\s*\(?\s*{KINDS}",  # x == "ranking", x in ("ranking", ...)
            rf"{KINDS}\s*(?:==|!=)",  # "ranking" == x
            r"isinstance\([^)]*(?:Task|Protocol)\b",  # a type test on a task (or a protocol)
            r"\btask\w*\.kind\s*(?:==|!=|\bin\b|\bnot\s+in\b)",  # task.kind == ...
            r"\.task\s*(?:==|!=)",  # split.task == ...
            r"^\s*match\s+[\w.]*task\b",  # match task: ...
        ]
    )
)

# The data layer's inference of a task from labels: a label scheme's kind name (labels.py), the
# pairs folder read as that kind (pairs.py), a dev split held out of train (datasets/__init__.py).
ALLOWED = {
    "data/labels.py": 7,
    "data/datasets/pairs.py": 2,
    "data/datasets/__init__.py": 3,
}


def _branches() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == OWNER:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if BRANCH.search(code):
                found.setdefault(name, []).append(f"{name}:{number}: {line.strip()}")
    return found


def test_the_pattern_finds_the_forms_of_a_branch() -> None:
    for line in (
        'if task.kind == "ranking":',
        'if self.task != "classification":',
        'ok = kind in ("ranking", "regression")',
        "if isinstance(protocol, RankingTask):",
        "if isinstance(protocol, RankingProtocol):",
        "if train.task == dev.task:",
        "    match task.kind:",
        '"regression" == kind',
    ):
        assert BRANCH.search(line), line
    for line in (
        'raise ValueError(f"a {task.kind} model cannot be evaluated")',
        'if inputs.kind == "word_vectors":',
        "task = Task.of(protocol)",
    ):
        assert not BRANCH.search(line), line


def test_only_the_data_layer_branches_on_the_task_kind() -> None:
    found = _branches()
    counts = {name: len(lines) for name, lines in found.items()}
    unexpected = [line for name, lines in found.items() if name not in ALLOWED for line in lines]
    assert not unexpected, "branches on the task kind outside attnmatch.tasks:\n" + "\n".join(
        unexpected
    )
    for name, allowed in ALLOWED.items():
        lines = "\n".join(found.get(name, []))
        assert counts.get(name, 0) == allowed, (
            f"{name}: {counts.get(name, 0)} branches on the task kind, {allowed} allowed "
            f"(fewer: lower ALLOWED; more: ask the task instead):\n{lines}"
        )
