"""Golden outputs: every registered model type, built from a fixed seed on a fixed tiny batch,
must keep giving the stored outputs and gradients, so that refactoring provably changes no
numerics.

The stored values live in `tests/golden/<name>.json`. They change only on purpose: run
`ATTNMATCH_REGENERATE_GOLDEN=1 pytest tests/models/test_golden.py` and commit the diff with the
reason. Each file holds the eval-mode outputs on the batch and, after one backward pass of
`outputs.sum()` in training mode (dropout seeded), every parameter's gradient L1 norm (sorted,
so renaming or regrouping parameters does not matter) and the first values of the largest
gradient.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from attnmatch.models import list_models

from .conftest import model_batch, random_pairs, tiny_model, tiny_transformer_encoder

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
REGENERATE = os.environ.get("ATTNMATCH_REGENERATE_GOLDEN") == "1"

# name -> (model type, overrides). Every model type on its default input (word vectors; the
# pretrained models on a tiny random BERT), plus MV-LSTM on transformer inputs.
CASES: dict[str, tuple[str, dict[str, Any]]] = {m: (m, {}) for m in list_models()}
CASES["mvlstm+transformer"] = ("mvlstm", {"encoder": tiny_transformer_encoder()})
CASES["bi_encoder"] = ("bi_encoder", {"encoder": {"kind": "word_vectors"}})  # averaged vectors


def golden_values(model_type: str, overrides: dict[str, Any]) -> dict[str, Any]:
    model = tiny_model(model_type, trainable=True, **overrides)
    left, right = random_pairs(6, seed=3)
    batch = model_batch(model, left, right, extra_pad=2)
    model.eval()
    with torch.no_grad():
        outputs = model(batch)  # (B, 1)
    model.train()
    torch.manual_seed(1)
    model(batch).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norms = sorted(float(g.abs().sum()) for g in grads)
    largest = max(grads, key=lambda g: (float(g.abs().sum()), g.numel()))
    return {
        "outputs": outputs.flatten().tolist(),
        "grad_l1_norms": norms,
        "largest_grad_head": largest.flatten()[:8].tolist(),
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_outputs(name: str) -> None:
    model_type, overrides = CASES[name]
    values = golden_values(model_type, overrides)
    path = GOLDEN / f"{name}.json"
    if REGENERATE:
        path.write_text(json.dumps(values, indent=1) + "\n", encoding="utf-8")
        pytest.skip(f"regenerated {path.name}")
    assert path.is_file(), f"no golden file {path}: regenerate on purpose (see module docstring)"
    stored = json.loads(path.read_text(encoding="utf-8"))
    for key in ("outputs", "grad_l1_norms", "largest_grad_head"):
        torch.testing.assert_close(
            torch.tensor(values[key], dtype=torch.float64),
            torch.tensor(stored[key], dtype=torch.float64),
            rtol=1e-5,
            atol=1e-6,
            msg=lambda m, key=key: f"{name}: {key} differs from the golden file: {m}",
        )


def test_every_model_type_has_a_golden_file() -> None:
    assert {m for m in list_models()} <= set(CASES)
    if not REGENERATE:
        assert {p.stem for p in GOLDEN.glob("*.json")} == set(CASES)
