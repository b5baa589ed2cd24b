"""Shared checks of the hostile-input battery.

Every case of the battery is one pytest item whose id starts with its class, ``c1`` to ``c8``
(the classes in docs/robustness.md), so that ``pytest --collect-only -q tests/hostile`` counts
the cases per class. A case ends either in a correct result (checked by the case) or in a clear
error: for the command line, exit status 2 (1 for a failed verification), nothing on stdout
that looks like a result, and one line on stderr that starts with ``error:``, names what is
wrong (file, line, field or option) and holds no traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from attnmatch import cli


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_cli(args: Sequence[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    """Runs ``attnmatch ARGS`` in this process through the real entry point (`cli.main`, the
    error boundary included) and returns its exit status and output."""
    capsys.readouterr()  # drop what came before
    argv = sys.argv
    sys.argv = ["attnmatch", *map(str, args)]
    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def assert_clear_error(outcome: Outcome, *needles: str, code: int = 2) -> str:
    """Checks that `outcome` is one clear error line that contains every one of `needles`
    (case-insensitive), and returns that line."""
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.code == code, (outcome.code, outcome.stderr, outcome.stdout)
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, outcome.stderr
    line = errors[0]
    assert not line.endswith("error:"), line
    for needle in needles:
        assert needle.lower() in line.lower(), (needle, line)
    return line


def assert_clear_exception(error: BaseException, *needles: str) -> str:
    """Checks that a library error (as the Python API raises it) is a single-line message that
    contains every one of `needles` (case-insensitive)."""
    message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    assert message and "\n" not in message.strip(), message
    for needle in needles:
        assert needle.lower() in message.lower(), (needle, message)
    return message
