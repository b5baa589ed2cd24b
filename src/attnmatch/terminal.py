"""User text on a terminal: never markup, never terminal control.

Everything attnmatch prints through rich (tables, warnings, error lines) that comes from a user
(a query, a candidate, a file or folder name, a table's label, an error message quoting any of
these) goes through `shown`: rich markup in it is escaped (``[bold]`` and an unmatched
``[/quote]`` are printed as typed), and the characters that would steer the terminal instead of
being printed (C0 and C1 controls such as ESC, BEL, backspace, carriage return and line breaks,
DEL, and the bidirectional overrides and isolates that reorder a line) are shown as escapes:
``\\x1b``, ``\\x07``, ``\\n``, ``\\u202e``. Output meant for machines (JSON lines, TREC runs,
written files) keeps the text exact instead; ``json.dumps`` escapes control characters itself.

    >>> shown("Paris [citation needed] \\x1b[2J")
    'Paris \\\\[citation needed] \\\\x1b[2J'
"""

from __future__ import annotations

import re

from rich.markup import escape

# C0 controls (tab and line breaks included), DEL, C1 controls, the Arabic letter mark, the
# left-to-right / right-to-left marks, the line and paragraph separators, and the bidirectional
# embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_control(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: object) -> str:
    """`text` with every terminal control character shown as an escape (``\\x1b``, ``\\u202e``),
    for output printed without rich (e.g. a command line to copy)."""
    return _CONTROL.sub(_escape_control, str(text))


def shown(text: object) -> str:
    """`text` ready to print through rich: control characters shown as escapes (`visible`) and
    rich markup escaped, so that the terminal shows exactly what the user typed."""
    return escape(visible(text))
