"""Hostile exported folders and teacher-score caches: each is checked against what was recorded
when it was written (docs/robustness.md, "Files read back").

- c2: a damaged ONNX graph (garbage, cut short, empty), a missing file of an export, a damaged
  teacher-score cache (garbage, cut short, empty) are one line naming the file, never
  onnxruntime's or safetensors' own message.
- c4: a file of an export changed since it was exported (graphs swapped, a graph of another
  export or of a classifier, config.json edited in place) is refused by its size or sha256 in
  onnx.json; a cache whose table differs from its record (rows, dtype, values edited in place,
  no table) is refused; `--overwrite` scores a damaged cache again.
- c5: a file record of onnx.json that names a path outside the folder is refused.
- c7: an export written before onnx.json recorded its files is still checked by its graphs:
  a graph of another kind, two exports' graphs, or a head of another output count than
  config.json says are one line naming the graph, not `Required inputs ... are missing`. A
  model that does not export, run with `--backend onnx`, prints its one line alone: no torch
  tracer warning, no ONNX Runtime log line.
- c8: the output streams silenced while torch's C++ exporter runs are put back after it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from attnmatch import Matcher
from attnmatch.data.schema import Example
from attnmatch.export import export_onnx
from attnmatch.tasks import Task
from attnmatch.training.distillation import cached_targets
from tests.hostile._util import Outcome, assert_clear_error, assert_clear_exception, run_cli
from tests.models.conftest import tiny_inputs, tiny_model
from tests.tiny_transformer import write_tiny_encoder

CACHE = "teacher_scores.safetensors"
Damage = Callable[[Path, dict[str, Path]], None]  # (the export to damage, the intact exports)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Intact exports of tiny bi-encoders: a ranker of 8 dimensions ("bi", which each test
    damages a copy of), one of 16, and a 3-class classifier."""
    root = tmp_path_factory.mktemp("exports")
    enc, wide = write_tiny_encoder(root / "enc"), write_tiny_encoder(root / "wide", hidden=16)
    inputs = {"kind": "transformer", "source": str(enc)}
    classifier = Matcher.untrained(
        "bi_encoder", inputs=inputs, task=Task(kind="classification", num_classes=3), seed=3
    )
    return {
        "bi": export_onnx(Matcher.from_encoder(str(enc)), root / "bi"),
        "wide": export_onnx(Matcher.from_encoder(str(wide)), root / "wide-bi"),
        "classifier": export_onnx(classifier, root / "classifier"),
    }


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.tsv"
    path.write_text("how are caves formed\ta cave is in the ice\nwhat year\tit ended\n")
    return path


def _garbage(name: str) -> Damage:
    return lambda export, _: (export / name).write_bytes(b"\x08garbage" * 40)


def _cut(name: str) -> Damage:
    def damage(export: Path, _: dict[str, Path]) -> None:
        data = (export / name).read_bytes()
        (export / name).write_bytes(data[: len(data) // 2])

    return damage


def _empty(name: str) -> Damage:
    return lambda export, _: (export / name).write_bytes(b"")


def _swap_graphs(export: Path, _: dict[str, Path]) -> None:
    text, head = (export / "text.onnx").read_bytes(), (export / "head.onnx").read_bytes()
    (export / "text.onnx").write_bytes(head)
    (export / "head.onnx").write_bytes(text)


def _copy_from(other: str, name: str) -> Damage:
    return lambda export, intact: shutil.copy(intact[other] / name, export / name)


def _outputs_in_config(count: int) -> Damage:
    def damage(export: Path, _: dict[str, Path]) -> None:
        config = (export / "config.json").read_text(encoding="utf-8")
        edited = config.replace('"num_outputs": 1', f'"num_outputs": {count}')
        assert edited != config and len(edited) == len(config)
        (export / "config.json").write_text(edited, encoding="utf-8")

    return damage


def _remove(name: str) -> Damage:
    return lambda export, _: (export / name).unlink()


def _set_files_record(value: object) -> Damage:
    def damage(export: Path, _: dict[str, Path]) -> None:
        manifest = json.loads((export / "onnx.json").read_text(encoding="utf-8"))
        manifest["files"] = value
        (export / "onnx.json").write_text(json.dumps(manifest), encoding="utf-8")

    return damage


def _unrecorded(damage: Damage) -> Damage:
    """`damage` to an export written before onnx.json recorded its files."""

    def older(export: Path, intact: dict[str, Path]) -> None:
        damage(export, intact)
        manifest = json.loads((export / "onnx.json").read_text(encoding="utf-8"))
        del manifest["files"]
        (export / "onnx.json").write_text(json.dumps(manifest), encoding="utf-8")

    return older


RECORD = "onnx.json records"
CHANGED = "changed since it was exported"
SHA = "a" * 64
EXPORT_CASES: list[tuple[str, Damage, list[str]]] = [
    ("c2-garbage-text-graph", _garbage("text.onnx"), ["text.onnx", RECORD, CHANGED]),
    ("c2-text-graph-cut-short", _cut("text.onnx"), ["text.onnx", RECORD, CHANGED]),
    ("c2-empty-head-graph", _empty("head.onnx"), ["head.onnx", RECORD]),
    ("c2-missing-tokenizer", _remove("tokenizer.json"), ["tokenizer.json", "missing"]),
    ("c4-graphs-swapped", _swap_graphs, ["head.onnx", RECORD, CHANGED]),
    ("c4-text-graph-of-another-export", _copy_from("wide", "text.onnx"), ["text.onnx", RECORD]),
    ("c4-head-of-a-classifier", _copy_from("classifier", "head.onnx"), ["head.onnx", RECORD]),
    ("c4-config-edited-in-place", _outputs_in_config(3), ["config.json", "sha256", CHANGED]),
    ("c4-files-record-malformed", _set_files_record([1, 2]), ["onnx.json", "'files'"]),
    (
        "c5-files-record-leaving-the-folder",
        _set_files_record({"../config.json": {"bytes": 1, "sha256": SHA}}),
        ["onnx.json", "'files'"],
    ),
    (
        "c7-older-export-graphs-swapped",
        _unrecorded(_swap_graphs),
        ["text.onnx", "not the text graph", "['ids', 'mask']"],
    ),
    (
        "c7-older-export-text-graph-of-another-export",
        _unrecorded(_copy_from("wide", "text.onnx")),
        ["head.onnx", "reads vectors of 8", "gives 16"],
    ),
    (
        "c7-older-export-head-of-a-classifier",
        _unrecorded(_copy_from("classifier", "head.onnx")),
        ["head.onnx", "gives 3 outputs", "config.json says 1"],
    ),
    (
        "c7-older-export-config-edited",
        _unrecorded(_outputs_in_config(3)),
        ["head.onnx", "gives 1 outputs", "config.json says 3"],
    ),
    (
        "c7-older-export-garbage-graph",
        _unrecorded(_garbage("text.onnx")),
        ["text.onnx", "not an ONNX graph"],
    ),
]


@pytest.mark.parametrize(
    ("damage", "needles"), [pytest.param(d, n, id=i) for i, d, n in EXPORT_CASES]
)
def test_a_changed_or_damaged_export_is_one_line_naming_the_file(
    damage: Damage,
    needles: list[str],
    exports: dict[str, Path],
    pairs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    export = Path(shutil.copytree(exports["bi"], tmp_path / "bi"))
    damage(export, exports)
    outcome = run_cli(["score", export, pairs, "--format", "tsv"], capsys)
    line = assert_clear_error(outcome, *needles)
    assert "Required inputs" not in line and outcome.stdout == ""


@pytest.mark.parametrize("older", [False, True], ids=["c4-intact-export", "c4-intact-older"])
def test_an_intact_export_still_scores(
    older: bool,
    exports: dict[str, Path],
    pairs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    export = Path(shutil.copytree(exports["bi"], tmp_path / "bi"))
    if older:
        _unrecorded(lambda *_: None)(export, exports)
    outcome = run_cli(["score", export, pairs, "--format", "tsv"], capsys)
    assert outcome.code == 0, outcome.stderr
    scores = [float(x) for x in outcome.stdout.split()]
    want = Matcher.load(exports["bi"]).score([("how are caves formed", "a cave is in the ice")])
    assert len(scores) == 2 and abs(scores[0] - float(want[0])) < 1e-5


# --- teacher-score caches ---------------------------------------------------------------------


def _examples() -> list[Example]:
    return [
        Example("red apple fruit", "the apple is a red fruit", 1, "q1"),
        Example("red apple fruit", "cars drive on roads", 0, "q1"),
        Example("fast car road", "a fast car on the road", 1, "q2"),
        Example("fast car road", "bananas are yellow", 0, "q2"),
    ]


def _metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata())


def _table(make: Callable[[np.ndarray], dict[str, np.ndarray]]) -> Callable[[Path], None]:
    """Replaces the cache by a valid safetensors file with its metadata and `make`'s tables."""

    def damage(path: Path) -> None:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            targets = f.get_tensor("targets")
        path.write_bytes(save(make(targets), metadata=_metadata(path)))

    return damage


def _nan_in_place(targets: np.ndarray) -> dict[str, np.ndarray]:
    edited = targets.copy()
    edited[0, 0] = np.nan
    return {"targets": edited}


def _cache_bytes(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(change(path.read_bytes()))


CACHE_CASES: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("c2-cache-garbage", _cache_bytes(lambda b: b"\x07garbage" * 30), ["damaged"]),
    ("c2-cache-cut-short", _cache_bytes(lambda b: b[: len(b) // 2]), ["damaged"]),
    ("c2-cache-last-bytes-cut", _cache_bytes(lambda b: b[:-4]), ["damaged"]),
    ("c2-cache-empty", _cache_bytes(lambda b: b""), ["damaged"]),
    ("c4-cache-of-fewer-rows", _table(lambda t: {"targets": t[:2]}), ["shape 2x1"]),
    ("c4-cache-float64", _table(lambda t: {"targets": t.astype(np.float64)}), ["float64"]),
    ("c4-cache-edited-in-place", _table(_nan_in_place), ["sha256", "changed"]),
    ("c4-cache-without-its-table", _table(lambda t: {"other": t}), ["'targets'"]),
]


@pytest.mark.parametrize(
    ("damage", "needles"), [pytest.param(d, n, id=i) for i, d, n in CACHE_CASES]
)
def test_a_damaged_teacher_cache_is_one_line_naming_it(
    damage: Callable[[Path], None], needles: list[str], tmp_path: Path
) -> None:
    path = tmp_path / CACHE
    teacher = Matcher.from_lexical("bm25")
    intact, _ = cached_targets(path, [teacher], _examples())
    damage(path)
    with pytest.raises(ValueError) as refused:
        cached_targets(path, [teacher], _examples())
    assert_clear_exception(refused.value, CACHE, *needles, "--overwrite")
    again, seconds = cached_targets(path, [teacher], _examples(), replace=True)
    assert seconds > 0 and np.array_equal(again, intact)  # --overwrite scores it again
    assert cached_targets(path, [teacher], _examples())[1] == 0.0  # and the new one is reused


# --- a model that does not export, on --backend onnx ------------------------------------------


def _saved(name: str, folder: Path) -> Path:
    model = tiny_model(name)
    kind = "mvlstm" if name.startswith("amvlstm") else name
    matcher = Matcher(
        model=model.eval(), model_type=kind, inputs=tiny_inputs(model), task=Task(kind="ranking")
    )
    return matcher.save(folder / name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        pytest.param("arc_i", "fails on pairs of other lengths", id="c7-onnx-arc-i-quiet"),
        pytest.param("arc_ii", "fails on pairs of other lengths", id="c7-onnx-arc-ii-quiet"),
    ],
)
def test_a_model_that_does_not_export_prints_only_its_own_line(
    name: str, why: str, pairs: Path, tmp_path: Path
) -> None:
    """Run as a process, so that what torch's C++ exporter and ONNX Runtime write to the file
    descriptor itself is seen: one `error:` line, no tracer warning, no runtime log line."""
    model = _saved(name, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "attnmatch", "score", str(model), str(pairs), "--format", "tsv"]
        + ["--backend", "onnx"],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert_clear_error(Outcome(done.returncode, done.stdout, done.stderr), "does not export", why)
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize("case", ["c8-streams-put-back-after-a-failed-export"], ids=str)
def test_a_failed_export_puts_the_output_streams_back(
    case: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model = Matcher.load(_saved("arc_i", tmp_path))
    capfd.readouterr()
    with pytest.raises(ValueError, match="does not export"):
        export_onnx(model, tmp_path / "onnx")
    os.write(1, b"out\n")
    os.write(2, b"err\n")
    assert capfd.readouterr() == ("out\n", "err\n")  # nothing of the exporter's, then fds 1, 2
