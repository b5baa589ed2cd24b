"""Hostile lexical model folders (`attnmatch.lexical_dir`): a folder changed after it was saved
is refused in one line naming the file and what differs (docs/robustness.md, "Files read
back"), from the Python API and from `attnmatch rank`.

- c4: corpus.jsonl edited in place (same size: the digest), a text removed (size, count), a
  byte appended; the head or the corpus record in config.json out of range or of the wrong
  type; a tensor in model.safetensors.
- c5: inputs.file naming another path than corpus.jsonl.
- c2/c7: corpus.jsonl missing or replaced by garbage that config.json vouches for.
- c3: a saved folder scores exactly as the matcher it was saved from; the intact copy still does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from attnmatch.matcher import Matcher
from attnmatch.tasks import ClassificationTask
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli

CALIBRATION = [
    ("how are caves formed", "caves are formed by water", 1),
    ("who wrote the book", "the weather is fine", 0),
    ("what is a glacier", "a glacier is ice", 1),
    ("when did it rain", "cats sleep all day", 0),
]
PAIRS = [("how are caves formed", "water forms caves"), ("a b", "c d"), ("ice", "a glacier")]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BM25 classifier calibrated on four pairs (its corpus: their right texts)."""
    task = ClassificationTask(class_names=("different", "same"))
    matcher = Matcher.from_lexical("bm25", task=task, calibration=CALIBRATION)
    return matcher.save(tmp_path_factory.mktemp("lexical") / "model")


def _copy(saved: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "model"))


def _corpus(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        file = path / "corpus.jsonl"
        file.write_bytes(change(file.read_bytes()))

    return damage


def _header(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        header = json.loads((path / "config.json").read_text(encoding="utf-8"))
        change(header)
        (path / "config.json").write_text(json.dumps(header), encoding="utf-8")

    return damage


def _vouched(data: bytes) -> Callable[[Path], None]:
    """corpus.jsonl replaced by `data`, with config.json's record rewritten to vouch for it."""

    def damage(path: Path) -> None:
        (path / "corpus.jsonl").write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        _header(lambda h: h["inputs"].update(bytes=len(data), sha256=digest))(path)

    return damage


def _edit_in_place(data: bytes) -> bytes:
    return data.replace(b"caves", b"cavez", 1)


def _tensor(path: Path) -> None:
    safetensors.torch.save_file({"head": torch.ones(2)}, str(path / "model.safetensors"))


DAMAGED = [
    ("c4-corpus-edited-in-place", _corpus(_edit_in_place), ("corpus.jsonl", "sha256 differs")),
    (
        "c4-corpus-text-removed",
        _corpus(lambda d: d.split(b"\n", 1)[1]),
        ("corpus.jsonl", "bytes, config.json records", "changed after it was saved"),
    ),
    ("c4-corpus-byte-appended", _corpus(lambda d: d + b" "), ("corpus.jsonl", "bytes")),
    ("c2-corpus-missing", lambda p: (p / "corpus.jsonl").unlink(), ("corpus.jsonl", "missing")),
    ("c2-corpus-garbage-vouched-for", _vouched(b"\xff\xfe{\n"), ("corpus.jsonl", "line 1")),
    ("c7-corpus-count-vouched-for", _vouched(b'"a"\n'), ("corpus.jsonl", "1 texts", "records 4")),
    (
        "c4-head-scale-zero",
        _header(lambda h: h["config"].update(scale=0)),
        ("config.json", "config.scale"),
    ),
    (
        "c4-head-shift-a-string",
        _header(lambda h: h["config"].update(shift="1")),
        ("config.json", "config.shift", "finite number"),
    ),
    (
        "c4-head-three-outputs",
        _header(lambda h: h["config"].update(num_outputs=3)),
        ("config.json", "config.num_outputs"),
    ),
    (
        "c4-head-outputs-do-not-fit-task",
        _header(lambda h: h["config"].update(num_outputs=1)),
        ("config.json", "2 classes"),
    ),
    (
        "c7-head-key-missing",
        _header(lambda h: h["config"].pop("shift")),
        ("config.json", "'config'", "num_outputs, scale, shift"),
    ),
    (
        "c4-corpus-count-negative",
        _header(lambda h: h["inputs"].update(texts=-1)),
        ("config.json", "inputs.texts"),
    ),
    (
        "c4-corpus-digest-malformed",
        _header(lambda h: h["inputs"].update(sha256="abc")),
        ("config.json", "inputs.sha256"),
    ),
    (
        "c5-corpus-file-elsewhere",
        _header(lambda h: h["inputs"].update(file="../corpus.jsonl")),
        ("config.json", "inputs.file", "corpus.jsonl"),
    ),
    ("c4-weights-a-tensor", _tensor, ("model.safetensors", "unexpected tensor 'head'")),
]


@pytest.mark.parametrize(("damage", "needles"), [pytest.param(d, n, id=i) for i, d, n in DAMAGED])
def test_a_changed_lexical_folder_is_one_error_naming_the_file(
    saved: Path, tmp_path: Path, damage: Callable[[Path], None], needles: tuple[str, ...]
) -> None:
    path = _copy(saved, tmp_path)
    damage(path)
    with pytest.raises((ValueError, OSError)) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path), *needles)


@pytest.mark.parametrize("case", [pytest.param("c7-cli-rank-corpus-edited", id="c7")])
def test_a_changed_lexical_folder_on_the_command_line(
    case: str, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy(saved, tmp_path)
    _corpus(_edit_in_place)(path)
    (candidates := tmp_path / "candidates.txt").write_text("caves\nice\n", encoding="utf-8")
    args = ["rank", path, "--query", "caves", "--candidates", candidates]
    outcome = run_cli(args, capsys)
    assert_clear_error(outcome, "corpus.jsonl", "sha256 differs")
    assert outcome.stdout == ""


@pytest.mark.parametrize("case", [pytest.param("c3-lexical-folder-round-trip", id="c3")])
def test_a_lexical_folder_scores_as_the_matcher_it_was_saved_from(
    case: str, saved: Path, tmp_path: Path
) -> None:
    for kind in ("overlap", "bm25", "idf_overlap"):
        task = ClassificationTask(class_names=("different", "same"))
        matcher = Matcher.from_lexical(
            kind, task=task, calibration=CALIBRATION, corpus=["ice\n", "a\u2028b"]
        )
        loaded = Matcher.load(matcher.save(tmp_path / kind))
        assert loaded.model_type == kind and loaded.inputs is None
        np.testing.assert_array_equal(loaded.outputs(PAIRS), matcher.outputs(PAIRS))
        assert loaded.classify(PAIRS) == matcher.classify(PAIRS)
    assert Matcher.load(saved).outputs(PAIRS).shape == (3, 2)  # the intact copy
