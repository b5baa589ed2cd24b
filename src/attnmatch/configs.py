"""Dataclass configs <-> plain dicts (JSON, TOML), strictly.

An unknown key is an error naming its full path (e.g. `model.encoder.dimm`), never ignored; a
value of the wrong type is an error too, and so is a number that is not finite (TOML and
Python's JSON reader accept `nan` and `inf`; no config means them). Nested dataclasses, tuples,
`Literal`s, typed dicts and optionals are supported, which is all our configs use.

`load_toml` reads a config file: a file that is not UTF-8, not TOML, nested too deeply or
larger than `MAX_CONFIG_BYTES` is one error naming the file (and the line, where there is one).
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value or key is invalid; the message names the key path."""


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) dataclass config; tuples become lists."""

    def convert(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple | list):
            return [convert(v) for v in value]
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    return convert(config)


def from_dict(cls: type[T], data: Any, *, path: str = "") -> T:
    """Builds dataclass `cls` from `data`, validating keys and types recursively.

    Raises:
        ConfigError: on unknown or missing keys and wrongly typed values, naming the key path.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a table/object, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"{path}." if path else ""
        raise ConfigError(
            f"unknown config key(s) {', '.join(where + k for k in unknown)} for {cls.__name__}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{path}.{name}" if path else name)
    try:
        return cls(**kwargs)
    except TypeError as e:  # missing required fields
        raise ConfigError(f"{path or cls.__name__}: {e}") from e
    except ValueError as e:  # __post_init__ validation
        if isinstance(e, ConfigError):
            if not path:
                raise
            # "id: ..." of rows[0] -> "rows[0].id: ..."
            joint = "." if _FIELD_FIRST.match(str(e)) else ": "
            raise ConfigError(f"{path}{joint}{e}") from e
        raise ConfigError(f"{path or cls.__name__}: {e}") from e


_FIELD_FIRST = re.compile(r"[A-Za-z_]\w*[:.\[]")


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            raise ConfigError(f"{path}: {value!r} is not one of {list(choices)}")
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(f"{path}: may not be null")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{path}: invalid value {value!r}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path=path)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__}")
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
        return tuple(
            _convert(a, v, f"{path}[{i}]")
            for i, (a, v) in enumerate(zip(args, value, strict=False))
        )
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a table/object, got {type(value).__name__}")
        args = get_args(tp)
        if len(args) == 2:  # dict[str, float]: every value is checked
            return {k: _convert(args[1], v, f"{path}.{k}") for k, v in value.items()}
        return dict(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp in (bool, str):
        if not isinstance(value, tp):
            raise ConfigError(f"{path}: expected {tp.__name__}, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{path}: expected {tp.__name__}, got {value!r}")
    return value


def replace(config: T, overrides: dict[str, Any], *, path: str = "") -> T:
    """A copy of `config` with (possibly nested) `overrides` applied and validated."""
    merged = merge(to_dict(config), overrides)
    return from_dict(type(config), merged, path=path)


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


__all__ = [
    "MAX_CONFIG_BYTES",
    "ConfigError",
    "check_name",
    "check_seeds",
    "from_dict",
    "load_toml",
    "merge",
    "replace",
    "to_dict",
]

# A config or table is a small hand-written file (the largest table is ~35 KB).
MAX_CONFIG_BYTES = 1 << 20


def load_toml(path: str | Path, *, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The TOML file `path` as a dict.

    Raises:
        FileNotFoundError: no such file (or a folder).
        ConfigError: the file is larger than `max_bytes`, is not UTF-8 (names the line), is not
            TOML (names line and column) or is nested too deeply; the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "not found"
        raise FileNotFoundError(f"{path}: {what} (expected a TOML file)")
    size = path.stat().st_size
    if size > max_bytes:
        raise ConfigError(
            f"{path}: {size:,} bytes; a config is a small text file (at most {max_bytes:,} bytes)"
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); save the file as UTF-8"
        ) from None
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a config") from None


# Names that become file or folder names (a table, a row id): a letter or digit, then letters,
# digits, '.', '_' or '-'; no '..', at most 100 characters.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, no '..', "
    "at most 100 characters"
)


def check_name(value: str, field: str) -> str:
    """`value`, when it can safely name a file or folder (`NAME_RULE`): never a path, never
    outside its folder.

    Raises:
        ConfigError: naming `field` and the rule.
    """
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value) or ".." in value:
        raise ConfigError(f"{field}: {value!r} cannot name a file: use {NAME_RULE}")
    return value


MAX_SEEDS = 1000


def check_seeds(seeds: Iterable[int], field: str, *, allow_empty: bool = False) -> tuple[int, ...]:
    """`seeds` as a tuple, when they are distinct integers >= 0 (and at most `MAX_SEEDS`).

    Raises:
        ConfigError: naming `field`: an empty list (unless `allow_empty`), a negative, repeated
            or non-integer seed.
    """
    out = tuple(seeds)
    if not out and not allow_empty:
        raise ConfigError(f"{field}: no seeds; give at least one, e.g. [1, 2, 3]")
    for seed in out:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{field}: seeds are integers >= 0, got {seed!r}")
    twice = sorted({s for s in out if out.count(s) > 1})
    if twice:
        raise ConfigError(f"{field}: seed(s) {twice} given twice; each seed runs once")
    if len(out) > MAX_SEEDS:
        raise ConfigError(f"{field}: {len(out)} seeds; at most {MAX_SEEDS}")
    return out


def check_positive(config: object, *names: str) -> None:
    """Raises ValueError naming the first of the fields `names` of `config` whose value is < 1."""
    for name in names:
        value = getattr(config, name)
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def check_dropout(value: float, name: str = "dropout") -> None:
    """Raises ValueError unless 0 <= value < 1."""
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict as {"train.lr": 0.001, ...}: one dotted key per leaf (an empty
    table is a leaf)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
