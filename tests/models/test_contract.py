"""The model contract (`attnmatch.models.contract`): what registration refuses, what callers
are told, and that nothing in src/ probes a model for its hooks."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.lexical import LexicalModel, LexicalScorer
from attnmatch.losses import auxiliary_loss
from attnmatch.matcher import Matcher
from attnmatch.models import get_model_entry, list_models
from attnmatch.models._registry import register_model
from attnmatch.models.contract import (
    CAPABILITY_METHODS,
    Capabilities,
    attention_maps,
    auxiliary_terms,
    capabilities,
    check_built,
    model_config,
    token_encoder,
)
from attnmatch.nn.overlap import WithOverlapFeatures
from attnmatch.tasks import Task

from .conftest import model_batch, random_pairs, tiny_inputs, tiny_model

SRC = Path(__file__).resolve().parents[2] / "src" / "attnmatch"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Config:
    encoder: TokenEncoderConfig
    num_outputs: int = 1


class _Plain(nn.Module):
    def forward(self, batch: PairBatch) -> torch.Tensor:
        return torch.zeros(batch.left_ids.shape[0], 1)


class _Explaining(_Plain):
    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        return {}


class _WithTerms(_Plain):
    def auxiliary_terms(self) -> dict[str, torch.Tensor]:
        return {}


class _NoForward(nn.Module):
    pass


@dataclasses.dataclass(kw_only=True)
class _MutableConfig:
    encoder: TokenEncoderConfig
    num_outputs: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class _NoOutputs:
    encoder: TokenEncoderConfig


REFUSED: dict[str, tuple[type, type, dict[str, bool], str]] = {
    "declared-without-method": (
        _Plain,
        _Config,
        {"explains": True},
        r"declares explains=True but defines no attention\(\)",
    ),
    "attention-undeclared": (
        _Explaining,
        _Config,
        {},
        r"defines attention\(\) but does not declare it: register it with explains=True",
    ),
    "terms-undeclared": (
        _WithTerms,
        _Config,
        {},
        r"defines auxiliary_terms\(\) but does not declare it: .*auxiliary_loss=True",
    ),
    "terms-declared-without-method": (
        _Explaining,
        _Config,
        {"explains": True, "auxiliary_loss": True},
        r"declares auxiliary_loss=True but defines no auxiliary_terms\(\)",
    ),
    "no-forward": (_NoForward, _Config, {}, r"defines no forward\(batch\)"),
    "not-a-module": (object, _Config, {}, "a model is an nn.Module subclass"),
    "mutable-config": (
        _Plain,
        _MutableConfig,
        {},
        "its config _MutableConfig must be a frozen dataclass",
    ),
    "config-without-num_outputs": (
        _Plain,
        _NoOutputs,
        {},
        "its config _NoOutputs has no field num_outputs",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_registration_refuses_a_class_that_breaks_the_contract(case: str) -> None:
    cls, config, declared, message = REFUSED[case]
    name = f"contract_test_{case}"
    with pytest.raises(ValueError, match=rf"model '{name}' \({cls.__name__}\): {message}"):
        register_model(name, config=config, tasks=("ranking",), **declared)(cls)
    assert name not in list_models()  # nothing recorded


def test_a_built_model_without_its_members_is_refused() -> None:
    config = _Config(encoder=TokenEncoderConfig(vocab_size=5))
    with pytest.raises(ValueError, match=r"model 'x' \(_Plain\): keeps no `config`"):
        check_built("x", _Plain(), config)
    model = _Plain()
    model.config = config
    with pytest.raises(ValueError, match="has no `token_encoder` module"):
        check_built("x", model, config)
    model.token_encoder = nn.Identity()
    check_built("x", model, config)


@pytest.mark.parametrize("name", list_models())
def test_every_entry_records_what_its_class_defines(name: str) -> None:
    entry = get_model_entry(name)
    offered = dataclasses.asdict(entry.capabilities)
    for capability, method in CAPABILITY_METHODS.items():
        assert offered[capability] == any(method in vars(c) for c in entry.model_cls.__mro__)


def test_the_seed_models_declare_their_attention_and_iarnn_its_occam_term() -> None:
    explaining = {n for n in list_models() if get_model_entry(n).capabilities.explains}
    assert {"mvlstm", "hcrn", "mpcnn", "iarnn", "esim", "anmm"} <= explaining
    assert not {"damm", "arc_i", "dssm", "bi_encoder"} & explaining
    assert [n for n in list_models() if get_model_entry(n).capabilities.auxiliary_loss] == ["iarnn"]


def test_capabilities_and_members_are_read_through_the_wrappers() -> None:
    model = tiny_model("iarnn_occam_word", hidden_size=4).train()
    wrapped = WithOverlapFeatures(model, 1, torch.ones(50))
    for outer in (model, wrapped, nn.DataParallel(wrapped)):  # DataParallel: on the CPU
        assert capabilities(outer) == Capabilities(explains=True, auxiliary_loss=True)
        assert model_config(outer) is model.config
        assert token_encoder(outer) is model.token_encoder
    left, right = random_pairs(3, seed=2)
    batch = model_batch(model, left, right)
    wrapped(batch)
    assert set(auxiliary_terms(wrapped)) == {"occam"} and auxiliary_loss(wrapped) is not None
    assert set(attention_maps(wrapped, batch)) == set(model.attention(batch))


def test_a_model_without_a_capability_is_answered_not_probed() -> None:
    model = tiny_model("damm")
    assert capabilities(model) == Capabilities()
    assert auxiliary_terms(model) == {} and auxiliary_loss(model) is None
    batch = model_batch(model, *random_pairs(2))
    with pytest.raises(NotImplementedError, match="DAMM exposes no attention maps"):
        attention_maps(model, batch)
    with pytest.raises(TypeError, match="_Plain is not a registered model"):
        capabilities(_Plain())


def test_matcher_says_whether_it_explains_and_how_many_outputs() -> None:
    def matcher(name: str, num_outputs: int = 1) -> Matcher:
        model = tiny_model(name, num_outputs=num_outputs).eval()
        return Matcher(model, name, tiny_inputs(model), Task(kind="ranking"))

    assert matcher("mvlstm").explains and not matcher("arc_i").explains
    assert matcher("esim", num_outputs=3).num_outputs == 3
    with pytest.raises(NotImplementedError, match="ARCI exposes no attention maps"):
        matcher("arc_i").explain("a b", "c")
    lexical = Matcher.from_lexical("overlap")
    assert not lexical.explains and lexical.num_outputs == 1 and lexical.inputs is None
    with pytest.raises(NotImplementedError, match="LexicalModel exposes no attention maps"):
        lexical.explain("a", "b")


def test_a_text_model_is_a_kind_of_its_own() -> None:
    """A lexical matcher holds no inputs; given inputs it is refused when built."""
    model = LexicalModel(LexicalScorer("overlap"))
    out = model.score_texts([("a b", "a c")])
    assert out.shape == (1, 1) and out.dtype == np.float32
    with pytest.raises(TypeError, match="scores texts, not id batches"):
        model(model_batch(tiny_model("mvlstm"), *random_pairs(1)))
    inputs = tiny_inputs(tiny_model("mvlstm"))
    with pytest.raises(ValueError, match="the overlap model reads the texts themselves"):
        Matcher(model, "overlap", inputs, Task(kind="ranking"))


# ---------------------------------------------------------------- no probes for model hooks

HOOKS = frozenset(
    {
        "token_encoder",
        "config",
        "attention",
        "auxiliary_terms",
        "idf_size",
        "predict_encoded",
        "encoded_inference",
        "score_texts",
    }
)


def _probes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each getattr/hasattr of a hook name and each callable(getattr(...))."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id in ("getattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in HOOKS:
                found.append((node.lineno, str(name.value)))
        if node.func.id == "callable" and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                if inner.func.id == "getattr":
                    found.append((node.lineno, "callable(getattr(...))"))
    return sorted(found)


def test_no_code_probes_a_model_for_its_hooks() -> None:
    """Capabilities are declared at registration and asked of the contract; a getattr or
    hasattr of a hook name, or callable(getattr(...)), is a probe."""
    probes = [
        f"{path.relative_to(SRC).as_posix()}:{line}: {what}"
        for path in sorted(SRC.rglob("*.py"))
        for line, what in _probes(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not probes, f"probes for model hooks: {probes}"


def test_the_probe_finder_finds_probes() -> None:
    code = (
        "a = getattr(m, 'attention', None)\n"
        "b = hasattr(m, 'config')\n"
        "c = callable(getattr(m, name))\n"
        "d = getattr(m, 'weight')\n"
    )
    assert _probes(ast.parse(code)) == [
        (1, "attention"),
        (2, "config"),
        (3, "callable(getattr(...))"),
    ]
