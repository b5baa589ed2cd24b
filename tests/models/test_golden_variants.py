"""Golden outputs of every registered preset (the attention variants of every seed model:
aMV-LSTM's Q/A/Q+A gates, MP-CNN with attention, each IARNN variant, HCRN's ablations, DAMM's),
a golden of a short training trajectory, and a mutation test: a sign flip in each paper's
mechanism must fail its preset's golden.

The stored values live in `tests/golden/variants/<preset>.json` and
`tests/golden/training/<name>.json`; they change only on purpose: run
`ATTNMATCH_REGENERATE_GOLDEN=1 pytest tests/models/test_golden_variants.py` and commit the diff
with the reason (a numerics change, such as a float-rounding change to training, shows here).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from attnmatch.models import damm, hcrn, iarnn, list_presets, mpcnn, mvlstm
from attnmatch.nn.masking import masked_softmax

from . import test_golden
from .conftest import TINY
from .test_golden import GOLDEN, REGENERATE, golden_values

_TINY_MODEL = test_golden.tiny_model

VARIANTS = GOLDEN / "variants"
TRAINING = GOLDEN / "training"
PRETRAINED = {"minilm_bi_encoder", "minilm_cross_encoder", "minilm_zero_shot"}


def _check(values: dict[str, Any], path: Path, name: str) -> None:
    if REGENERATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=1) + "\n", encoding="utf-8")
        pytest.skip(f"regenerated {path.name}")
    assert path.is_file(), f"no golden file {path}: regenerate on purpose (see module docstring)"
    stored = json.loads(path.read_text(encoding="utf-8"))
    for key in stored:
        torch.testing.assert_close(
            torch.tensor(values[key], dtype=torch.float64),
            torch.tensor(stored[key], dtype=torch.float64),
            rtol=1e-5,
            atol=1e-6,
            msg=lambda m, key=key: f"{name}: {key} differs from the golden file: {m}",
        )


@pytest.mark.parametrize("preset", list_presets())
def test_golden_outputs_of_every_preset(preset: str) -> None:
    _check(golden_values(preset, {}), VARIANTS / f"{preset}.json", preset)


def test_every_preset_has_a_golden_file() -> None:
    if not REGENERATE:
        assert {p.stem for p in VARIANTS.glob("*.json")} == set(list_presets())
    assert set(TINY) >= {"mvlstm", "mpcnn", "iarnn", "hcrn", "damm"}


# ------------------------------------------------------------------------ training trajectory

TRAJECTORY_CONFIG = """
model = "amvlstm_q"
[model_overrides]
hidden_size = 8
k = 10
[data]
dataset = "pairs"
data_dir = "{fixture}"
[inputs]
kind = "word_vectors"
vectors = "random"
dim = 8
[train]
epochs = 3
batch_size = 4
num_negatives = 2
lr = 0.01
patience = 0
floors = "none"
threads = 1
seed = 7
"""


def trajectory(tmp_path: Path) -> dict[str, Any]:
    """Three epochs of aMV-LSTM (Q) on the tiny fixture at a fixed seed: each epoch's mean loss
    over its optimiser steps, the steps, and dev MAP."""
    from attnmatch.training.config import load_experiment
    from attnmatch.training.trainer import train

    fixture = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
    config = tmp_path / "tiny.toml"
    config.write_text(TRAJECTORY_CONFIG.format(fixture=fixture), encoding="utf-8")
    result = train(load_experiment(config), tmp_path / "run", progress=False)
    history = result.history
    return {
        "train_loss": [h["train_loss"] for h in history],
        "step": [h["step"] for h in history],
        "dev_map": [h["dev"]["map"] for h in history],
    }


def test_golden_training_trajectory(tmp_path: Path) -> None:
    _check(trajectory(tmp_path), TRAINING / "amvlstm_q_tiny.json", "training trajectory")


# ------------------------------------------------------------------------------------ mutations


def _gate_flipped(self: Any, x: torch.Tensor, mask: torch.Tensor) -> Any:
    alpha = masked_softmax(-(x @ self.v), mask, dim=-1)  # the sign of the gate logits flipped
    return x * alpha.unsqueeze(-1), alpha


def _a_flipped(side: int) -> Callable[..., Any]:
    def weights(left: Any, left_mask: Any, right: Any, right_mask: Any) -> Any:
        cos = left @ right.transpose(1, 2) * (left_mask.unsqueeze(-1) & right_mask.unsqueeze(-2))
        a0 = masked_softmax((-1 if side == 0 else 1) * cos.sum(dim=2), left_mask, dim=-1)
        a1 = masked_softmax((-1 if side == 1 else 1) * cos.sum(dim=1), right_mask, dim=-1)
        return a0, a1

    return weights


def _hermitian_flipped(self: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ca, cb = self.complexify(a), self.complexify(b)
    d = ca.shape[-1] // 2
    ca = torch.cat([ca[..., :d], -ca[..., d:]], dim=-1)  # conj(a): the imaginary part's sign
    k = self.kernel()
    if k is not None:
        ca = ca @ k
    return ca @ cb.transpose(1, 2)


def _cross_flipped(self: Any, h_a: Any, a_mask: Any, h_b: Any, b_mask: Any) -> Any:
    h_a = self.self_attention(h_a, h_a, a_mask)
    h_b = self.self_attention(h_b, h_b, b_mask)
    b2a = -self.cross(h_a, h_b, b_mask)  # the cross-attention's sign flipped
    a2b = -self.cross(h_b, h_a, a_mask)
    return damm.enhance(h_a, b2a), damm.enhance(h_b, a2b)


def _iarnn_flipped(name: str, **overrides: Any) -> torch.nn.Module:
    """The tiny model with the sign of IARNN's question attention flipped: the parameters that
    carry r_q into WORD's alpha (M_qi), GATE's gates (M_qf, M_qz), CONTEXT's alpha (M_qc)."""
    model = _TINY_MODEL(name, **overrides)
    assert isinstance(model, iarnn.IARNN)
    with torch.no_grad():
        for key in ("m_qi", "m_qf", "m_qz", "m_qc"):
            param = getattr(model, key, None)
            if param is not None:
                param.neg_()
    return model


@contextmanager
def _patched(target: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


MUTATIONS: dict[str, tuple[Any, str, Any, tuple[str, ...]]] = {
    "gate": (mvlstm.AttentionGate, "forward", _gate_flipped, ("amvlstm_q", "amvlstm_a", "amvlstm_qa")),
    "A0": (mpcnn, "attention_weights", _a_flipped(0), ("mpcnn_attention",)),
    "A1": (mpcnn, "attention_weights", _a_flipped(1), ("mpcnn_attention",)),
    "hermitian": (hcrn.Affinity, "forward", _hermitian_flipped, ("hcrn", "hcrn_bilinear", "hcrn_complex")),
    "damm-cross": (damm.Block, "forward", _cross_flipped, ("damm", "damm_1block")),
    "iarnn-attention": (test_golden, "tiny_model", _iarnn_flipped, ("iarnn_word", "iarnn_context", "iarnn_gate")),
}  # fmt: skip


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_sign_flip_in_each_mechanism_fails_a_golden(mutation: str) -> None:
    target, name, flipped, presets = MUTATIONS[mutation]
    for preset in presets:
        stored = json.loads((VARIANTS / f"{preset}.json").read_text(encoding="utf-8"))
        with _patched(target, name, flipped):
            values = golden_values(preset, {})
        with pytest.raises(AssertionError):
            torch.testing.assert_close(
                torch.tensor(values["outputs"] + values["grad_l1_norms"], dtype=torch.float64),
                torch.tensor(stored["outputs"] + stored["grad_l1_norms"], dtype=torch.float64),
                rtol=1e-5,
                atol=1e-6,
            )
