"""Hostile inputs to provenance: a run reads the commit of the package's own checkout, never the
git repository of the folder it is started from (whose `.git/config` may run commands)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from attnmatch.training import run_dir
from attnmatch.training.config import load_experiment
from attnmatch.training.trainer import train
from tests.hostile.test_runs import CONFIG


def _hostile_repository(folder: Path, marker: Path) -> None:
    """A git repository whose config and hooks run a command that writes `marker`."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "tracked.txt").write_text("x\n")
    command = f"touch {marker}"
    config = folder / ".git" / "config"
    config.write_text(
        config.read_text()
        + f'[core]\n\tfsmonitor = "{command}"\n\thooksPath = hooks\n'
        + f'[filter "evil"]\n\tclean = "{command}"\n\tsmudge = "{command}"\n'
    )
    (folder / ".gitattributes").write_text("* filter=evil\n")
    hooks = folder / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "pre-commit"):
        (hooks / name).write_text(f"#!/bin/sh\n{command}\n")
        (hooks / name).chmod(0o755)


@pytest.mark.parametrize("case", ["c8-git-config-of-the-current-folder"], ids=str)
def test_a_run_never_executes_the_current_folders_git_config(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, marker = tmp_path / "user", tmp_path / "ran"
    _hostile_repository(folder, marker)
    # The repository's own command does run under git (so the case is live) ...
    subprocess.run(["git", "-C", str(folder), "status"], capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()
    # ... but neither the provenance reading nor a whole training run started there runs it.
    monkeypatch.chdir(folder)
    expected = run_dir.source_commit()
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    result = train(load_experiment(config), tmp_path / "run", progress=False)
    assert not marker.exists()
    assert result.commit == expected
    # The commit is the package's own checkout's (or "unknown" where it is installed).
    root = run_dir.package_repository()
    assert (expected == "unknown") == (root is None)
    assert root is None or not root.is_relative_to(folder)


@pytest.mark.parametrize("case", ["c8-package-outside-a-checkout"], ids=str)
def test_outside_a_checkout_the_commit_is_unknown(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_dir, "package_repository", lambda: None)
    assert run_dir.source_commit() == "unknown"
    run_dir.process_commit.cache_clear()
    try:
        assert run_dir.environment()["commit"] == "unknown"
    finally:
        run_dir.process_commit.cache_clear()


@pytest.mark.parametrize("case", ["c8-checkout-edited-during-a-long-command"], ids=str)
def test_every_run_of_a_process_records_the_commit_it_started_with(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long command (seeds x weights, table rows) runs the code it imported: an edit of the
    checkout while it trains must not mark its later runs with another commit."""
    readings = iter(["abc1234", "abc1234-dirty", "def5678"])
    monkeypatch.setattr(run_dir, "source_commit", lambda: next(readings))
    run_dir.process_commit.cache_clear()
    try:
        first = run_dir.environment()["commit"]
        later = [run_dir.environment()["commit"] for _ in range(2)]
    finally:
        run_dir.process_commit.cache_clear()
    assert first == "abc1234" and later == ["abc1234", "abc1234"]


@pytest.mark.parametrize("case", ["c3-reproduce-on-a-dirty-checkout"], ids=str)
def test_reproduce_says_loudly_that_the_checkout_is_dirty(case: str) -> None:
    from rich.console import Console

    from attnmatch.research.reproduce import say_if_dirty

    console = Console(record=True, width=200)
    say_if_dirty("abc1234-dirty", console)
    text = console.export_text()
    assert (
        text.startswith("warning: the code differs from commit abc1234") and "abc1234-dirty" in text
    )
    quiet = Console(record=True, width=200)
    say_if_dirty("abc1234", quiet)
    assert quiet.export_text() == ""
