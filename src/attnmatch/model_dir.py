"""The model directory format: what `Matcher.save` writes and `Matcher.load` reads, strictly.

    config.json        format, attnmatch version, model type, model config, task, inputs
    model.safetensors  weights (no pickle anywhere; a transformer encoder's weights included)
    vocab.json         word-vector inputs: the vocabulary, or
    tokenizer.json     transformer inputs: the sub-word tokenizer (Hugging Face format)
    metrics.json       how the model was trained and evaluated (optional)
    README.md          the model card, generated from config.json and metrics.json
                       (`attnmatch.model_card`; Hugging Face Hub metadata), never read back

Writes are atomic: the folder appears complete or not at all. Every file is strict JSON (a
metric that is not a finite number is written as null). Directories of the first format
(`attnmatch.model/1`) are migrated on load (`_migrate_v1`); any other format is refused with
one line that names it.

Reading is strict and every refusal is one line naming the file (and the field or tensor): a
file that is not UTF-8 (a UTF-8 byte order mark is accepted), not JSON, nested deeper than
`MAX_JSON_DEPTH`, a field of the wrong type, a weights file that is damaged or truncated, a
tensor missing, unexpected, of another shape or dtype than the model config gives it, or holding
NaN or infinity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from attnmatch import __version__, configs, model_card
from attnmatch.atomic import atomic_directory, write_text_atomic
from attnmatch.inputs import migrate_v1
from attnmatch.model_header import FORMAT, FORMAT_V1
from attnmatch.strict_json import MAX_JSON_DEPTH as MAX_JSON_DEPTH  # the depth read_json allows
from attnmatch.strict_json import dumps_json, read_bytes, read_json
from attnmatch.tasks import migrate_v1_task

_KEYS = {"format", "attnmatch_version", "model_type", "config", "task", "inputs"}
_KEYS_OPTIONAL = frozenset({"features"})  # {"overlap": idf size}: `nn.overlap` features
_KEYS_V1 = {"format", "attnmatch_version", "model_type", "config", "task", "tokenizer"}
_KEYS_V1_OPTIONAL = {"label_space"}
# The JSON type each config.json field must have (None: JSON null allowed too).
_TYPES: dict[str, tuple[type, ...]] = {
    "attnmatch_version": (str,),
    "model_type": (str,),
    "config": (dict,),
    "task": (dict,),
    "inputs": (dict,),
    "features": (dict,),
}
_TYPES_V1: dict[str, tuple[type, ...]] = {
    "attnmatch_version": (str,),
    "model_type": (str,),
    "config": (dict,),
    "task": (str,),
    "tokenizer": (dict, type(None)),
    "label_space": (dict, type(None)),
}
"""Deepest nesting of lists and objects read from a model directory's JSON files (ours nest
at most 4 levels): deeper is refused, naming the file, before anything recurses into it."""


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
        _save_weights(model, tmp / "model.safetensors")
        if metrics:
            (tmp / "metrics.json").write_text(_metrics_json(metrics), encoding="utf-8")
        card = model_card.render(full, json.loads(_metrics_json(metrics or {})))
        (tmp / model_card.FILE).write_text(card, encoding="utf-8")
    return path


def _save_weights(model: nn.Module, file: Path) -> None:
    """model.safetensors, written from CPU tensors whatever device the model is on.

    On the CPU, `safetensors.torch.save_model` (tied weights saved once, the others named in
    the metadata). On a GPU, cuDNN packs a recurrent layer's weights into one buffer, which
    `save_model` refuses as partly shared storage: each distinct tensor is copied to the CPU
    once, so that tied names still share one copy, and the tied names are dropped as
    `save_model` drops them (the first name in sorted order kept).
    """
    state = model.state_dict()
    if all(t.device.type == "cpu" for t in state.values()):
        safetensors.torch.save_model(model, str(file), metadata={"format": "pt"})
        return
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, tensor in state.items():
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tensor.shape, tensor.stride())
        groups.setdefault(key, []).append(name)
    weights: dict[str, torch.Tensor] = {}
    metadata = {"format": "pt"}
    for names in groups.values():
        kept, *tied = sorted(names)
        weights[kept] = state[kept].detach().to("cpu").contiguous()
        metadata.update({name: kept for name in tied})
    safetensors.torch.save_file(weights, str(file), metadata=metadata)


def write_metrics(path: str | Path, metrics: dict[str, Any]) -> None:
    """Replaces a model directory's metrics.json, then its model card, atomically each."""
    path, text = Path(path), _metrics_json(metrics)
    write_text_atomic(path / "metrics.json", text)
    card = model_card.render(read_json(path / "config.json"), json.loads(text))
    write_text_atomic(path / model_card.FILE, card)


def _metrics_json(metrics: dict[str, Any]) -> str:
    """Strict JSON (RFC 8259 has no NaN or infinity): a metric that is not a finite number
    (the Pearson correlation of constant predictions) is written as null."""
    return dumps_json(metrics, indent=2) + "\n"


def read(path: str | Path) -> ModelFiles:
    """Reads and checks a model directory (every key known and of its type, the format current
    or migrated, the weights file readable).

    Raises:
        FileNotFoundError: the directory or one of its files is missing (named).
        NotADirectoryError, IsADirectoryError: the directory is a file, or one of its files a
            folder (named).
        OSError: a file cannot be read (named).
        ValueError: config.json or metrics.json is malformed, of an unknown format, has
            unknown, missing or wrongly typed fields, or model.safetensors is damaged (the
            file named, and the field).
    """
    path = Path(path)
    _check_layout(path)
    config_path = path / "config.json"
    header = read_json(config_path)
    if not isinstance(header, dict):
        raise ValueError(
            f"{config_path}: not an attnmatch model (expected a JSON object, got "
            f"{_json_type(header)})"
        )
    fmt = header.get("format")
    if fmt not in (FORMAT, FORMAT_V1):  # checked first: a later format may store weights otherwise
        raise ValueError(
            f"{config_path}: model format {fmt!r} is not one this attnmatch "
            f"({__version__}) reads ({FORMAT}, or {FORMAT_V1} migrated on load): re-train the "
            "model or load it with the attnmatch version that wrote it"
        )
    v1 = fmt == FORMAT_V1
    _check_keys(
        config_path,
        header,
        *((_KEYS_V1, _KEYS_V1_OPTIONAL) if v1 else (_KEYS, _KEYS_OPTIONAL)),
    )
    _check_types(config_path, header, _TYPES_V1 if v1 else _TYPES)
    if "features" in header:
        _check_features(config_path, header["features"])
    metrics: dict[str, Any] = {}
    if (path / "metrics.json").exists():
        metrics = read_json(path / "metrics.json")
        if not isinstance(metrics, dict):
            raise ValueError(
                f"{path / 'metrics.json'}: expected a JSON object, got {_json_type(metrics)}"
            )
    state = _read_weights(path / "model.safetensors")
    if v1:
        try:
            header, state = _migrate_v1(header, state, metrics)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise ValueError(
                f"{config_path}: cannot migrate this {FORMAT_V1} model directory ({reason})"
            ) from e
    return ModelFiles(path, header, state, metrics)


def is_model_dir(path: Path) -> bool:
    """Whether `path` looks like an attnmatch model directory (config.json names our format)."""
    try:
        header = read_json(Path(path) / "config.json")
    except (OSError, ValueError):
        return False
    return isinstance(header, dict) and str(header.get("format", "")).startswith("attnmatch.")


def check_weights(model: nn.Module, files: ModelFiles) -> None:
    """Checks that the directory's weights fit `model` (which may live on the meta device):
    every parameter and persistent buffer is in the file (or is the same tensor as one that
    is, as tied weights are saved once) with its shape and dtype, the file holds nothing
    else, and every floating-point value is finite.

    Raises:
        ValueError: a tensor is missing, unexpected, of another shape or dtype, or holds NaN
            or infinity (the file and the tensor named).
    """
    file = files.path / "model.safetensors"
    own = model.state_dict(keep_vars=True)
    aliases = _aliases(model)
    saved = set(files.state)
    missing = [k for k in own if not (aliases.get(k, {k}) & saved)]
    unexpected = sorted(saved - set(own))
    if missing:
        raise ValueError(
            f"{file}: tensor {missing[0]!r} is missing{_more(missing)}; the model config in "
            f"config.json needs it: the two files do not belong together (save the model again)"
        )
    if unexpected:
        raise ValueError(
            f"{file}: unexpected tensor {unexpected[0]!r}{_more(unexpected)}, which the model "
            "config in config.json does not have: the two files do not belong together (save "
            "the model again)"
        )
    for name, tensor in files.state.items():
        expected = own[name]
        if tuple(tensor.shape) != tuple(expected.shape):
            raise ValueError(
                f"{file}: tensor {name!r} has shape {list(tensor.shape)}, but the model config "
                f"in config.json gives it shape {list(expected.shape)}"
            )
        if tensor.dtype != expected.dtype:
            raise ValueError(
                f"{file}: tensor {name!r} is {_dtype(tensor.dtype)}, expected "
                f"{_dtype(expected.dtype)}"
            )
        if (tensor.is_floating_point() or tensor.is_complex()) and not _all_finite(tensor):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"{file}: tensor {name!r} holds {bad} non-finite value(s) (NaN or infinity): "
                "the training diverged or the file is damaged; re-train the model"
            )


def _all_finite(tensor: torch.Tensor) -> bool:
    """Whether every value of a floating-point or complex tensor is finite. A sum is finite
    only if every term is (a NaN or an infinity makes it NaN or infinite), so one reduction
    answers for a healthy tensor; a sum that is not finite (a NaN, an infinity, or finite
    values whose sum overflows) is settled value by value."""
    return bool(torch.isfinite(tensor.sum())) or bool(torch.isfinite(tensor).all())


def load_weights(model: nn.Module, files: ModelFiles) -> None:
    """Loads the directory's weights into `model` strictly (`check_weights` first).

    Raises:
        ValueError: a weight is missing, unexpected, of another shape or dtype, or not finite
            (named).
    """
    check_weights(model, files)
    model.load_state_dict(files.state, strict=False)  # tied weights: one name is enough


def _check_layout(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"model directory not found: {path}")
    if not path.is_dir():
        raise NotADirectoryError(
            f"{path} is a file, not a model directory (a folder holding config.json and "
            "model.safetensors, as Matcher.save and attnmatch train write it)"
        )
    for name in ("config.json", "model.safetensors"):
        file = path / name
        if not file.exists():
            raise FileNotFoundError(f"{file} is missing: not a complete attnmatch model directory")
        if not file.is_file():
            raise IsADirectoryError(
                f"{file} is not a regular file: not a complete attnmatch model directory"
            )


def _read_weights(file: Path) -> dict[str, torch.Tensor]:
    raw = read_bytes(file)
    if not raw:
        raise ValueError(f"{file}: the file is empty (0 bytes): not a readable safetensors file")
    try:
        return safetensors.torch.load(raw)
    except Exception as e:  # safetensors raises its own error types for a damaged file
        reason = " ".join(str(e).split())[:300]
        raise ValueError(
            f"{file}: not a readable safetensors file ({reason}): damaged or truncated, copy "
            "it again or re-train the model"
        ) from e


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _type_names(types: tuple[type, ...]) -> str:
    names = {dict: "an object", str: "a string", type(None): "null", list: "a list"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _check_keys(
    config_path: Path,
    header: dict[str, Any],
    required: set[str],
    optional: frozenset[str] | set[str] = frozenset(),
) -> None:
    unknown = set(header) - required - set(optional)
    if unknown:
        raise ValueError(f"{config_path}: unknown keys {sorted(unknown)}")
    missing = sorted(required - set(header))
    if missing:
        raise ValueError(
            f"{config_path}: missing key {missing[0]!r}{_more(missing)} (an attnmatch model's "
            f"config.json has {', '.join(sorted(required))})"
        )


def _check_types(
    config_path: Path, header: dict[str, Any], types: dict[str, tuple[type, ...]]
) -> None:
    for key, allowed in types.items():
        if key in header and not isinstance(header[key], allowed):
            raise ValueError(
                f"{config_path}: field {key!r} must be {_type_names(allowed)}, got "
                f"{_json_type(header[key])}"
            )


def _check_features(config_path: Path, features: dict[str, Any]) -> None:
    """`features`: {"overlap": the size of the idf table of `nn.overlap` features}."""
    if set(features) != {"overlap"}:
        raise ValueError(
            f"{config_path}: field 'features' must hold exactly the key 'overlap', got "
            f"{sorted(features)}"
        )
    size = features["overlap"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(
            f"{config_path}: field 'features.overlap' must be an integer >= 0, got {size!r}"
        )


def _aliases(model: nn.Module) -> dict[str, set[str]]:
    """State-dict name -> every name of the same parameter or buffer (tied weights, a module
    used twice)."""
    names: dict[int, set[str]] = {}
    by_name: dict[str, int] = {}
    tensors = [
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    ]
    for name, tensor in tensors:
        names.setdefault(id(tensor), set()).add(name)
        by_name[name] = id(tensor)
    return {name: names[key] for name, key in by_name.items()}


def _more(names: list[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _migrate_v1(
    header: dict[str, Any], state: dict[str, torch.Tensor], metrics: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A first-format directory in the current format.

    Format 1 kept the tokenizer beside the model config and the task as a name plus a label
    space; its input settings are migrated by `attnmatch.inputs.migrate_v1`.
    """
    experiment = metrics.get("experiment")
    embeddings = experiment.get("embeddings") if isinstance(experiment, dict) else None
    source = embeddings.get("source") if isinstance(embeddings, dict) else None
    vectors = source if isinstance(source, str) else "glove-6b-50d"
    inputs, config, state = migrate_v1(
        header["model_type"],
        dict(header["config"]),
        dict(header.get("tokenizer") or {}),
        dict(state),
        vectors=vectors,
    )
    space = dict(header.get("label_space") or {})
    task = migrate_v1_task(header["task"], space, config.get("num_outputs", 2))
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
    """A registered model's config (its `config`, a member every registered model has:
    `attnmatch.models.contract`) as JSON-ready data."""
    return configs.to_dict(model.config)
