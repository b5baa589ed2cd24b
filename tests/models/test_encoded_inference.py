"""Every model with a whole-input inference path (`predict_encoded`): `Matcher.predict` takes it
on the CPU and returns the outputs in the input order, equal to `forward` on each pair alone.
Each path's own exactness tests are in tests/models/test_<model>_inference.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnmatch.data.encoding import EncodedPairs
from attnmatch.matcher import Matcher
from attnmatch.models import model_type_of
from attnmatch.tasks import Task

from .conftest import plain_outputs, ranking_data, tiny_model

ENCODED = [
    "mvlstm",
    "amvlstm_q",
    "hcrn",
    "damm",
    "mpcnn_attention",
    "mpcnn",
    "iarnn_gate",
    "iarnn_context",
    "iarnn_word",
]


@pytest.mark.parametrize("name", ENCODED)
@pytest.mark.parametrize("batch_size", [5, 512])
def test_matcher_predict_takes_the_encoded_path_in_input_order(name: str, batch_size: int) -> None:
    torch.manual_seed(1)
    model = tiny_model(name)
    assert getattr(model, "encoded_inference", False)
    data = ranking_data(90, seed=4)
    matcher = Matcher(
        model=model,
        model_type=model_type_of(name),
        inputs=None,  # type: ignore[arg-type]  # predict reads ids only
        task=Task(kind="ranking"),
        batch_size=batch_size,
    )
    calls: list[int] = []
    original = model.predict_encoded

    def spy(data: EncodedPairs, size: int) -> torch.Tensor:
        calls.append(size)
        return original(data, size)  # type: ignore[no-any-return,operator]

    model.predict_encoded = spy  # type: ignore[method-assign,assignment]
    fast = matcher.predict(data)
    assert calls == [batch_size]
    model.encoded_inference = False  # `forward` per batch
    batched = matcher.predict(data)
    assert calls == [batch_size]
    expected = plain_outputs(model, data).numpy()  # pair i alone: the input order
    np.testing.assert_allclose(fast, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(batched, expected, atol=1e-5, rtol=1e-5)
