"""Training checkpoints: a model directory plus optimizer and trainer state, written atomically.

checkpoint/
  model/                 a complete model directory (`Matcher.save`, `attnmatch.model_dir`):
    config.json            model type, model config, task, inputs
    model.safetensors      the weights
    vocab.json             word-vector inputs' vocabulary (transformer inputs: tokenizer.json)
  optimizer.pt           `torch.save` of the optimizer's state_dict (tensors and plain Python
                         values; loaded with weights_only=True onto the CPU)
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

import safetensors.torch
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
        torch.save(optimizer.state_dict(), buffer)
        (tmp / "optimizer.pt").write_bytes(buffer.getvalue())
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def load_checkpoint(path: Path, model: torch.nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """Loads `path/model/model.safetensors` into `model` (strictly: every key must match).

    Only the weights are read from the model directory; its config.json and vocabulary are not
    (the caller has built `model` already).

    Returns:
        (the optimizer's state_dict from optimizer.pt, the trainer state from
        trainer_state.json).

    Raises:
        FileNotFoundError: model/model.safetensors, optimizer.pt or trainer_state.json is
            missing.
    """
    for name in ("model/model.safetensors", "optimizer.pt", STATE_FILE):
        if not (path / name).is_file():
            raise FileNotFoundError(f"incomplete checkpoint: {path / name} is missing")
    safetensors.torch.load_model(model, str(path / "model" / "model.safetensors"), strict=True)
    optim_state = torch.load(path / "optimizer.pt", weights_only=True, map_location="cpu")
    state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    return optim_state, state
