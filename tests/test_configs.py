"""Strict dataclass configs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from attnmatch.configs import ConfigError, from_dict, replace, to_dict


@dataclass(frozen=True, kw_only=True)
class Inner:
    size: int = 3
    mode: Literal["a", "b"] = "a"


@dataclass(frozen=True, kw_only=True)
class Outer:
    inner: Inner = field(default_factory=Inner)
    rate: float = 0.1
    sizes: tuple[int, ...] = ()
    name: str | None = None


def test_round_trip_and_conversion() -> None:
    cfg = from_dict(Outer, {"inner": {"size": 5}, "rate": 1, "sizes": [1, 2]})
    assert cfg == Outer(inner=Inner(size=5), rate=1.0, sizes=(1, 2))
    assert from_dict(Outer, to_dict(cfg)) == cfg
    assert replace(cfg, {"inner": {"mode": "b"}}).inner == Inner(size=5, mode="b")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inner": {"sise": 1}}, r"inner\.sise"),
        ({"rate": "x"}, r"rate: expected a number"),
        ({"inner": {"size": True}}, r"inner\.size: expected an integer"),
        ({"inner": {"mode": "c"}}, r"inner\.mode: 'c' is not one of"),
        ({"sizes": [1, "a"]}, r"sizes\[1\]"),
        ({"inner": 3}, r"inner: expected a table"),
    ],
)
def test_errors_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Outer, data)
