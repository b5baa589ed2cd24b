"""Hostile inputs of model directories, `Matcher` and word vectors.

- c2: a damaged model directory (weights file empty, truncated, of another shape or dtype, a
  tensor missing or extra; config.json not JSON, not an object, nested 100,000 deep, a field of
  the wrong type; vocab.json not a list of strings or with a repeated token; a folder that is a
  file; a file that cannot be read) is one line naming the file and the field or tensor, from
  the Python API and from `attnmatch rank|score`; so are odd option values of `Matcher.load`.
  Hypothesis fuzzes the loader: random JSON and bytes in config.json, vocab.json and
  metrics.json, truncated and mutated weights always give a Matcher whose scores are finite,
  or a ValueError / OSError naming the directory.
- c4: a vocabulary shorter or longer than the embedding table, NaN or infinity in a weight, a
  model whose outputs overflow (never a NaN score), a task that does not fit the outputs, word
  vectors covering none of the vocabulary (refused) or little of it (a warning), a malformed
  line of a vectors file (file and line named), calibration labels that are not labels.
- c3: a loaded model with exact-match features scores as the trained one did.
- c7: a required key missing from config.json names the file and the key.
- c8: loading, scoring, ranking, explaining, fitting and saving change no process-wide setting
  (threads, subnormal flushing, grad mode, default dtype, random generators, environment,
  warnings filters, logging, umask, ...); a byte order mark is read as such.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors
import safetensors.torch
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmatch import embeddings, encoders, model_dir
from attnmatch.data.vocab import Vocab
from attnmatch.embeddings import LowCoverageWarning, build_embedding_matrix, load_word_vectors
from attnmatch.matcher import Matcher
from attnmatch.tasks import Task
from attnmatch.training import fit
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli
from tests.models.conftest import tiny_inputs, tiny_model

PAIRS = [("w1 w2 w3", "w3 w4 w5"), ("w7", "w8 w9 w1"), ("w2 w4", "w2")]
PAIRS_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "pairs_tiny"
EMBEDDING = "token_encoder.embedding.weight"  # the word-vector table of a tiny model (40 rows)


def case(case_id: str) -> pytest.MarkDecorator:
    """One battery case of a test that has a single input: its id names the class first."""
    return pytest.mark.parametrize("case", [pytest.param(case_id, id=case_id)])


def _matcher(name: str = "mvlstm", *, num_outputs: int = 1, task: Task | None = None) -> Matcher:
    model = tiny_model(name, num_outputs=num_outputs)
    return Matcher(
        model=model.eval(),
        model_type=name,
        inputs=tiny_inputs(model),
        task=task or Task(kind="ranking"),
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random MV-LSTM ranking model directory (40 words, 8 dimensions)."""
    path = _matcher().save(tmp_path_factory.mktemp("saved") / "model")
    (path / "metrics.json").write_text(json.dumps({"dev": {"map": 0.5}}), encoding="utf-8")
    return path


def _copy(saved: Path, where: Path) -> Path:
    target = where / "model"
    shutil.copytree(saved, target)
    return target


# --------------------------------------------------------------------------- damage recipes


def _write(name: str, data: str | bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        target = path / name
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(data, encoding="utf-8")

    return damage


def _header(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """Changes config.json's object in place."""

    def damage(path: Path) -> None:
        header = json.loads((path / "config.json").read_text(encoding="utf-8"))
        change(header)
        (path / "config.json").write_text(json.dumps(header), encoding="utf-8")

    return damage


def _weights(change: Callable[[dict[str, torch.Tensor]], Any]) -> Callable[[Path], None]:
    """Changes the tensors of model.safetensors (and writes a valid file again)."""

    def damage(path: Path) -> None:
        state = safetensors.torch.load_file(str(path / "model.safetensors"))
        change(state)
        safetensors.torch.save_file(state, str(path / "model.safetensors"))

    return damage


def _vocab(tokens: Any) -> Callable[[Path], None]:
    return _write("vocab.json", json.dumps({"format": "attnmatch.vocab/1", "tokens": tokens}))


def _truncate(fraction: float) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        raw = (path / "model.safetensors").read_bytes()
        (path / "model.safetensors").write_bytes(raw[: int(len(raw) * fraction)])

    return damage


def _replace_with_folder(name: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        (path / name).unlink()
        (path / name).mkdir()

    return damage


def _set_first(value: float) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(state: dict[str, torch.Tensor]) -> None:
        state[EMBEDDING].view(-1)[5] = value

    return change


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


WORDS = ["<pad>", "<unk>"] + [f"w{i}" for i in range(38)]

# (id, damage, what the one error line must name besides the directory's file)
DAMAGED: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    ("c2-weights-empty", _write("model.safetensors", b""), ("model.safetensors", "empty")),
    ("c2-weights-truncated", _truncate(0.5), ("model.safetensors", "truncated")),
    ("c2-weights-header-only", _truncate(0.02), ("model.safetensors", "not a readable")),
    (
        "c2-weights-wrong-shape",
        _weights(lambda s: s.__setitem__(EMBEDDING, torch.zeros(40, 9))),
        ("model.safetensors", EMBEDDING, "shape [40, 9]", "[40, 8]"),
    ),
    (
        "c2-weights-wrong-dtype",
        _weights(lambda s: s.__setitem__(EMBEDDING, s[EMBEDDING].double())),
        ("model.safetensors", EMBEDDING, "float64", "float32"),
    ),
    (
        "c2-weights-integer-dtype",
        _weights(lambda s: s.__setitem__(EMBEDDING, s[EMBEDDING].long())),
        ("model.safetensors", EMBEDDING, "int64"),
    ),
    (
        "c2-weights-tensor-missing",
        _weights(lambda s: s.pop(EMBEDDING)),
        ("model.safetensors", EMBEDDING, "missing"),
    ),
    (
        "c2-weights-tensor-extra",
        _weights(lambda s: s.__setitem__("head.extra", torch.zeros(3))),
        ("model.safetensors", "head.extra", "unexpected"),
    ),
    ("c2-config-not-json", _write("config.json", '{"format": '), ("config.json", "line 1")),
    ("c2-config-not-object", _write("config.json", "[1, 2]"), ("config.json", "object")),
    (
        "c2-config-nested-100000-deep",
        _write("config.json", _nested(100_000)),
        ("config.json", "nested"),
    ),
    (
        "c2-config-object-nested-deep",
        _header(lambda h: h["config"].__setitem__("encoder", json.loads(_nested(150)))),
        ("config.json", "nested"),
    ),
    (
        "c2-config-not-utf8",
        _write("config.json", b'{"format": "attnmatch.model/2", "x": "\xff"}'),
        ("config.json", "UTF-8", "line 1"),
    ),
    (
        "c2-config-field-wrong-type",
        _header(lambda h: h["config"].__setitem__("hidden_size", "6")),
        ("config.json", "config.hidden_size", "integer"),
    ),
    (
        "c2-config-section-wrong-type",
        _header(lambda h: h.__setitem__("inputs", ["word_vectors"])),
        ("config.json", "'inputs'", "object"),
    ),
    (
        "c2-config-model-type-unknown",
        _header(lambda h: h.__setitem__("model_type", "mvlstm2")),
        ("config.json", "mvlstm2", "registered"),
    ),
    (
        "c2-config-features-wrong-type",
        _header(lambda h: h.__setitem__("features", "overlap")),
        ("config.json", "features"),
    ),
    (
        "c2-config-features-negative",
        _header(lambda h: h.__setitem__("features", {"overlap": -3})),
        ("config.json", "features.overlap"),
    ),
    (
        "c2-config-huge-sizes",  # checked against the weights before anything is allocated
        _header(lambda h: h["config"].__setitem__("hidden_size", 10**9)),
        ("config.json",),
    ),
    (
        "c2-config-huge-vocabulary",
        _header(lambda h: h["config"]["encoder"].__setitem__("vocab_size", 10**12)),
        ("model.safetensors", EMBEDDING, "1000000000000"),
    ),
    (
        "c2-config-task-class-names-not-strings",
        _header(lambda h: h.__setitem__("task", {"kind": "classification", "class_names": "ab"})),
        ("config.json", "task.class_names"),
    ),
    (
        "c2-config-task-unknown-kind",
        _header(lambda h: h.__setitem__("task", {"kind": "sorting"})),
        ("config.json", "task", "sorting"),
    ),
    (
        "c2-vocab-not-list-of-strings",
        _vocab(["<pad>", "<unk>", *range(38)]),
        ("vocab.json", "list of strings"),
    ),
    ("c2-vocab-repeated-token", _vocab(["<pad>", "<unk>", *["w1"] * 38]), ("vocab.json", "w1")),
    ("c2-vocab-not-json", _write("vocab.json", "[1, 2"), ("vocab.json",)),
    ("c2-vocab-nested-deep", _write("vocab.json", _nested(100_000)), ("vocab.json", "nested")),
    ("c2-vocab-not-utf8", _write("vocab.json", b"\xff\xfe{}"), ("vocab.json", "UTF-8")),
    ("c2-metrics-not-object", _write("metrics.json", "[]"), ("metrics.json", "object")),
    (
        "c2-metrics-nested-deep",
        _write("metrics.json", _nested(100_000)),
        ("metrics.json", "nested"),
    ),
    ("c2-config-is-a-folder", _replace_with_folder("config.json"), ("config.json", "not a")),
    ("c2-metrics-is-a-folder", _replace_with_folder("metrics.json"), ("metrics.json",)),
    (
        "c7-config-missing-task",
        _header(lambda h: h.pop("task")),
        ("config.json", "missing key 'task'"),
    ),
    (
        "c7-config-missing-task-kind",
        _header(lambda h: h.__setitem__("task", {"class_names": ["a", "b"]})),
        ("config.json", "task.kind"),
    ),
    (
        "c7-config-missing-model-field",
        _header(lambda h: h["config"].pop("hidden_size") and h["config"].pop("k")),
        ("config.json", "config"),
    ),
    (
        "c4-vocab-shorter-than-table",
        _vocab(WORDS[:30]),
        ("vocab.json", "30 tokens", "40 rows", "model.safetensors"),
    ),
    (
        "c4-vocab-longer-than-table",
        _vocab([*WORDS, "w38", "w39"]),
        ("vocab.json", "42 tokens", "40 rows", "model.safetensors"),
    ),
    (
        "c4-weights-nan",
        _weights(_set_first(float("nan"))),
        ("model.safetensors", EMBEDDING, "non-finite"),
    ),
    (
        "c4-weights-infinite",
        _weights(_set_first(float("-inf"))),
        ("model.safetensors", EMBEDDING, "non-finite"),
    ),
    (
        "c4-task-classes-do-not-fit-outputs",
        _header(
            lambda h: h.__setitem__("task", {"kind": "classification", "class_names": ["a", "b"]})
        ),
        ("config.json", "2 classes", "1 outputs"),
    ),
    (
        "c4-task-class-named-twice",
        _header(
            lambda h: h.__setitem__("task", {"kind": "classification", "class_names": ["a", "a"]})
        ),
        ("config.json", "task.class_names", "twice"),
    ),
    (
        "c4-inputs-of-another-kind",
        _header(lambda h: h.__setitem__("inputs", {"kind": "trigrams", "buckets": 40, "dim": 8})),
        ("config.json", "trigrams", "word_vectors"),
    ),
]


@pytest.mark.parametrize(("damage", "needles"), [pytest.param(d, n, id=i) for i, d, n in DAMAGED])
def test_a_damaged_model_directory_is_one_error_naming_the_file(
    saved: Path, tmp_path: Path, damage: Callable[[Path], None], needles: tuple[str, ...]
) -> None:
    path = _copy(saved, tmp_path)
    damage(path)
    with pytest.raises((ValueError, OSError)) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path), *needles)


CLI_DAMAGED = {
    "c2-cli-rank-weights-truncated": (_truncate(0.5), "rank", ("model.safetensors",)),
    "c2-cli-score-config-nested-deep": (
        _write("config.json", _nested(100_000)),
        "score",
        ("config.json", "nested"),
    ),
    "c7-cli-rank-config-missing-task": (
        _header(lambda h: h.pop("task")),
        "rank",
        ("config.json", "task"),
    ),
    "c4-cli-evaluate-weights-nan": (
        _weights(_set_first(float("nan"))),
        "evaluate",
        ("model.safetensors", EMBEDDING, "non-finite"),
    ),
    "c4-cli-score-vocab-shorter-than-table": (
        _vocab(WORDS[:30]),
        "score",
        ("vocab.json", "30 tokens", "40 rows"),
    ),
}


@pytest.mark.parametrize(
    ("damage", "command", "needles"),
    [pytest.param(*v, id=k) for k, v in CLI_DAMAGED.items()],
)
def test_a_damaged_model_directory_on_the_command_line(
    saved: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[Path], None],
    command: str,
    needles: tuple[str, ...],
) -> None:
    path = _copy(saved, tmp_path)
    damage(path)
    if command == "rank":
        (candidates := tmp_path / "candidates.txt").write_text("w1 w2\nw3\n", encoding="utf-8")
        args = ["rank", path, "--query", "w1 w3", "--candidates", candidates]
    elif command == "evaluate":
        args = ["evaluate", path, "--dataset", f"pairs:{PAIRS_FIXTURE}:test"]
    else:
        (pairs := tmp_path / "pairs.tsv").write_text("w1 w2\tw3\n", encoding="utf-8")
        args = ["score", path, pairs, "--format", "tsv"]
    outcome = run_cli(args, capsys)
    assert_clear_error(outcome, *needles)
    assert outcome.stdout == ""


@case("c2-model-folder-is-a-file")
def test_a_model_folder_that_is_a_file(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (path := tmp_path / "model").write_text("not a folder", encoding="utf-8")
    with pytest.raises(NotADirectoryError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path), "not a model directory")
    (pairs := tmp_path / "pairs.tsv").write_text("a\tb\n", encoding="utf-8")
    assert_clear_error(run_cli(["score", path, pairs, "--format", "tsv"], capsys), str(path))


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, id=f"c2-unreadable-{n}")
        for n in ("config.json", "model.safetensors", "metrics.json")
    ],
)
def test_c2_an_unreadable_file_is_named(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A file the process may not read (permissions cannot be tested as root: the read fails
    as it would)."""
    path = _copy(saved, tmp_path)
    target = path / name
    read_bytes = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(PermissionError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(target), "Permission denied")


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        pytest.param({"device": "gpu0"}, "device 'gpu0'", id="c2-load-device-not-a-device"),
        pytest.param({"device": "meta"}, "meta", id="c2-load-device-meta"),
        pytest.param({"batch_size": 0}, "batch_size", id="c4-load-batch-size-zero"),
        pytest.param({"batch_size": 2.5}, "batch_size", id="c4-load-batch-size-not-integer"),
    ],
)
def test_odd_load_options_are_one_error(saved: Path, option: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        Matcher.load(saved, **option)
    assert_clear_exception(info.value, needle)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
@case("c2-load-device-cuda-absent")
def test_load_on_cuda_without_a_device(case: str, saved: Path) -> None:
    with pytest.raises(ValueError) as info:
        Matcher.load(saved, device="cuda")
    assert_clear_exception(info.value, "'cuda'", "no CUDA device", "'cpu'")


@case("c2-format-1-not-migratable")
def test_a_format_1_directory_that_cannot_be_migrated(
    case: str, saved: Path, tmp_path: Path
) -> None:
    path = _copy(saved, tmp_path)
    header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    old = {
        "format": "attnmatch.model/1",
        "attnmatch_version": "0.0.1",
        "model_type": "mvlstm",
        "config": header["config"],
        "task": "regression",
        "tokenizer": {"lowercase": True},
        "label_space": {"min_score": "low"},
    }
    (path / "config.json").write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path / "config.json"), "attnmatch.model/1", "low")


@case("c7-format-1-missing-tokenizer")
def test_a_format_1_directory_without_its_tokenizer(case: str, saved: Path, tmp_path: Path) -> None:
    path = _copy(saved, tmp_path)
    header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    old = {k: header[k] for k in ("attnmatch_version", "model_type", "config")}
    old |= {"format": "attnmatch.model/1", "task": "ranking"}
    (path / "config.json").write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path / "config.json"), "missing key 'tokenizer'")


@case("c4-trigram-buckets-do-not-fit-table")
def test_trigram_buckets_that_do_not_fit_the_table(case: str, tmp_path: Path) -> None:
    path = _matcher("dssm").save(tmp_path / "dssm")
    header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    header["inputs"]["buckets"] += 5
    (path / "config.json").write_text(json.dumps(header), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, str(path / "config.json"), "inputs.buckets", "rows")


@case("c3-overlap-features-loaded-model-scores-as-trained")
def test_exact_match_features_weigh_unseen_words_as_trained(case: str, tmp_path: Path) -> None:
    """Words beyond the idf table (never in the training texts) weigh as its rarest word, in
    the trained model and in the loaded one alike (a loaded model weighed them 0)."""
    from attnmatch.nn.overlap import WithOverlapFeatures

    trained = _matcher()
    idf = torch.linspace(0.5, 3.0, 10)  # ids 0..9: w0..w7; w8 and beyond are unseen
    model = WithOverlapFeatures(trained.model, 1, idf)
    with torch.no_grad():
        model.head.weight.fill_(1.0)
    trained = Matcher(
        model=model.eval(), model_type="mvlstm", inputs=trained.inputs, task=trained.task
    )
    pairs = [("w1 w9 w20", "w9 w3"), ("w12 w2", "w2 w12 w5")]
    loaded = Matcher.load(trained.save(tmp_path / "features"))
    np.testing.assert_allclose(loaded.score(pairs), trained.score(pairs), rtol=1e-6)


@case("c4-metrics-not-finite-written-as-strict-json")
def test_metrics_that_are_not_finite_are_written_as_null(case: str, tmp_path: Path) -> None:
    metrics = {"dev": {"pearson": math.nan, "mse": math.inf, "n": 3}, "curve": [0.5, -math.inf]}
    path = _matcher().save(tmp_path / "model", metrics=metrics)

    def refuse(constant: str) -> None:
        raise AssertionError(f"metrics.json holds {constant}, which is not JSON")

    text = (path / "metrics.json").read_text(encoding="utf-8")
    written = json.loads(text, parse_constant=refuse)
    assert written == {"dev": {"pearson": None, "mse": None, "n": 3}, "curve": [0.5, None]}
    assert Matcher.load(path).metrics == written


# --------------------------------------------------------------------------- outputs


def _overflowing(task: Task, num_outputs: int) -> Matcher:
    """A matcher whose finite weights overflow float32 on any text: its outputs are inf or NaN."""
    matcher = _matcher(num_outputs=num_outputs, task=task)
    with torch.no_grad():
        for parameter in matcher.model.parameters():
            parameter.fill_(3e38)
    return matcher


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.score(PAIRS), id="c4-nonfinite-outputs-score"),
        pytest.param(lambda m: m.rank("w1 w2", ["w3", "w4 w5"]), id="c4-nonfinite-outputs-rank"),
        pytest.param(lambda m: m.classify(PAIRS), id="c4-nonfinite-outputs-classify"),
    ],
)
def test_non_finite_outputs_never_reach_the_user(call: Callable[[Matcher], Any]) -> None:
    matcher = _overflowing(Task(kind="classification", class_names=("no", "yes")), 2)
    with pytest.raises(ValueError) as info:
        call(matcher)
    assert_clear_exception(info.value, "non-finite", "pair 0", "re-train")


@case("c4-cli-score-outputs-overflow")
def test_a_saved_model_whose_outputs_overflow_on_the_command_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _overflowing(Task(kind="ranking"), 1).save(tmp_path / "model")  # finite: it loads
    (pairs := tmp_path / "pairs.tsv").write_text("w1 w2\tw3\nw4\tw5\n", encoding="utf-8")
    outcome = run_cli(["score", path, pairs, "--format", "tsv"], capsys)
    assert_clear_error(outcome, str(path), "non-finite", "pair 0")
    assert outcome.stdout == ""


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        pytest.param(
            lambda m: m.rank("w1", "w2 w3"), "not one string", id="c4-rank-candidates-one-string"
        ),
        pytest.param(
            lambda m: m.rank("w1", ["w2", 3]), "candidate 1", id="c4-rank-candidate-not-a-string"
        ),
        pytest.param(
            lambda m: m.rank("w1", ["w2"], top_k=-1), "top_k", id="c4-rank-top-k-negative"
        ),
        pytest.param(
            lambda m: m.score([("w1", "w2"), ("w3",)]), "pair 1", id="c4-score-pair-of-one"
        ),
        pytest.param(lambda m: m.explain("w1", None), "right", id="c4-explain-right-not-a-string"),
    ],
)
def test_odd_arguments_are_one_error(call: Callable[[Matcher], Any], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        call(_matcher())
    assert_clear_exception(info.value, needle)


@pytest.mark.parametrize(
    ("task", "label", "needle"),
    [
        pytest.param(
            Task(kind="regression", min_score=0, max_score=5),
            math.nan,
            "finite",
            id="c4-calibration-nan-label",
        ),
        pytest.param(
            Task(kind="regression", min_score=0, max_score=5),
            7,
            "score range",
            id="c4-calibration-label-out-of-range",
        ),
        pytest.param(
            Task(kind="classification", class_names=("no", "yes")),
            2,
            "class index",
            id="c4-calibration-label-not-a-class",
        ),
    ],
)
def test_calibration_labels_must_be_labels(task: Task, label: float, needle: str) -> None:
    calibration = [
        ("caves", "caves form", 1),
        ("caves", "the alps", 0),
        ("ice", "ice melts", label),
    ]
    with pytest.raises(ValueError) as info:
        Matcher.from_lexical("overlap", task=task, calibration=calibration)
    assert_clear_exception(info.value, "calibration pair 2", needle)


# --------------------------------------------------------------------------- word vectors


@pytest.fixture
def _no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.usefixtures("_no_cache")
@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        pytest.param(
            "a 1 2 3\nb 1 2\nc 1 2 3\n",
            2,
            "expected a word and 3 numbers",
            id="c4-vectors-line-of-another-dimension",
        ),
        pytest.param(
            "a 1 2 3\nb 1 2 3 4\n", 2, "got 4", id="c4-vectors-line-with-a-number-too-many"
        ),
        pytest.param("a 1 2 3\nb 1 x 3\n", 2, "not a number: 'x'", id="c4-vectors-not-a-number"),
        pytest.param("a 1 2 3\nb 1 nan 3\n", 2, "non-finite", id="c4-vectors-nan"),
        pytest.param("a 1 2 3\nb inf 2 3\n", 2, "non-finite", id="c4-vectors-infinity"),
        pytest.param("a 1 2 3\nb 1 2 4e38\n", 2, "float32", id="c4-vectors-beyond-float32"),
        pytest.param(
            "a 1  2 3\nb 1 2 3\n", 1, "two spaces", id="c7-vectors-empty-field-on-the-first-line"
        ),
    ],
)
def test_a_malformed_vectors_line_names_file_and_line(
    tmp_path: Path, body: str, line: int, needle: str
) -> None:
    (path := tmp_path / "vectors.txt").write_text(body, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        build_embedding_matrix(path, Vocab(["<pad>", "<unk>", "a", "b"]), use_cache=False)
    assert_clear_exception(info.value, f"{path}: line {line}", needle)


@pytest.mark.usefixtures("_no_cache")
@pytest.mark.parametrize(
    ("body", "hint"),
    [
        pytest.param("x 1 2\ny 3 4\n", "language", id="c4-vectors-cover-no-word"),
        pytest.param("A 1 2\nB 3 4\n", "lowercase", id="c4-vectors-cover-no-word-cased"),
    ],
)
def test_vectors_that_cover_no_word_are_refused(tmp_path: Path, body: str, hint: str) -> None:
    (path := tmp_path / "vectors.txt").write_text(body, encoding="utf-8")
    vocab = Vocab(["<pad>", "<unk>", "a", "b"])
    for use_cache in (False, True):  # the cached alignment is refused alike
        with pytest.raises(ValueError) as info:
            build_embedding_matrix(path, vocab, use_cache=use_cache)
        assert_clear_exception(info.value, str(path), "none of the 2 words", hint)


@pytest.mark.usefixtures("_no_cache")
@case("c4-vectors-cover-few-words-warn")
def test_vectors_that_cover_few_words_warn(case: str, tmp_path: Path) -> None:
    (path := tmp_path / "vectors.txt").write_text("a 1 2\nz 3 4\n", encoding="utf-8")
    vocab = Vocab(["<pad>", "<unk>", "a", "b", "c", "d"])
    with pytest.warns(LowCoverageWarning, match=r"only 1 of the 4 words of the vocabulary .25%"):
        build_embedding_matrix(path, vocab)
    with pytest.warns(LowCoverageWarning):  # from the cache too
        build_embedding_matrix(path, vocab)
    half = Vocab(["<pad>", "<unk>", "a", "z"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowCoverageWarning)
        build_embedding_matrix(path, half)  # 100%: no warning
    assert embeddings.LOW_COVERAGE == 0.5


@case("c8-vectors-byte-order-mark")
def test_a_vectors_file_with_a_byte_order_mark(case: str, tmp_path: Path) -> None:
    (path := tmp_path / "vectors.txt").write_bytes("\ufeffa 1 2\nb 3 4\n".encode())
    assert load_word_vectors(path).words == ["a", "b"]


# --------------------------------------------------------------------------- encoders


def _encoder_folder(path: Path, config: Any) -> Path:
    """An encoder folder's config.json (and a weights file) for the readers that need no more."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    safetensors.torch.save_file({"weight": torch.zeros(1, 1)}, str(path / "model.safetensors"))
    return path


@case("c2-encoder-config-nested-deep")
def test_an_encoder_config_nested_deep(case: str, tmp_path: Path) -> None:
    path = _encoder_folder(tmp_path / "encoder", {})
    (path / "config.json").write_text(_nested(100_000), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        encoders.read_config(path)
    assert_clear_exception(info.value, str(path / "config.json"), "nested")


@case("c2-encoder-config-field-wrong-type")
def test_an_encoder_config_field_of_the_wrong_type(case: str, tmp_path: Path) -> None:
    config = {"model_type": "bert", "hidden_size": "8", "vocab_size": 40}
    path = _encoder_folder(tmp_path / "encoder", config)
    with pytest.raises(ValueError) as info:
        encoders.read_config(path)
    assert_clear_exception(info.value, str(path / "config.json"), "hidden_size")


@case("c2-encoder-weights-truncated")
def test_an_encoder_weights_file_truncated(case: str, tmp_path: Path) -> None:
    path = _encoder_folder(tmp_path / "encoder", {})
    raw = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError) as info:
        encoders.load_weights(torch.nn.Linear(1, 1), path)
    assert_clear_exception(info.value, str(path / "model.safetensors"), "safetensors")


# --------------------------------------------------------------------------- side effects


def _flushes_denormals() -> bool:
    return bool((torch.tensor([1e-39]) * 0.5)[0] == 0)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _globals(loggers: list[str]) -> dict[str, Any]:
    """Every process-wide setting a library could change by accident."""
    return {
        "torch threads": torch.get_num_threads(),
        "torch interop threads": torch.get_num_interop_threads(),
        "flush denormals": _flushes_denormals(),
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "anomaly mode": torch.is_anomaly_enabled(),
        "default dtype": torch.get_default_dtype(),
        "default device": str(torch.get_default_device()),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "matmul precision": torch.get_float32_matmul_precision(),
        "torch print options": repr(vars(torch._tensor_str.PRINT_OPTS)),
        "torch random state": torch.random.get_rng_state().tolist(),
        "numpy random state": np.random.get_state()[1].tolist(),
        "python random state": random.getstate(),
        "numpy errors": np.geterr(),
        "numpy print options": np.get_printoptions(),
        "environment": dict(os.environ),
        "warnings filters": list(warnings.filters),
        "logging disabled": logging.root.manager.disable,
        "loggers": {
            name: (lg.level, len(lg.handlers), lg.propagate, lg.disabled)
            for name in loggers
            if isinstance(lg := logging.getLogger(name), logging.Logger)
        },
        "umask": _umask(),
        "recursion limit": sys.getrecursionlimit(),
        "working directory": os.getcwd(),
    }


def _fit(tmp: Path) -> object:
    pairs = [(f"q{i % 3} w{i}", f"a{i} w{i % 4}", i % 2) for i in range(12)]
    return fit(pairs, model="cbow_mlp", inputs="random", epochs=1, task="classification")


OPERATIONS: dict[str, Callable[[Path, Path], object]] = {
    "c8-globals-load": lambda saved, tmp: Matcher.load(saved),
    "c8-globals-score": lambda saved, tmp: Matcher.load(saved).score(PAIRS),
    "c8-globals-rank": lambda saved, tmp: Matcher.load(saved).rank("w1 w2", ["w3", "w4"]),
    "c8-globals-explain": lambda saved, tmp: Matcher.load(saved).explain("w1 w2", "w3"),
    "c8-globals-save": lambda saved, tmp: Matcher.load(saved).save(tmp / "again"),
    "c8-globals-fit": lambda saved, tmp: _fit(tmp),
    "c8-globals-lexical": lambda saved, tmp: Matcher.from_lexical("bm25").rank("a", ["a b"]),
}


@pytest.mark.parametrize("operation", [pytest.param(v, id=k) for k, v in OPERATIONS.items()])
def test_a_matcher_changes_no_global_setting(
    saved: Path, tmp_path: Path, operation: Callable[[Path, Path], object]
) -> None:
    # A first run imports what the operation needs (modules add their own loggers, once).
    operation(saved, tmp_path / "warm")
    loggers = ["", *logging.root.manager.loggerDict]
    torch.manual_seed(1234)  # a state the caller set, to find it unchanged
    before = _globals(loggers)
    operation(saved, tmp_path)
    after = _globals(loggers)
    changed = [key for key in before if before[key] != after[key]]
    assert not changed, changed


@case("c8-config-byte-order-mark")
def test_a_config_with_a_byte_order_mark_loads(case: str, saved: Path, tmp_path: Path) -> None:
    path = _copy(saved, tmp_path)
    raw = (path / "config.json").read_bytes()
    (path / "config.json").write_bytes(b"\xef\xbb\xbf" + raw)
    np.testing.assert_array_equal(Matcher.load(path).score(PAIRS), Matcher.load(saved).score(PAIRS))


# --------------------------------------------------------------------------- fuzzing


FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
DELETE = object()


def _loads_or_names_the_directory(path: Path) -> None:
    """The property: a Matcher whose scores are finite, or one clear error naming `path`."""
    try:
        matcher = Matcher.load(path)
        scores = matcher.score(PAIRS)
    except (ValueError, OSError) as e:
        assert_clear_exception(e, str(path))
        return
    assert scores.shape == (len(PAIRS),) and np.isfinite(scores).all()


def _fresh(saved: Path, tmp_path: Path) -> Path:
    return _copy(saved, Path(tempfile.mkdtemp(dir=tmp_path)))


def _paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of a JSON object."""
    out = []
    if isinstance(value, dict):
        for key, child in value.items():
            out.append((*prefix, key))
            out.extend(_paths(child, (*prefix, key)))
    return out


@pytest.fixture(scope="module")
def header_paths(saved: Path) -> list[tuple[str, ...]]:
    return _paths(json.loads((saved / "config.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    "case", [pytest.param("c2-fuzz-config-fields", id="c2-fuzz-config-fields")]
)
@FUZZ
@given(data=st.data())
def test_fuzz_config_fields(
    saved: Path, tmp_path: Path, header_paths: list[tuple[str, ...]], case: str, data: st.DataObject
) -> None:
    path = _fresh(saved, tmp_path)
    header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        key_path = data.draw(st.sampled_from(header_paths))
        parent = header
        for key in key_path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        value = data.draw(st.one_of(JSON, st.just(DELETE)))
        if value is DELETE:
            parent.pop(key_path[-1], None)
        else:
            parent[key_path[-1]] = value
    (path / "config.json").write_text(json.dumps(header), encoding="utf-8")
    _loads_or_names_the_directory(path)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, id=f"c2-fuzz-{n}-values")
        for n in ("config.json", "vocab.json", "metrics.json")
    ],
)
@FUZZ
@given(value=JSON, raw=st.booleans(), junk=st.binary(max_size=64))
def test_fuzz_json_files(
    saved: Path, tmp_path: Path, name: str, value: Any, raw: bool, junk: bytes
) -> None:
    path = _fresh(saved, tmp_path)
    if raw:
        (path / name).write_bytes(junk)
    elif name == "vocab.json" and isinstance(value, list):
        (path / name).write_text(
            json.dumps({"format": "attnmatch.vocab/1", "tokens": ["<pad>", "<unk>", *value]})
        )
    else:
        (path / name).write_text(json.dumps(value), encoding="utf-8")
    _loads_or_names_the_directory(path)


@pytest.mark.parametrize(
    "case", [pytest.param("c2-fuzz-weights-bytes", id="c2-fuzz-weights-bytes")]
)
@FUZZ
@given(data=st.data())
def test_fuzz_weights_bytes(saved: Path, tmp_path: Path, case: str, data: st.DataObject) -> None:
    path = _fresh(saved, tmp_path)
    raw = bytearray((path / "model.safetensors").read_bytes())
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    for _ in range(data.draw(st.integers(0, 8))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    (path / "model.safetensors").write_bytes(bytes(raw))
    _loads_or_names_the_directory(path)


def test_the_loader_reads_what_save_writes_unchanged(saved: Path, tmp_path: Path) -> None:
    """The strict reader accepts every file `Matcher.save` writes, and save writes the same
    files again (the golden format does not move)."""
    again = Matcher.load(saved).save(tmp_path / "again")
    for name in ("config.json", "vocab.json"):
        assert (again / name).read_bytes() == (saved / name).read_bytes(), name
    # safetensors orders the names of tied tensors in its metadata as a set iterates: compare
    # the tensors and the metadata, not the bytes.
    with (
        safetensors.safe_open(again / "model.safetensors", "pt") as new,
        safetensors.safe_open(saved / "model.safetensors", "pt") as old,
    ):
        assert new.metadata() == old.metadata() and set(new.keys()) == set(old.keys())
        for key in old.keys():
            assert torch.equal(new.get_tensor(key), old.get_tensor(key)), key
    assert model_dir.is_model_dir(again)


@case("c4-metrics-json-holding-nan")
def test_metrics_json_holding_nan_is_refused(saved: Path, tmp_path: Path, case: str) -> None:
    path = _copy(saved, tmp_path)
    (path / "metrics.json").write_text('{"dev": {"pearson": NaN}}', encoding="utf-8")
    with pytest.raises(ValueError) as info:
        Matcher.load(path)
    assert_clear_exception(info.value, "metrics.json", "NaN", "strict JSON")


@case("c2-score-takes-a-generator")
def test_score_takes_a_generator_as_fit_does(saved: Path, case: str) -> None:
    matcher = Matcher.load(saved)
    pairs = [("w1 w2", "w3"), ("w4", "w5 w6")]
    np.testing.assert_array_equal(matcher.score(p for p in pairs), matcher.score(pairs))
    assert matcher.score(iter([])).shape == (0,)


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        pytest.param("v.txt.gz", b"the 0.1 0.2\n", "not valid gzip", id="c7-vectors-not-gzip"),
        pytest.param(
            "v.txt.gz",
            gzip.compress("".join(f"w{i} {i / 7:.5f} {i / 3:.5f}\n" for i in range(2000)).encode())[
                :1000
            ],
            "cut short",
            id="c7-vectors-gzip-truncated",
        ),
        pytest.param("v.zip", b"PK\x03\x04 not a zip", "not a valid zip", id="c7-vectors-bad-zip"),
    ],
)
def test_broken_word_vector_archives_name_the_file(
    tmp_path: Path, name: str, data: bytes, needle: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValueError) as info:
        load_word_vectors(path)
    assert_clear_exception(info.value, str(path), needle)
