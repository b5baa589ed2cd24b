"""Training checkpoints: a model directory plus optimizer and trainer state, written atomically.

checkpoint/
  config.json model.safetensors vocab.json   (a complete model directory)
  optimizer.pt                                (tensors only; loaded with weights_only=True)
  trainer_state.json                          (epoch, best score, history, experiment config)
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import safetensors.torch
import torch

from attnmatch.atomic import atomic_directory
from attnmatch.model_dir import save_model

STATE_FILE = "trainer_state.json"


def save_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    **model_dir_kwargs: Any,
) -> None:
    with atomic_directory(path) as tmp:
        save_model(tmp / "model", model, **model_dir_kwargs)
        buffer = io.BytesIO()
        torch.save(optimizer.state_dict(), buffer)
        (tmp / "optimizer.pt").write_bytes(buffer.getvalue())
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def load_checkpoint(path: Path, model: torch.nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """Loads a checkpoint's weights into `model` (strictly); returns (optimizer state, trainer state)."""
    for name in ("model/model.safetensors", "optimizer.pt", STATE_FILE):
        if not (path / name).is_file():
            raise FileNotFoundError(f"incomplete checkpoint: {path / name} is missing")
    safetensors.torch.load_model(model, str(path / "model" / "model.safetensors"), strict=True)
    optim_state = torch.load(path / "optimizer.pt", weights_only=True, map_location="cpu")
    state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    return optim_state, state
