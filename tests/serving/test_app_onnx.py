"""The service's tests (`test_app.py`) with the default model served by ONNX Runtime: the
"ranker" is a tiny bi-encoder exported to ONNX and loaded from its exported directory
(`attnmatch serve --backend onnx` serves what `load_matcher(..., backend="onnx")` loads);
aMV-LSTM and the 3-class MV-LSTM stay on torch beside it (attention maps, and both
backends in one app).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attnmatch.matcher import Matcher, load_matcher
from tests.serving import test_app
from tests.serving.test_app import *  # noqa: F403  the same tests, on the models below


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Matcher]:
    saved = test_app.tiny_bi_encoder().save(tmp_path_factory.mktemp("ranker") / "model")
    ranker = load_matcher(saved, backend="onnx")
    ranker.batch_size = 4
    assert ranker.backend == "onnx"
    return test_app.beside_torch_models(ranker)


def test_models_lists_type_task_inputs_and_attention(client: TestClient) -> None:  # noqa: F811
    """As in test_app.py, for this module's ranker (a bi-encoder on ONNX Runtime)."""
    test_app.check_exported_ranker_listed(client)


def test_the_ranker_runs_on_onnx(models: dict[str, Matcher], tmp_path: Path) -> None:
    assert models["ranker"].backend == "onnx" and models["amvlstm"].backend == "torch"
