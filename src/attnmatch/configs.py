"""Dataclass configs <-> plain dicts (JSON, TOML), strictly.

An unknown key is an error naming its full path (e.g. `model.encoder.dimm`), never ignored; a
value of the wrong type is an error too. Nested dataclasses, tuples, `Literal`s and optionals are
supported, which is all our configs use.
"""

from __future__ import annotations

import dataclasses
import types
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
            raise
        raise ConfigError(f"{path or cls.__name__}: {e}") from e


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
        return dict(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
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


__all__ = ["ConfigError", "from_dict", "merge", "replace", "to_dict"]


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
