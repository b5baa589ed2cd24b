"""The model directory format: what `Matcher.save` writes and `Matcher.load` reads, strictly.

    config.json        format, attnmatch version, model type, model config, task, inputs
    model.safetensors  weights (no pickle anywhere; a transformer encoder's weights included)
    vocab.json         word-vector inputs: the vocabulary, or
    tokenizer.json     transformer inputs: the sub-word tokenizer (Hugging Face format)
    metrics.json       how the model was trained and evaluated (optional)

Writes are atomic: the folder appears complete or not at all. Directories of the first format
(`attnmatch.model/1`) are migrated on load (`_migrate_v1`); any other format is refused with
one line that names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from attnmatch import __version__, configs
from attnmatch.atomic import atomic_directory, write_text_atomic

FORMAT = "attnmatch.model/2"
FORMAT_V1 = "attnmatch.model/1"
_KEYS = {"format", "attnmatch_version", "model_type", "config", "task", "inputs"}
_KEYS_OPTIONAL = frozenset({"features"})  # {"overlap": idf size}: `nn.overlap` features
_KEYS_V1 = {"format", "attnmatch_version", "model_type", "config", "task", "tokenizer"}
_KEYS_V1_OPTIONAL = {"label_space"}


@dataclass
class ModelFiles:
    """What a model directory holds, read and checked (the weights not yet loaded)."""

    path: Path
    header: dict[str, Any]  # config.json, in the current format
    state: dict[str, torch.Tensor]
    metrics: dict[str, Any]


def write(
    path: Path,
    *,
    header: dict[str, Any],
    model: nn.Module,
    save_inputs: Any,
    metrics: dict[str, Any] | None,
) -> Path:
    """Writes a model directory atomically. `save_inputs(tmp_dir)` writes the inputs' files
    and returns the header's `inputs` entry.

    Raises:
        FileExistsError: `path` exists and is neither an empty folder nor a model directory
            (which is replaced as a whole): nothing else is ever deleted.
    """
    path = Path(path)
    if path.exists() and not (path.is_dir() and (is_model_dir(path) or not any(path.iterdir()))):
        raise FileExistsError(
            f"{path} exists and is not an attnmatch model directory: not replacing it "
            "(choose another path, or remove it first)"
        )
    with atomic_directory(path) as tmp:
        full = {"format": FORMAT, "attnmatch_version": __version__, **header}
        full["inputs"] = save_inputs(tmp)
        (tmp / "config.json").write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
        safetensors.torch.save_model(
            model, str(tmp / "model.safetensors"), metadata={"format": "pt"}
        )
        if metrics:
            (tmp / "metrics.json").write_text(
                json.dumps(metrics, indent=2) + "\n", encoding="utf-8"
            )
    return path


def write_metrics(path: str | Path, metrics: dict[str, Any]) -> None:
    """Replaces a model directory's metrics.json atomically."""
    write_text_atomic(Path(path) / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def read(path: str | Path) -> ModelFiles:
    """Reads and checks a model directory (every key known, the format current or migrated).

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
    if not isinstance(header, dict):
        raise ValueError(f"{config_path}: not an attnmatch model (expected a JSON object)")
    fmt = header.get("format")
    if fmt not in (FORMAT, FORMAT_V1):  # checked first: a later format may store weights otherwise
        raise ValueError(
            f"{config_path}: model format {fmt!r} is not one this attnmatch "
            f"({__version__}) reads ({FORMAT}, or {FORMAT_V1} migrated on load): re-train the "
            "model or load it with the attnmatch version that wrote it"
        )
    _check_keys(
        config_path,
        header,
        *((_KEYS_V1, _KEYS_V1_OPTIONAL) if fmt == FORMAT_V1 else (_KEYS, _KEYS_OPTIONAL)),
    )
    metrics: dict[str, Any] = {}
    if (path / "metrics.json").is_file():
        try:
            metrics = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path / 'metrics.json'}: invalid JSON at line {e.lineno}: {e.msg}"
            ) from e
    try:
        state = safetensors.torch.load_file(str(path / "model.safetensors"))
    except Exception as e:  # safetensors raises its own error types for a damaged file
        raise ValueError(
            f"{path / 'model.safetensors'}: not a readable safetensors file ({e})"
        ) from e
    if fmt == FORMAT_V1:
        header, state = _migrate_v1(header, state, metrics)
    return ModelFiles(path, header, state, metrics)


def is_model_dir(path: Path) -> bool:
    """Whether `path` looks like an attnmatch model directory (config.json names our format)."""
    try:
        header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(header, dict) and str(header.get("format", "")).startswith("attnmatch.")


def load_weights(model: nn.Module, files: ModelFiles) -> None:
    """Loads the directory's weights into `model` strictly: every parameter and buffer must be
    in the file (or share its storage with one that is, as tied weights are saved once), with
    its shape, and the file may hold nothing else.

    Raises:
        ValueError: a weight is missing, unexpected or of another shape (named).
    """
    file = files.path / "model.safetensors"
    own = model.state_dict()
    by_storage: dict[int, set[str]] = {}
    for name, tensor in own.items():
        by_storage.setdefault(tensor.data_ptr(), set()).add(name)
    try:
        missing, unexpected = model.load_state_dict(files.state, strict=False)
    except RuntimeError as e:  # a shape mismatch
        raise ValueError(f"{file}: weights do not fit the model config: {e}") from e
    missing = [k for k in missing if not (by_storage[own[k].data_ptr()] & set(files.state))]
    if missing or unexpected:
        raise ValueError(
            f"{file}: weights do not match the model config (missing {missing[:5]}, "
            f"unexpected {list(unexpected)[:5]})"
        )


def _check_keys(
    config_path: Path,
    header: dict[str, Any],
    required: set[str],
    optional: frozenset[str] | set[str] = frozenset(),
) -> None:
    unknown = set(header) - required - set(optional)
    if unknown:
        raise ValueError(f"{config_path}: unknown keys {sorted(unknown)}")
    missing = required - set(header)
    if missing:
        raise ValueError(f"{config_path}: missing keys {sorted(missing)}")


def _migrate_v1(
    header: dict[str, Any], state: dict[str, torch.Tensor], metrics: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A first-format directory in the current format.

    Format 1 kept the tokenizer beside the model config and the task as a name plus a label
    space; its input settings are migrated by `attnmatch.inputs.migrate_v1`.
    """
    from attnmatch.inputs import migrate_v1

    vectors = metrics.get("experiment", {}).get("embeddings", {}).get("source", "glove-6b-50d")
    inputs, config, state = migrate_v1(
        header["model_type"],
        dict(header["config"]),
        dict(header.get("tokenizer") or {}),
        dict(state),
        vectors=vectors,
    )
    task_name, space = header["task"], dict(header.get("label_space") or {})
    task: dict[str, Any] = {"kind": task_name}
    if task_name == "classification":
        num = int(config.get("num_outputs", 2))
        task["class_names"] = list(space.get("class_names") or [str(i) for i in range(num)])
    elif task_name == "regression":
        task["min_score"] = int(space.get("min_score", 0))
        task["max_score"] = int(space.get("max_score", 5))
    migrated = {
        "format": FORMAT,
        "attnmatch_version": header.get("attnmatch_version", ""),
        "model_type": header["model_type"],
        "config": config,
        "task": task,
        "inputs": inputs,
    }
    return migrated, state


def config_dict(model: nn.Module) -> dict[str, Any]:
    """A registered model's config as JSON-ready data."""
    config = getattr(model, "config", None)
    if config is None:
        raise TypeError("the model has no `config` attribute: only registered models can be saved")
    return configs.to_dict(config)
