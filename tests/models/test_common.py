"""The common model test suite, run over every registered model and preset."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import numpy as np
import pytest
import torch

from attnmatch import configs
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.losses import auxiliary_loss, compute_loss
from attnmatch.matcher import Matcher
from attnmatch.metrics import ranking_metrics
from attnmatch.models import (
    get_model_entry,
    get_preset,
    list_models,
    list_presets,
    model_config_from_dict,
)
from attnmatch.models.build import model_type_of
from attnmatch.tasks import Task, ranking_scores

from .conftest import TINY, model_batch, random_pairs, tiny_inputs, tiny_model

NAMES = list_presets() + [m for m in list_models() if m not in list_presets()]


def test_every_model_has_a_tiny_config() -> None:
    assert set(list_models()) <= set(TINY)


@pytest.mark.parametrize("name", list_models())
def test_every_model_cites_its_paper(name: str) -> None:
    # A readable citation ("Wang et al. ACL 2016"), shown by `attnmatch models list`.
    paper = get_model_entry(name).paper
    assert re.search(r"[A-Za-z]{3,}", paper) and re.search(
        r"\b(19|20)\d\d\b|draft|transformer", paper
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("num_outputs", [1, 3])
def test_output_shape(name: str, num_outputs: int) -> None:
    model = tiny_model(name, num_outputs=num_outputs).eval()
    left, right = random_pairs(5)
    out = model(model_batch(model, left, right))
    assert out.shape == (5, num_outputs)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_padding_invariance(name: str) -> None:
    model = tiny_model(name).eval()
    left, right = random_pairs(6, seed=1)
    batched = model(model_batch(model, left, right, extra_pad=3))
    for i in range(len(left)):
        alone = model(model_batch(model, [left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_gets_a_gradient(name: str) -> None:
    model = tiny_model(name, num_outputs=2, trainable=True).train()
    left, right = random_pairs(8, seed=2)
    batch = model_batch(model, left, right, labels=[0, 1] * 4)
    loss = compute_loss("cross_entropy", model(batch), batch)
    aux = auxiliary_loss(model)  # the trainer adds it (IARNN's Occam term)
    (loss if aux is None else loss + aux).backward()
    for pname, param in model.named_parameters():
        assert param.requires_grad
        assert param.grad is not None, f"{pname} got no gradient"
        assert param.grad.abs().sum() > 0, f"{pname} got a zero gradient"


@pytest.mark.parametrize("name", NAMES)
def test_frozen_inputs_stay_frozen(name: str) -> None:
    """With a frozen input layer, exactly its parameters are frozen, whatever its kind."""
    model = tiny_model(name, trainable=False)
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    inside = [n for n, _ in model.named_parameters() if n.startswith("token_encoder.")]
    assert inside and frozen == inside


@pytest.mark.parametrize("name", NAMES)
def test_save_load_round_trip(name: str, tmp_path) -> None:
    model = tiny_model(name).eval()
    model_type = next(m for m in list_models() if isinstance(model, get_model_entry(m).model_cls))
    inputs = tiny_inputs(model)
    Matcher(model=model, model_type=model_type, inputs=inputs, task=Task(kind="ranking")).save(
        tmp_path / "m"
    )
    loaded = Matcher.load(tmp_path / "m")
    left, right = random_pairs(4, seed=3)
    batch = model_batch(model, left, right)
    torch.testing.assert_close(model(batch), loaded.model(batch), atol=0, rtol=0)
    assert loaded.model_type == model_type
    texts = ["how are glacier caves formed ?", "w3 w5 zzz"]
    for a, b in zip(loaded.inputs.encode(texts), inputs.encode(texts), strict=True):
        assert np.array_equal(a, b)

    # Strict: a config that does not match the weights fails loudly.
    cfg_path = tmp_path / "m" / "config.json"
    header = json.loads(cfg_path.read_text())
    if header["config"]["encoder"]["transformer_config"]:  # valid config, other weight shapes
        header["config"]["encoder"]["transformer_config"]["intermediate_size"] += 1
    else:  # the input table's rows
        header["config"]["encoder"]["vocab_size"] += 1
    cfg_path.write_text(json.dumps(header))
    with pytest.raises(Exception, match="size|shape"):
        Matcher.load(tmp_path / "m")


@pytest.mark.parametrize("name", NAMES)
def test_tiny_overfit_ranking(name: str) -> None:
    """4 queries x (1 positive + 3 negatives): the training MAP must reach 1.0."""
    torch.manual_seed(0)
    model = tiny_model(name, trainable=True).train()
    left, right = random_pairs(16, seed=4)
    for g in range(4):  # one query text per group
        for j in range(4):
            left[4 * g + j] = left[4 * g]
    batch = model_batch(model, left, right, labels=[1.0, 0.0, 0.0, 0.0] * 4)
    batch.group_index = torch.arange(4).repeat_interleave(4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(400):  # noqa: B007  (reported on failure)
        loss = compute_loss("rank_hinge", model(batch), batch, margin=1.0)
        if loss.item() == 0.0:  # every positive beats every negative by the margin
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        scores = ranking_scores(model(batch)).numpy()
    metrics, _ = ranking_metrics(scores, batch.labels.numpy(), batch.group_index.tolist())
    assert metrics["map"] == 1.0, (step, metrics)


@pytest.mark.parametrize("name", NAMES)
def test_tiny_overfit_classification(name: str) -> None:
    torch.manual_seed(0)
    model = tiny_model(name, num_outputs=2, trainable=True).train()
    left, right = random_pairs(12, seed=5)
    labels = [0, 1] * 6
    batch = model_batch(model, left, right, labels=labels)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        logits = model(batch)
        if (logits.argmax(-1) == torch.tensor(labels)).all() and logits.softmax(-1).max(
            -1
        ).values.min() > 0.9:
            break
        loss = compute_loss("cross_entropy", logits, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(batch).argmax(-1) == torch.tensor(labels)).float().mean().item()
    assert accuracy == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_eval_mode_is_deterministic(name: str) -> None:
    config_cls = get_model_entry(model_type_of(name)).config_cls
    has_dropout = "dropout" in {f.name for f in dataclasses.fields(config_cls)}
    # The bi-encoder has no dropout of its own, only its encoder's.
    extra: dict[str, Any] = {"dropout": 0.5} if has_dropout else {}
    model = tiny_model(name, encoder={"dropout": 0.3}, **extra).eval()
    left, right = random_pairs(5, seed=6)
    batch = model_batch(model, left, right)
    torch.testing.assert_close(model(batch), model(batch), atol=0, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_config_json_round_trip(name: str) -> None:
    model = tiny_model(name)
    model_type = next(m for m in list_models() if isinstance(model, get_model_entry(m).model_cls))
    data = json.loads(json.dumps(configs.to_dict(model.config)))
    assert model_config_from_dict(model_type, data) == model.config
    with pytest.raises(configs.ConfigError, match="unknown config key"):
        model_config_from_dict(model_type, {**data, "not_a_field": 1})


class _Recorder:
    """Wraps a (nested) dataclass config and records which fields are read."""

    def __init__(self, config: object, seen: set[str], prefix: str = "") -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_seen", seen)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name: str) -> object:
        value = getattr(self._config, name)
        self._seen.add(self._prefix + name)
        if dataclasses.is_dataclass(value):
            return _Recorder(value, self._seen, f"{self._prefix}{name}.")
        return value


def _field_paths(config: object, prefix: str = "") -> set[str]:
    paths = set()
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            paths |= _field_paths(value, f"{prefix}{f.name}.")
        else:
            paths.add(prefix + f.name)
    return paths


# Token-encoder fields a model need not read itself: its token encoder reads them (built from the
# config by `attnmatch.inputs.build_token_encoder`), and a table ignores the transformer's.
_ENCODER_FIELDS = {"encoder." + f.name for f in dataclasses.fields(TokenEncoderConfig)}


# Variants whose fields the default configuration leaves unread (a field must be read by some
# variant): the cross-encoder's cosine line is read by its "segments" head only.
_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "cross_encoder": [
        {"pooling": "segments"},
        {"pooling": "segments", "separate_layers": 1},
        {"pooling": "segments", "cross_bias": -1.0},
    ]
}


@pytest.mark.parametrize("name", NAMES)
def test_every_config_field_is_read(name: str) -> None:
    config = tiny_model(name).config
    seen: set[str] = set()
    for overrides in [{}, *_VARIANTS.get(model_type_of(name), [])]:
        variant = tiny_model(name, **overrides).config
        model = type(tiny_model(name))(_Recorder(variant, seen)).eval()
        left, right = random_pairs(3, seed=7)
        model(model_batch(model, left, right))
    unread = _field_paths(config) - seen
    unread -= _ENCODER_FIELDS
    assert not unread, f"config fields never read by the model: {sorted(unread)}"


def test_a_preset_named_like_a_model_type_keeps_its_defaults() -> None:
    """A name means one thing: a preset may share a model type's name only if it sets nothing
    that differs from that type's defaults."""
    for name in set(list_presets()) & set(list_models()):
        config_cls = get_model_entry(name).config_cls
        defaults = {f.name: f.default for f in dataclasses.fields(config_cls)}
        for key, value in get_preset(name).overrides.items():
            default = defaults[key]
            same = (
                list(value) == list(default)
                if isinstance(value, list | tuple)
                else (value == default)
            )
            assert same, (
                f"preset {name!r} sets {key}={value!r}; the model type's default is {default!r}"
            )
