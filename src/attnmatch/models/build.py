"""Building models from registered names, presets and override dicts."""

from __future__ import annotations

from typing import Any

from torch import nn

from attnmatch import configs
from attnmatch.models._registry import _MODELS, _PRESETS, _ensure_loaded, get_model_entry
from attnmatch.models.token_encoder import StaticTokenEncoder, TransformerTokenEncoder


def model_type_of(name: str) -> str:
    """The registered model type of a preset or model name (KeyError if neither)."""
    _ensure_loaded()
    if name in _PRESETS:
        return _PRESETS[name].model
    if name in _MODELS:
        return name
    raise KeyError(
        f"unknown model or preset {name!r}; presets: {', '.join(sorted(_PRESETS))}; "
        f"models: {', '.join(sorted(_MODELS))}"
    )


def resolve_model_config(
    name: str,
    *,
    vocab_size: int,
    embedding_dim: int,
    num_outputs: int,
    overrides: dict[str, Any] | None = None,
) -> tuple[str, Any]:
    """The (model type, validated config) for a preset or model name plus overrides.

    Args:
        name: a preset (e.g. "amvlstm_q") or a registered model type (e.g. "mvlstm").
        vocab_size, embedding_dim: fill the token encoder config.
        num_outputs: 1 for ranking scores, the number of classes for classification, the
            number of score levels (KL) or 1 (MSE) for regression.
        overrides: nested config values applied last (e.g. {"k": 50, "encoder": {...}}).
    """
    _ensure_loaded()
    if name in _PRESETS:
        preset = _PRESETS[name]
        model_type, base = preset.model, dict(preset.overrides)
    elif name in _MODELS:
        model_type, base = name, {}
    else:
        raise KeyError(
            f"unknown model or preset {name!r}; presets: {', '.join(sorted(_PRESETS))}; "
            f"models: {', '.join(sorted(_MODELS))}"
        )
    data: dict[str, Any] = {
        "encoder": {"vocab_size": vocab_size, "embedding_dim": embedding_dim},
        "num_outputs": num_outputs,
    }
    data = configs.merge(data, base)
    data = configs.merge(data, overrides or {})
    return model_type, model_config_from_dict(model_type, data)


def model_config_from_dict(model_type: str, data: dict[str, Any]) -> Any:
    entry = get_model_entry(model_type)
    return configs.from_dict(entry.config_cls, data, path="model")


def build_model(model_type: str, config: Any) -> nn.Module:
    entry = get_model_entry(model_type)
    if not isinstance(config, entry.config_cls):
        raise TypeError(
            f"model {model_type!r} needs a {entry.config_cls.__name__}, got {type(config).__name__}"
        )
    return entry.model_cls(config)


def encoder_settings(name: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `encoder` config values a preset or model name plus overrides asks for (the preset's,
    then the overrides'); e.g. {"kind": "transformer", "source": "minilm-l6"}."""
    model_type_of(name)  # KeyError for unknown names
    base = dict(_PRESETS[name].overrides) if name in _PRESETS else {}
    merged = configs.merge(base, overrides or {})
    encoder = merged.get("encoder", {})
    return dict(encoder) if isinstance(encoder, dict) else {}


def transformer_encoder_of(model: nn.Module) -> TransformerTokenEncoder | None:
    """The model's transformer token encoder, or None when it reads static vectors."""
    encoder = getattr(model, "token_encoder", None)
    return encoder if isinstance(encoder, TransformerTokenEncoder) else None


def token_encoder_of(model: nn.Module) -> StaticTokenEncoder:
    """The model's input layer (every registered model has one, named `token_encoder`)."""
    encoder = getattr(model, "token_encoder", None)
    if not isinstance(encoder, StaticTokenEncoder):
        raise TypeError(f"{type(model).__name__} has no static token encoder to load vectors into")
    return encoder


def encoding_options(model: nn.Module) -> dict[str, Any]:
    """The `encode_examples` options `model`'s inputs need: {"trigram_buckets": N} when its
    config asks for letter-trigram ids (DSSM, CDSSM), else {}."""
    buckets = getattr(getattr(model, "config", None), "trigram_buckets", 0)
    return {"trigram_buckets": buckets} if buckets else {}


def reads_word_vectors(model_type: str) -> bool:
    """Whether a registered model reads word vectors (False for the letter-trigram models, DSSM
    and CDSSM, whose class sets `reads_word_vectors = False`)."""
    return getattr(get_model_entry(model_type).model_cls, "reads_word_vectors", True)
