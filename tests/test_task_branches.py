"""The task has one owner: the package `attnmatch.tasks` (`Task`, one module per kind). Outside
it, no code branches on the task kind, except the data layer's inference of a task from labels
(a kind name read off a label column), file by file with its count.

What another module does per kind is the one allowed idiom: a module-level table keyed by task
class, in the module that uses it, read through `attnmatch.tasks.for_task` (which walks the
task's classes and raises KeyError when none has an entry):

    _RANDOM_OUTPUTS: dict[type[Task], Callable[...]] = {
        RankingTask: _random_orderings, ClassificationTask: _majority_class, ...
    }
    outputs = for_task(_RANDOM_OUTPUTS, task)(task, n, fit_labels)

Every table covers every task class (tested here), so a new kind fails until each table says
what it does. A new branch fails here: ask the task (a member of `Task`, where the kind's
meaning is), add a table, or, in the data layer, raise the count on purpose."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import attnmatch
from attnmatch.tasks import TASKS, Task, for_task

PACKAGE = Path(attnmatch.__file__).resolve().parent
OWNER = "tasks/"

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
        if name.startswith(OWNER):
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


# A table read through `for_task`, and one declared as keyed by task class.
READ = re.compile(r"\bfor_task\(\s*(\w+)\s*,")
DECLARED = re.compile(r"^(\w+): (?:dict|Mapping)\[type\[Task\],", re.MULTILINE)


def _tables() -> dict[str, tuple[set[str], set[str]]]:
    """module -> (the tables `for_task` reads there, the tables declared there)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        read, declared = set(READ.findall(text)), set(DECLARED.findall(text))
        if read or declared:
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = (read, declared)
    return found


def test_every_table_keyed_by_task_class_covers_every_task_class() -> None:
    tables = _tables()
    assert len(tables) >= 6, sorted(tables)  # recipes, distillation, floors, loop, card, records
    for module_name, (read, declared) in tables.items():
        assert declared <= read, f"{module_name}: {declared - read} not read through for_task"
        module = importlib.import_module(module_name)
        for name in read:
            table = getattr(module, name)  # a module-level table, not a local one
            assert all(isinstance(key, type) and issubclass(key, Task) for key in table), name
            for kind in TASKS.values():
                for_task(table, kind)  # KeyError: `name` says nothing of this kind
