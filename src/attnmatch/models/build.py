"""Building models from registered names, presets and override dicts."""

from __future__ import annotations

from typing import Any

from torch import nn

from attnmatch import configs
from attnmatch.configs import ConfigError
from attnmatch.models._registry import _MODELS, _PRESETS, get_model_entry
from attnmatch.models.contract import check_built, token_encoder


def model_type_of(name: str) -> str:
    """The registered model type of a preset or model name (KeyError if neither)."""
    if name in _PRESETS:
        return _PRESETS[name].model
    if name in _MODELS:
        return name
    raise KeyError(
        f"unknown model or preset {name!r}; presets: {', '.join(sorted(_PRESETS))}; "
        f"models: {', '.join(sorted(_MODELS))}"
    )


def default_inputs(name: str) -> dict[str, Any]:
    """The `[inputs]` a preset or model reads when the experiment names none (an empty dict:
    word vectors with the defaults)."""
    model_type = model_type_of(name)
    preset = _PRESETS.get(name)
    if preset is not None and preset.inputs:
        return dict(preset.inputs)
    return dict(get_model_entry(model_type).default_inputs)


def resolve_model_config(
    name: str,
    *,
    encoder: dict[str, Any],
    num_outputs: int,
    overrides: dict[str, Any] | None = None,
) -> tuple[str, Any]:
    """The (model type, validated config) for a preset or model name plus overrides.

    Args:
        name: a preset (e.g. "amvlstm_q") or a registered model type (e.g. "mvlstm").
        encoder: the token encoder config values (`Inputs.encoder_config()`).
        num_outputs: 1 for ranking scores, the number of classes for classification, the
            number of score levels (KL) or 1 (MSE) for regression.
        overrides: nested model config values applied last (e.g. {"k": 50}); the input layer
            is not among them (it is the experiment's `[inputs]`).
    """
    model_type = model_type_of(name)
    base = dict(_PRESETS[name].overrides) if name in _PRESETS else {}
    if overrides and "encoder" in overrides:
        raise ConfigError(
            "model_overrides.encoder: the input layer is configured in [inputs] (kind, vectors, "
            "source, trainable, dropout, ...), not in the model config"
        )
    data: dict[str, Any] = {"encoder": encoder, "num_outputs": num_outputs}
    data = configs.merge(data, base)
    data = configs.merge(data, overrides or {})
    return model_type, model_config_from_dict(model_type, data)


def model_config_from_dict(model_type: str, data: dict[str, Any], *, path: str = "model") -> Any:
    """The config of model type `model_type` from its dict; errors name the key under `path`
    (e.g. "config.hidden_size" for a model directory's config.json)."""
    entry = get_model_entry(model_type)
    return configs.from_dict(entry.config_cls, data, path=path)


def build_model(model_type: str, config: Any) -> nn.Module:
    entry = get_model_entry(model_type)
    if not isinstance(config, entry.config_cls):
        raise TypeError(
            f"model {model_type!r} needs a {entry.config_cls.__name__}, got {type(config).__name__}"
        )
    model = entry.model_cls(config)
    check_built(model_type, model, config)
    return model


def input_layer(model: nn.Module) -> nn.Module:
    """The model's token encoder (`token_encoder`, a member of every registered model; seen
    through the wrappers of `attnmatch.models.contract`)."""
    return token_encoder(model)
