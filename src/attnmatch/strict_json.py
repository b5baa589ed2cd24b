"""Strict JSON files: read with one error that names the file, written without NaN.

`read_json` refuses, in one line naming the file, a file that cannot be read, is not UTF-8 (a
leading byte order mark is accepted), is not strict JSON (`NaN` and `Infinity` included), or
nests lists and objects deeper than `MAX_JSON_DEPTH`. `dumps_json` writes JSON that any parser
reads: a float that is not finite (an undefined Pearson) becomes null, never the `NaN` /
`Infinity` tokens that strict parsers reject.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 100


class _NonFinite(ValueError):
    """`NaN`, `Infinity` or `-Infinity` in a file read strictly."""


def _refuse_constant(token: str) -> Any:
    raise _NonFinite(token)


def read_json(file: Path) -> Any:
    """The JSON value of `file`, read strictly: one error naming the file for a file that
    cannot be read, is not UTF-8 (a leading byte order mark is accepted), is not JSON (or holds
    NaN / Infinity), or
    nests lists and objects deeper than `MAX_JSON_DEPTH`.

    Raises:
        OSError: the file cannot be read (the same subclass, naming the file).
        ValueError: it is not UTF-8 JSON of at most `MAX_JSON_DEPTH` levels (names the file,
            and the line where there is one).
    """
    raw = read_bytes(file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ValueError(
            f"{file}: line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); is it the "
            "file attnmatch wrote?"
        ) from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as e:
        raise ValueError(
            f"{file}: {e} is not strict JSON (attnmatch writes null for an undefined number); "
            "is it the file attnmatch wrote?"
        ) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}: invalid JSON at line {e.lineno}: {e.msg}") from None
    except RecursionError:
        raise ValueError(
            f"{file}: JSON nested deeper than {MAX_JSON_DEPTH} levels: not an attnmatch file"
        ) from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"{file}: invalid JSON: {' '.join(str(e).split())}") from None
    if _depth_exceeds(value, MAX_JSON_DEPTH):
        raise ValueError(
            f"{file}: JSON nested deeper than {MAX_JSON_DEPTH} levels: not an attnmatch file"
        )
    return value


def read_bytes(file: Path) -> bytes:
    """The bytes of `file`; an OSError of the same subclass names the file."""
    try:
        return file.read_bytes()
    except OSError as e:
        raise type(e)(f"{file}: cannot read it ({e.strerror or e})") from e


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than `limit` in `value` (without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def finite_or_null(value: Any) -> Any:
    """`value` (nested dicts, lists, tuples) with every float that is not finite replaced by
    None: JSON null, "undefined"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def dumps_json(value: Any, **kwargs: Any) -> str:
    """`json.dumps` that always writes valid JSON: NaN and infinities become null
    (`finite_or_null`), never the `NaN` / `Infinity` tokens that strict parsers reject."""
    return json.dumps(finite_or_null(value), allow_nan=False, **kwargs)
