"""Training checkpoints: a model directory plus optimizer and trainer state, written atomically.

checkpoint/
  model/                 a complete model directory (`Matcher.save`, `attnmatch.model_dir`):
    config.json            model type, model config, task, inputs
    model.safetensors      the weights
    vocab.json             word-vector inputs' vocabulary (transformer inputs: tokenizer.json)
  optimizer.pt           `torch.save` of the optimizer's state_dict (CPU tensors and plain
                         Python values; loaded with weights_only=True onto the CPU, then onto
                         the parameters' device by the optimizer)
  trainer_state.json     the trainer's state dict as JSON (epoch, step, best score and epoch,
                         bad epochs, history, wall time, experiment config)

The whole folder is replaced at once (`atomic_directory`): a crash leaves the previous
checkpoint, never a half-written one.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import torch

from attnmatch.atomic import atomic_directory
from attnmatch.matcher import Matcher

STATE_FILE = "trainer_state.json"


def save_checkpoint(
    path: Path,
    *,
    matcher: Matcher,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
) -> None:
    """Writes the checkpoint folder `path` atomically (layout in the module docstring).

    Args:
        path: the checkpoint folder; an existing one is replaced as a whole.
        matcher: saved as the model directory `path/model` (config, weights, inputs' files).
        optimizer: its state_dict goes to `path/optimizer.pt`.
        state: JSON-serialisable trainer state, written to `path/trainer_state.json`.
    """
    with atomic_directory(path) as tmp:
        matcher.save(tmp / "model", metrics={})  # no metrics.json
        buffer = io.BytesIO()
        torch.save(_on_cpu(optimizer.state_dict()), buffer)
        (tmp / "optimizer.pt").write_bytes(buffer.getvalue())
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _on_cpu(value: Any) -> Any:
    """`value` (nested dicts and lists of tensors and plain values) with every tensor on the
    CPU: a checkpoint written on a GPU resumes anywhere."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_cpu(v) for v in value)
    return value


def load_checkpoint(path: Path, model: torch.nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """Loads the weights of `path/model` into `model` (strictly: every key and shape must
    match).

    Only the weights are read from the model directory; its config.json and vocabulary are
    checked but not used (the caller has built `model` already).

    Returns:
        (the optimizer's state_dict from optimizer.pt, the trainer state from
        trainer_state.json).

    Raises:
        FileNotFoundError: model/config.json, model/model.safetensors, optimizer.pt or
            trainer_state.json is missing.
        ValueError: one of them is damaged, or the weights do not fit `model` (the file
            named, in one line).
    """
    from attnmatch import model_dir

    for name in ("model/config.json", "model/model.safetensors", "optimizer.pt", STATE_FILE):
        if not (path / name).is_file():
            raise FileNotFoundError(
                f"incomplete checkpoint: {path / name} is missing {_START_AGAIN}"
            )
    state = read_json(path / STATE_FILE, _START_AGAIN)
    try:
        files = model_dir.read(path / "model")
        model_dir.load_weights(model, files)
    except ValueError as e:
        reason = " ".join(str(e).split())
        raise ValueError(
            f"cannot resume from {path}: {reason} (the checkpoint was made for another model "
            f"than this experiment's, or is damaged) {_START_AGAIN}"
        ) from None
    try:
        optim_state = torch.load(path / "optimizer.pt", weights_only=True, map_location="cpu")
    except Exception as e:  # torch raises several types for a damaged file
        reason = " ".join(str(e).split())[:200]
        raise ValueError(
            f"{path / 'optimizer.pt'}: not a readable optimizer state ({reason}) {_START_AGAIN}"
        ) from None
    if not isinstance(optim_state, dict):
        raise ValueError(f"{path / 'optimizer.pt'}: not an optimizer state {_START_AGAIN}")
    return optim_state, state


_START_AGAIN = "(train again with --overwrite, or into another folder)"


def read_json(path: Path, hint: str) -> dict[str, Any]:
    """A JSON object read from `path`; a damaged file is one line naming it, its line and
    `hint` (what to do).

    Raises:
        ValueError: not UTF-8, not JSON, or not an object.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason}) {hint}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}, line {e.lineno}: invalid JSON ({e.msg}) {hint}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object {hint}")
    return data
