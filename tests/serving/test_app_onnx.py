"""The service's tests (`test_app.py`) with the default model served by ONNX Runtime: the
"ranker" is a tiny bi-encoder exported to ONNX and loaded from its exported directory
(`attnmatch serve --backend onnx` serves what `load_matcher(..., backend="onnx")` loads);
aMV-LSTM and the 3-class MV-LSTM, which do not export (docs/speed.md), stay on torch beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attnmatch.matcher import Matcher, load_matcher
from attnmatch.tasks import Task
from tests.models.conftest import tiny_inputs, tiny_model
from tests.serving import test_app
from tests.serving.test_app import *  # noqa: F403  the same tests, on the models below


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Matcher]:
    classes = Task(kind="classification", class_names=("contradiction", "neutral", "entailment"))
    model = tiny_model("bi_encoder")
    bi = Matcher(
        model=model.eval(),
        model_type="bi_encoder",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    saved = bi.save(tmp_path_factory.mktemp("ranker") / "model")
    ranker = load_matcher(saved, backend="onnx")
    ranker.batch_size = 4
    assert ranker.backend == "onnx"
    return {
        "ranker": ranker,
        "amvlstm": test_app._matcher("amvlstm_q", Task(kind="ranking")),
        "nli": test_app._matcher("mvlstm", classes, num_outputs=3),
    }


def test_models_lists_type_task_inputs_and_attention(client: TestClient) -> None:  # noqa: F811
    """As in test_app.py, for this module's ranker (a bi-encoder on ONNX Runtime)."""
    rows = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert list(rows) == ["ranker", "amvlstm", "nli"]
    assert rows["ranker"]["type"] == "bi_encoder" and rows["ranker"]["attention"] is False
    assert rows["ranker"]["task"] == "ranking" and rows["ranker"]["relevance"] == "score"
    assert rows["amvlstm"]["attention"] is True


def test_the_ranker_runs_on_onnx(models: dict[str, Matcher], tmp_path: Path) -> None:
    assert models["ranker"].backend == "onnx" and models["amvlstm"].backend == "torch"
