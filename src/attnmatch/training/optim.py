"""The optimiser and its learning-rate schedule."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attnmatch.models.contract import token_encoder
from attnmatch.training.config import TrainConfig

_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def fused_adam_supported(params: list[nn.Parameter]) -> bool:
    """Whether PyTorch's fused Adam/AdamW kernel takes these parameters (real floating point,
    on CPU or CUDA). It computes the same update as the default per-tensor loop in one pass per
    tensor: ~8x faster per step on a 27M-parameter table on CPU (CDSSM's trigram layer)."""
    return bool(params) and all(
        p.dtype in _FUSED_DTYPES and p.device.type in ("cpu", "cuda") for p in params
    )


def make_optimizer(model: nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """The optimiser of `t`; Adam and AdamW use the fused kernel where it applies.

    With `t.encoder_lr`, the trainable parameters of the model's input layer (`token_encoder`,
    e.g. a fine-tuned transformer) form a second group whose rate is encoder_lr, decayed with lr.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": params}]
    if t.encoder_lr is not None:
        inside = {id(q) for q in token_encoder(model).parameters()}
        groups = [
            {"params": [q for q in params if id(q) not in inside]},
            {"params": [q for q in params if id(q) in inside], "lr_scale": t.encoder_lr / t.lr},
        ]
        groups = [g for g in groups if g["params"]]
        for g in groups:
            g["lr"] = t.lr * g.get("lr_scale", 1.0)
    fused = True if fused_adam_supported(params) else None
    if t.optimizer == "adam":
        return torch.optim.Adam(groups, lr=t.lr, weight_decay=t.weight_decay, fused=fused)
    if t.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=t.lr, weight_decay=t.weight_decay, fused=fused)
    if t.optimizer == "adadelta":
        return torch.optim.Adadelta(groups, lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.SGD(groups, lr=t.lr, weight_decay=t.weight_decay)


def learning_rate(t: TrainConfig, step: int, total_steps: int | None = None) -> float:
    """The learning rate of optimiser step `step` (0-based) in a run of `total_steps` steps.

    Linear warm-up over the first `warmup` fraction of the steps, then the staircase decay
    (lr * lr_decay ** (step // lr_decay_steps)) or, with lr_schedule "linear", a linear decay
    to 0 at the last step. Without warm-up and with the staircase schedule the rate does not
    depend on `total_steps`.
    """
    total = max(1, total_steps or 1)
    warm = int(t.warmup * total)
    if warm and step < warm:
        return t.lr * (step + 1) / warm
    if t.lr_schedule == "linear":
        return t.lr * max(0.0, (total - step) / max(1, total - warm))
    return t.lr * t.lr_decay ** (step // t.lr_decay_steps)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Sets every group's rate: `lr` (the decayed train.lr), scaled by encoder_lr / lr for the
    input layer's group."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
