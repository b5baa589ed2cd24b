"""Registered models. Every model module is imported here, explicitly."""

from attnmatch.models import (  # noqa: F401
    anmm,
    arc,
    attentive_pooling,
    damm,
    decomposable,
    dssm,
    esim,
    hcrn,
    iarnn,
    matchpyramid,
    mpcnn,
    mvlstm,
    pretrained,
    siamese,
)
from attnmatch.models._registry import (
    ModelEntry,
    Preset,
    get_model_entry,
    get_preset,
    list_models,
    list_presets,
)
from attnmatch.models.build import (
    build_model,
    default_inputs,
    input_layer,
    model_config_from_dict,
    model_type_of,
    resolve_model_config,
)

__all__ = [
    "ModelEntry",
    "Preset",
    "build_model",
    "default_inputs",
    "input_layer",
    "model_type_of",
    "get_model_entry",
    "get_preset",
    "list_models",
    "list_presets",
    "model_config_from_dict",
    "resolve_model_config",
]
