"""The shared text reader (`attnmatch.data.textfile`): the lines Python's own reader gives
(`open(..., newline="")`, which the corpus loaders used before), decoded line by line so that
errors name their line, with `.gz` read transparently and a leading byte order mark dropped."""

from __future__ import annotations

import gzip
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmatch.data.textfile import DatasetFormatError, TextLines, open_text, parse_json_line

# Line ends of every kind, and the characters str.splitlines() would also split at.
texts = st.lists(
    st.sampled_from(["a", "é", "\t", " ", '"', "\n", "\r", "\r\n", "\x85", "\u2028", "\x0c"]),
    max_size=30,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=texts, gz=st.booleans(), bom=st.booleans())
def test_lines_are_those_of_pythons_reader(text: str, gz: bool, bom: bool) -> None:
    data = ("\ufeff" if bom else "").encode() + text.encode("utf-8")
    expected = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="").readlines()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("f.txt.gz" if gz else "f.txt")
        path.write_bytes(gzip.compress(data) if gz else data)
        with open_text(path) as f:
            assert f.readlines() == expected
            assert f.lineno == len(expected)


def test_readline_and_iteration_share_the_count(tmp_path: Path) -> None:
    path = tmp_path / "f.tsv"
    path.write_bytes(b"\xef\xbb\xbfh1\th2\r\nx\ty\n\nlast")
    with open_text(path) as f:
        assert f.readline() == "h1\th2\r\n"
        rest = list(f)
        assert rest == ["x\ty\n", "\n", "last"] and f.lineno == 4
        assert f.readline() == ""


def test_a_bad_byte_is_reported_on_its_own_line() -> None:
    stream = io.BytesIO(b"ok\n" * 10_000 + b"bad \xc3\x28 here\n" + b"ok\n")
    lines = TextLines(stream, "big.txt")
    with pytest.raises(DatasetFormatError, match=r"^big\.txt:10001: not UTF-8 .*column 5"):
        list(lines)
    assert lines.lineno == 10_000  # every line before it was read


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"pairs file not found: .*none\.tsv"):
        open_text(tmp_path / "none.tsv", what="pairs file")
    with pytest.raises(IsADirectoryError, match="is a folder; expected a file"):
        open_text(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('{"a": -Infinity}', "-Infinity is not valid JSON"),
        ('{"a": 1e400}', "beyond a float"),
        ('{"a": 1, "a": 2}', "'a' is given twice"),
        ('{"a": [1, 2}', "not valid JSON: Expecting"),
        ("[" * 50_000, "nested too deeply"),
    ],
)
def test_json_lines_are_strict(text: str, message: str) -> None:
    with pytest.raises(DatasetFormatError, match=rf"^f\.jsonl:3: .*{message}"):
        parse_json_line(text, "f.jsonl:3")
    assert parse_json_line('{"a": [1.5, null, "x"]}', "f.jsonl:1") == {"a": [1.5, None, "x"]}
