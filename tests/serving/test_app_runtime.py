"""The service's tests (`test_app.py`) with the default model an exported directory served by
`attnmatch.runtime` (ONNX Runtime with no torch: what `attnmatch serve EXPORTED` serves): the
"ranker" is a tiny bi-encoder exported to ONNX and loaded with `attnmatch.runtime.load`;
aMV-LSTM and the 3-class MV-LSTM stay on torch beside it (attention maps, and both
backends in one app). Every endpoint of the suite runs against it (/v1/rank, /rerank,
/v1/score, health, metrics, limits, errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attnmatch import runtime
from attnmatch.export import export_onnx
from tests.serving import test_app
from tests.serving.test_app import *  # noqa: F403  the same tests, on the models below


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    exported = export_onnx(test_app.tiny_bi_encoder(), tmp_path_factory.mktemp("ranker") / "onnx")
    return test_app.beside_torch_models(runtime.load(exported, batch_size=4))


def test_models_lists_type_task_inputs_and_attention(client: TestClient) -> None:  # noqa: F811
    """As in test_app.py, for this module's ranker (an exported bi-encoder, no torch)."""
    test_app.check_exported_ranker_listed(client)


def test_the_ranker_runs_on_the_runtime(models: dict[str, object], tmp_path: Path) -> None:
    assert isinstance(models["ranker"], runtime.ExportedMatcher)
    assert not isinstance(models["amvlstm"], runtime.ExportedMatcher)


def test_explain_on_the_exported_ranker_is_one_line(client: TestClient) -> None:
    body = {"model": "ranker", "left": "w1 w2", "right": "w3"}
    got = client.post("/v1/explain", json=body)
    assert got.status_code == 400 and "no attention maps" in got.json()["detail"]


def test_threads_set_torch_threads_on_the_model_thread_only(  # noqa: F811
    models: dict[str, object],
) -> None:
    """As in test_app.py on the torch model beside it; the exported ranker's thread keeps
    torch's setting (its ONNX Runtime sessions took their threads at load)."""
    import asyncio

    import torch

    before = torch.get_num_threads()
    wanted = before + 2
    app = create_app(models, settings=ServeSettings(threads=wanted))  # noqa: F405

    async def on_model_thread(name: str) -> int:
        batcher = app.state.batchers[name]
        try:
            return int(await batcher.call(torch.get_num_threads))
        finally:
            await batcher.aclose()

    assert app.state.batchers["ranker"]._on_thread_start is None  # sets nothing of torch's
    assert asyncio.run(on_model_thread("amvlstm")) == wanted
    assert torch.get_num_threads() == before
