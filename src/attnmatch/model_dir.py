"""The model directory: what `save_model` writes and `load_model` reads, strictly.

    config.json        format, attnmatch version, model type, model config, task, tokenizer,
                       label space (class names, or the regression score range)
    model.safetensors  weights (no pickle anywhere; a transformer encoder's weights included)
    vocab.json         the Vocab (word tokenizer), or
    tokenizer.json     the sub-word tokenizer of a transformer encoder (Hugging Face format)
    metrics.json       how the model was trained and evaluated (optional when saving)

Writes are atomic: the folder appears complete or not at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
from torch import nn

from attnmatch import __version__, configs
from attnmatch.atomic import atomic_directory, write_text_atomic
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import Vocab
from attnmatch.models import build_model, model_config_from_dict

FORMAT = "attnmatch.model/1"
_CONFIG_KEYS = {
    "format",
    "attnmatch_version",
    "model_type",
    "config",
    "task",
    "tokenizer",
    "num_classes",
    "label_space",
}


@dataclass
class LoadedModel:
    """A model with everything needed to feed it text."""

    model: nn.Module
    model_type: str
    task: str
    vocab: Vocab | None  # None with a sub-word tokenizer
    tokenizer: Tokenizer | SubwordTokenizer
    metrics: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    # What the outputs mean: {"class_names": [...]} (classification) or {"min_score",
    # "max_score"} (regression); empty for ranking.
    label_space: dict[str, Any] = field(default_factory=dict)


def save_model(
    path: str | Path,
    model: nn.Module,
    *,
    model_type: str,
    task: str,
    vocab: Vocab | None,
    tokenizer: Tokenizer | SubwordTokenizer,
    metrics: dict[str, Any] | None = None,
    label_space: dict[str, Any] | None = None,
) -> Path:
    """Writes a model directory atomically and returns its path.

    `vocab` goes with a word `Tokenizer`; a `SubwordTokenizer` is saved as tokenizer.json and
    takes no vocab.
    """
    path = Path(path)
    subword = isinstance(tokenizer, SubwordTokenizer)
    if not subword and vocab is None:
        raise ValueError("a word tokenizer needs its Vocab to be saved with the model")
    config = getattr(model, "config", None)
    if config is None:
        raise TypeError("the model has no `config` attribute: only registered models can be saved")
    header = {
        "format": FORMAT,
        "attnmatch_version": __version__,
        "model_type": model_type,
        "config": configs.to_dict(config),
        "task": task,
        "tokenizer": tokenizer.to_dict(),
        "label_space": label_space or {},
    }
    with atomic_directory(path) as tmp:
        (tmp / "config.json").write_text(json.dumps(header, indent=2) + "\n", encoding="utf-8")
        safetensors.torch.save_model(
            model, str(tmp / "model.safetensors"), metadata={"format": "pt"}
        )
        if isinstance(tokenizer, SubwordTokenizer):
            (tmp / "tokenizer.json").write_text(tokenizer.to_json(), encoding="utf-8")
        else:
            (tmp / "vocab.json").write_text(vocab.to_json(), encoding="utf-8")  # type: ignore[union-attr]
        if metrics is not None:
            (tmp / "metrics.json").write_text(
                json.dumps(metrics, indent=2) + "\n", encoding="utf-8"
            )
    return path


def write_metrics(path: str | Path, metrics: dict[str, Any]) -> None:
    """Replaces a model directory's metrics.json atomically."""
    write_text_atomic(Path(path) / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def load_model(path: str | Path, *, device: str = "cpu") -> LoadedModel:
    """Loads a model directory; every key must be known and every weight must match.

    Raises:
        FileNotFoundError: the directory or one of its files is missing (named).
        ValueError: config.json is malformed, of an unknown format, or has unknown keys.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory not found: {path}")
    for name in ("config.json", "model.safetensors"):
        if not (path / name).is_file():
            raise FileNotFoundError(
                f"{path / name} is missing: not a complete attnmatch model directory"
            )
    config_path = path / "config.json"
    try:
        header = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{config_path}: invalid JSON at line {e.lineno}: {e.msg}") from e
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{config_path}: not an attnmatch model (expected format {FORMAT!r})")
    unknown = set(header) - _CONFIG_KEYS
    if unknown:
        raise ValueError(f"{config_path}: unknown keys {sorted(unknown)}")
    tok_settings = dict(header.get("tokenizer") or {})
    subword = tok_settings.pop("kind", "word") == "subword"
    text_file = path / ("tokenizer.json" if subword else "vocab.json")
    if not text_file.is_file():
        raise FileNotFoundError(f"{text_file} is missing: not a complete attnmatch model directory")
    model_type = header["model_type"]
    config = model_config_from_dict(model_type, header["config"])
    model = build_model(model_type, config)
    missing, unexpected = safetensors.torch.load_model(
        model, str(path / "model.safetensors"), strict=True, device=device
    )
    del missing, unexpected  # strict=True raises on either
    model.eval()
    metrics: dict[str, Any] = {}
    if (path / "metrics.json").is_file():
        metrics = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
    return LoadedModel(
        model=model,
        model_type=model_type,
        task=header["task"],
        vocab=None if subword else Vocab.load(text_file),
        tokenizer=SubwordTokenizer.from_file(text_file, **tok_settings)  # type: ignore[arg-type]
        if subword
        else Tokenizer.from_dict(header["tokenizer"]),
        metrics=metrics,
        path=path,
        label_space=header.get("label_space", {}),
    )
