"""The model folder of a lexical matcher (`Matcher.from_lexical`): saved and loaded as any model.

A lexical matcher has no weights; what decides its outputs is its kind, its zero-shot head
(`attnmatch.zero_shot.ScoreHead`: three numbers) and the background corpus its BM25 and IDF
statistics read (`LexicalScorer.fit`). The folder is a model directory (`attnmatch.model_dir`,
format `attnmatch.model/2`) holding:

    config.json        model_type: "overlap", "bm25" or "idf_overlap"; config: the head
                       {"num_outputs", "scale", "shift"}; task; inputs: the corpus file's record
                       {"kind": "lexical", "file", "texts", "bytes", "sha256"}
    model.safetensors  no tensors (the layout every model folder has, so that the commands,
                       `Matcher.load` and a run folder's checks read it like any other)
    corpus.jsonl       the background texts, one JSON string a line, in order
    metrics.json, README.md  as for any model directory

Reading follows docs/robustness.md ("Files read back"): corpus.jsonl is checked against its
record in config.json (size, then sha256, then the count of texts), and a folder changed after
saving is refused in one line naming the file and what differs. A JSON float round-trips
exactly, so the head loaded scores exactly as the head saved.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnmatch import model_dir
from attnmatch.strict_json import read_bytes
from attnmatch.tasks import Task
from attnmatch.zero_shot import ScoreHead

if TYPE_CHECKING:
    from attnmatch.lexical import LexicalModel

# `attnmatch.lexical.LEXICAL_KINDS`, named here so that loading any other model folder does
# not import the lexical scorers (and BM25's package) at all.
MODEL_TYPES = ("bm25", "overlap", "idf_overlap")
CORPUS_FILE = "corpus.jsonl"
INPUTS_KIND = "lexical"
_HEAD_KEYS = ("num_outputs", "scale", "shift")
_INPUT_KEYS = ("kind", "file", "texts", "bytes", "sha256")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_AGAIN = "the folder was changed after it was saved: save the model again (Matcher.save)"


def is_lexical(model_type: str) -> bool:
    """Whether a model directory's `model_type` is a lexical matcher's."""
    return model_type in MODEL_TYPES


def save(model: LexicalModel, path: Path, task: Task, metrics: dict[str, Any] | None) -> Path:
    """Writes the model folder of a lexical matcher atomically (`model_dir.write`)."""
    head = model.head
    header = {
        "model_type": model.scorer.kind,
        "config": {"num_outputs": head.num_outputs, "scale": head.scale, "shift": head.shift},
        "task": task.to_dict(),
    }
    return model_dir.write(
        path,
        header=header,
        model=model,
        save_inputs=lambda folder: _write_corpus(model.scorer.background, folder),
        metrics=metrics,
    )


def _write_corpus(texts: tuple[str, ...], folder: Path) -> dict[str, Any]:
    """corpus.jsonl in `folder` (inside the atomic write), and its record for config.json."""
    data = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts).encode("utf-8")
    (folder / CORPUS_FILE).write_bytes(data)
    return {
        "kind": INPUTS_KIND,
        "file": CORPUS_FILE,
        "texts": len(texts),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def read(files: model_dir.ModelFiles) -> LexicalModel:
    """The lexical matcher of a model folder read by `model_dir.read`, every file checked
    (module docstring).

    Raises:
        FileNotFoundError: corpus.jsonl is missing (named).
        ValueError: config.json's head or corpus record is malformed, model.safetensors holds
            a tensor, or corpus.jsonl differs from its record (the file and what differs named).
    """
    from attnmatch.lexical import LexicalModel, LexicalScorer

    config_file = files.path / "config.json"
    head = _head(config_file, files.header["config"])
    record = _record(config_file, files.header["inputs"])
    if files.state:
        name = sorted(files.state)[0]
        raise ValueError(
            f"{files.path / 'model.safetensors'}: unexpected tensor {name!r}: a lexical "
            f"matcher has no weights; {_AGAIN}"
        )
    texts = _corpus(files.path / CORPUS_FILE, record)
    scorer = LexicalScorer(files.header["model_type"]).fit(texts)
    return LexicalModel(scorer, head)


def _head(config_file: Path, config: dict[str, Any]) -> ScoreHead:
    """config.json's `config`: the zero-shot head, every key known and of its type."""
    if sorted(config) != sorted(_HEAD_KEYS):
        raise ValueError(
            f"{config_file}: field 'config' of a lexical matcher must hold exactly "
            f"{', '.join(_HEAD_KEYS)}, got {sorted(config)}"
        )
    n = config["num_outputs"]
    if isinstance(n, bool) or n not in (1, 2):
        raise ValueError(f"{config_file}: field 'config.num_outputs' must be 1 or 2, got {n!r}")
    for key in ("scale", "shift"):
        value = config[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(
                f"{config_file}: field 'config.{key}' must be a finite number, got {value!r}"
            )
    if config["scale"] == 0:
        raise ValueError(f"{config_file}: field 'config.scale' must not be 0")
    return ScoreHead(num_outputs=n, scale=float(config["scale"]), shift=float(config["shift"]))


def _record(config_file: Path, inputs: dict[str, Any]) -> dict[str, Any]:
    """config.json's `inputs`: the record of corpus.jsonl, every key known and of its type."""
    if sorted(inputs) != sorted(_INPUT_KEYS) or inputs["kind"] != INPUTS_KIND:
        raise ValueError(
            f"{config_file}: field 'inputs' of a lexical matcher must be "
            f'{{"kind": "{INPUTS_KIND}", "file", "texts", "bytes", "sha256"}}, got '
            f"{sorted(inputs)}"
        )
    if inputs["file"] != CORPUS_FILE:
        raise ValueError(
            f"{config_file}: field 'inputs.file' must be {CORPUS_FILE!r}, got {inputs['file']!r}"
        )
    for key in ("texts", "bytes"):
        value = inputs[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                f"{config_file}: field 'inputs.{key}' must be an integer >= 0, got {value!r}"
            )
    if not isinstance(inputs["sha256"], str) or not _SHA256.fullmatch(inputs["sha256"]):
        raise ValueError(f"{config_file}: field 'inputs.sha256' must be 64 hex digits")
    return inputs


def _corpus(file: Path, record: dict[str, Any]) -> list[str]:
    """The texts of corpus.jsonl, checked against its record: size, sha256, then count."""
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} is missing, though config.json records it ({record['texts']:,} texts): "
            "not a complete model folder; save the model again (Matcher.save)"
        )
    data = read_bytes(file)
    if len(data) != record["bytes"]:
        raise ValueError(
            f"{file}: {len(data):,} bytes, config.json records {record['bytes']:,}: {_AGAIN}"
        )
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise ValueError(f"{file}: its sha256 differs from the one config.json records: {_AGAIN}")
    texts: list[str] = []
    lines = data.split(b"\n")[:-1]  # JSON escapes a newline: each one ends a text
    for number, line in enumerate(lines, start=1):
        try:
            text = json.loads(line.decode("utf-8"))
        except ValueError:  # not UTF-8, not JSON
            text = None
        if not isinstance(text, str):
            raise ValueError(f"{file}, line {number}: not a JSON string: {_AGAIN}")
        texts.append(text)
    if len(texts) != record["texts"]:
        raise ValueError(
            f"{file}: {len(texts):,} texts, config.json records {record['texts']:,}: {_AGAIN}"
        )
    return texts
