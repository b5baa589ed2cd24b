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
    encoding_options,
    model_config_from_dict,
    reads_word_vectors,
    resolve_model_config,
)

__all__ = [
    "ModelEntry",
    "Preset",
    "build_model",
    "encoding_options",
    "reads_word_vectors",
    "get_model_entry",
    "get_preset",
    "list_models",
    "list_presets",
    "model_config_from_dict",
    "resolve_model_config",
]
