"""Whole-input inference paths (`attnmatch.models.fast`): `Matcher.predict` takes a model's path
on the CPU and returns the outputs in the input order, equal to `forward` on each pair alone; the
registry finds a path by the model's exact class; and the paper files stay free of their paths.
Each path's own exactness tests are in tests/models/test_<model>_inference.py."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import attnmatch.matcher as matcher_module
import attnmatch.models
from attnmatch.data.encoding import EncodedPairs
from attnmatch.matcher import Matcher
from attnmatch.models import fast, model_type_of
from attnmatch.models.fast import InferencePath, _registry, inference_for, register_inference
from attnmatch.models.mvlstm import MVLSTM
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
# The seed papers' model files, and their size before the CPU speed paths (1,611 lines) + 10%.
PAPER_FILES = ("mvlstm.py", "hcrn.py", "damm.py", "mpcnn.py", "iarnn.py")
PAPER_LINES = 1772


def _matcher(model: nn.Module, name: str, batch_size: int) -> Matcher:
    return Matcher(
        model=model,
        model_type=model_type_of(name),
        inputs=None,  # type: ignore[arg-type]  # predict reads ids only
        task=Task(kind="ranking"),
        batch_size=batch_size,
    )


@pytest.mark.parametrize("name", ENCODED)
@pytest.mark.parametrize("batch_size", [5, 512])
def test_matcher_predict_takes_the_encoded_path_in_input_order(
    name: str, batch_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(1)
    model = tiny_model(name)
    assert inference_for(model) is not None
    data = ranking_data(90, seed=4)
    matcher = _matcher(model, name, batch_size)
    calls: list[int] = []

    def spy(m: nn.Module) -> InferencePath:
        run = inference_for(m)
        assert run is not None

        def counted(data: EncodedPairs, size: int) -> torch.Tensor:
            calls.append(size)
            return run(data, size)

        return counted

    monkeypatch.setattr(matcher_module, "inference_for", spy)
    fast_out = matcher.predict(data)
    assert calls == [batch_size]
    monkeypatch.setattr(matcher_module, "inference_for", lambda m: None)  # `forward` per batch
    batched = matcher.predict(data)
    assert calls == [batch_size]
    expected = plain_outputs(model, data).numpy()  # pair i alone: the input order
    np.testing.assert_allclose(fast_out, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(batched, expected, atol=1e-5, rtol=1e-5)


def test_matcher_predict_keeps_forward_off_float32() -> None:
    model = tiny_model("mvlstm")
    matcher = _matcher(model, "mvlstm", 8)
    cpu = torch.device("cpu")
    assert matcher_module._encoded_inference(model, cpu, "fp32") is not None
    assert matcher_module._encoded_inference(model, cpu, "bf16") is None
    assert matcher_module._encoded_inference(model, torch.device("meta"), "fp32") is None
    assert matcher.predict(ranking_data(12, seed=1)).shape == (12, 1)


@pytest.mark.parametrize("name", ["gru", "oarnn", "esim", "arc_ii", "matchpyramid"])
def test_models_without_a_path_get_none(name: str) -> None:
    assert inference_for(tiny_model(name)) is None


def test_a_path_is_registered_for_the_exact_class_only() -> None:
    class Subclass(MVLSTM):
        pass

    model = tiny_model("mvlstm")
    assert inference_for(model) is not None
    model.__class__ = Subclass  # a subclass may compute something else in `forward`
    assert inference_for(model) is None


def test_registering_a_second_path_for_a_class_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_PATHS", {})

    class Model(nn.Module):
        pass

    @register_inference(Model, applies=lambda m: m.training)
    def first(model: Model, data: EncodedPairs, batch_size: int) -> torch.Tensor:
        return torch.full((len(data), 1), float(batch_size))

    with pytest.raises(ValueError, match="Model already has a whole-input inference path"):

        @register_inference(Model)
        def second(model: Model, data: EncodedPairs, batch_size: int) -> torch.Tensor:
            raise AssertionError("never registered")

    model = Model()
    run = inference_for(model)
    assert run is not None and run(ranking_data(10, seed=0), 3).tolist() == [[3.0]] * 10
    assert inference_for(model.eval()) is None  # `applies` refuses it


def test_every_fast_module_is_imported_by_the_package() -> None:
    modules = {p.stem for p in Path(fast.__file__).parent.glob("*.py")} - {"__init__"}
    assert modules - {"_registry", "_windows"} == {Path(f).stem for f in PAPER_FILES}
    for name in modules:
        assert hasattr(fast, name), name
    registered = {cls.__name__ for cls in _registry._PATHS}
    papers = {"MVLSTM", "HCRN", "DAMM", "MPCNN", "IARNN"}
    assert papers <= registered
    # besides the papers' models, only an ONNX Runtime model (registered when attnmatch.export
    # has been imported) has a whole-input path
    assert registered - papers <= {"OnnxModel"}


def _imports(tree: ast.Module) -> set[str]:
    """Every module a file imports, `from a import b` counted as a and a.b."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_paper_files_hold_the_paper_without_its_speed_paths() -> None:
    """The seed models' files read like their papers: together within 10% of their size before
    the CPU speed paths, none defines a whole-input path or imports `models/fast` (a fast module
    imports its paper model, never the other way round)."""
    folder = Path(attnmatch.models.__file__).parent
    lines = 0
    for name in PAPER_FILES:
        source = (folder / name).read_text(encoding="utf-8")
        lines += len(source.splitlines())
        tree = ast.parse(source)
        defined = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        }
        assert "predict_encoded" not in defined, name
        assert "encoded_inference" not in source, name
        fast_imports = {m for m in _imports(tree) if m.startswith("attnmatch.models.fast")}
        assert not fast_imports, (name, fast_imports)
    assert lines <= PAPER_LINES, f"the paper files hold {lines} lines (at most {PAPER_LINES})"
