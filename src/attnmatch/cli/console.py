"""Output of the command line: stdout and stderr consoles whose closed pipe ends the command
quietly (`main`), one-line warnings and errors, and tables of metrics."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console

from attnmatch.terminal import shown


class PipeClosed(Exception):
    """The reader of our output went away (`attnmatch rank ... | head -1`). Not an OSError, so
    that it reaches `main` (which exits quietly with status 0): typer turns a BrokenPipeError
    into exit status 1, which here means a failed verification."""


class PipeGuard:
    """A stand-in for sys.stdout while a command runs: a closed pipe raises `PipeClosed`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise PipeClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise PipeClosed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Console(Console):
    """A rich console whose closed pipe reaches `main` (see `PipeClosed`)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise PipeClosed


# emoji=False: ":smile:" in user text stays ":smile:".
out = _Console(emoji=False)


err = _Console(stderr=True, emoji=False)


def print_metrics(
    splits: dict[str, dict[str, float] | None], title: str, paper: dict[str, float] | None = None
) -> None:
    from rich.table import Table

    # Splits may differ in their per-group metrics (SemEval: dev 2012 sets, test 2015 sets).
    names: list[str] = []
    for metrics in splits.values():
        names += [m for m in metrics or {} if m != "num_queries" and m not in names]
    table = Table(title=shown(title))
    table.add_column("split")
    for m in names:
        table.add_column(shown(m), justify="right")
    for split, metrics in splits.items():
        if metrics:
            cells = (format_number(metrics[m]) if m in metrics else "—" for m in names)
            table.add_row(shown(split), *cells)
    if paper:
        table.add_row("paper", *(format_number(paper[m]) if m in paper else "—" for m in names))
    out.print(table)


def format_number(value: Any) -> str:
    """A metric in a table: four decimals; "n/a" when it is not a finite number (undefined,
    e.g. the Pearson of constant predictions)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    return f"{value:.4f}"


def print_warning(message: str) -> None:
    """`warning: MESSAGE` on stderr, on one line, user text shown verbatim."""
    line = " ".join(message.split())
    err.print(f"[yellow]warning:[/yellow] {shown(line)}", highlight=False, soft_wrap=True)


def print_error(message: str) -> None:
    """`error: MESSAGE` on one line: markup and control characters shown, never wrapped."""
    line = " ".join(str(message).split())
    try:
        err.print(f"[bold red]error:[/bold red] {shown(line)}", highlight=False, soft_wrap=True)
    except (PipeClosed, BrokenPipeError):  # stderr is gone too
        pass
