"""Strict dataclass configs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from attnmatch.configs import (
    MAX_SEEDS,
    ConfigError,
    check_name,
    check_seeds,
    from_dict,
    load_toml,
    replace,
    to_dict,
)


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


@dataclass(frozen=True, kw_only=True)
class Scores:
    paper: dict[str, float] = field(default_factory=dict)
    rate: float = 0.1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rate": float("nan")}, r"rate: expected a finite number, got nan"),
        ({"rate": float("inf")}, r"rate: expected a finite number, got inf"),
        ({"paper": {"map": float("nan")}}, r"paper\.map: expected a finite number"),
        ({"paper": {"map": "high"}}, r"paper\.map: expected a number"),
    ],
)
def test_numbers_are_finite(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Scores, data)


@dataclass(frozen=True, kw_only=True)
class Named:
    id: str

    def __post_init__(self) -> None:
        check_name(self.id, "id")


@dataclass(frozen=True, kw_only=True)
class Table:
    rows: tuple[Named, ...]


def test_post_init_errors_of_nested_configs_name_the_full_path() -> None:
    with pytest.raises(ConfigError, match=r"^rows\[1\]\.id: '\.\./x' cannot name a file"):
        from_dict(Table, {"rows": [{"id": "a"}, {"id": "../x"}]})


@pytest.mark.parametrize("name", ["amvlstm_q", "sick-damm_1block", "v1.2", "A0"])
def test_check_name_accepts_file_names(name: str) -> None:
    assert check_name(name, "id") == name


@pytest.mark.parametrize(
    "name", ["", "..", "a..b", "../x", "/abs", "a/b", "a\\b", ".hidden", "-x", "a\x00b", "a b", "é"]
)
def test_check_name_refuses_paths(name: str) -> None:
    with pytest.raises(ConfigError, match="id: .* cannot name a file"):
        check_name(name, "id")


def test_check_seeds() -> None:
    assert check_seeds([3, 0, 1], "seeds") == (3, 0, 1)
    assert check_seeds([], "seeds", allow_empty=True) == ()
    for seeds, message in [
        ([], "no seeds"),
        ([1, -2], "seeds are integers >= 0, got -2"),
        ([1, True], "seeds are integers >= 0, got True"),
        ([1, 2, 1], r"seed\(s\) \[1\] given twice"),
        (range(MAX_SEEDS + 1), f"{MAX_SEEDS + 1} seeds; at most {MAX_SEEDS}"),
    ]:
        with pytest.raises(ConfigError, match=f"^seeds: {message}"):
            check_seeds(seeds, "seeds")


def test_load_toml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_bytes(b'a = 1\r\nb = "\xef\xbb\xbf ok"\n')
    assert load_toml(path) == {"a": 1, "b": "\ufeff ok"}
    path.write_bytes(b"\xef\xbb\xbfa = 1\n")  # a byte order mark is dropped
    assert load_toml(path) == {"a": 1}
    cases = [
        (b"a = 1\nb = \xff\n", rf"^{path}:2: not UTF-8 text \(byte 0xff\)"),
        (b"a = 1\nb = \n", rf"^{path}: invalid TOML: .*line 2"),
        (b"a = " + b"[" * 30_000 + b"]" * 30_000, rf"^{path}: nested too deeply"),
    ]
    for raw, message in cases:
        path.write_bytes(raw)
        with pytest.raises(ConfigError, match=message):
            load_toml(path)
    path.write_bytes(b"# " + b"x" * 100 + b"\n")
    with pytest.raises(ConfigError, match=r"103 bytes; a config is a small text file"):
        load_toml(path, max_bytes=100)
    with pytest.raises(FileNotFoundError, match="a folder, not a file"):
        load_toml(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_toml(tmp_path / "missing.toml")
