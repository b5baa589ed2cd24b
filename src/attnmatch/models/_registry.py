"""A small explicit registry of models and their named presets.

`register_model` decorates a model class with its config class and declares its optional
capabilities, checked there against the class (`attnmatch.models.contract`); `register_preset`
names a config (e.g. a paper table row). Duplicate names raise. This module is reached only
through the package `attnmatch.models`, whose `__init__` imports every model module explicitly
before anyone can look a name up, so no caller ever needs a side-effect import (and the registry
imports no model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from torch import nn

from attnmatch.data.labels import TASKS
from attnmatch.inputs import KINDS
from attnmatch.models.contract import Capabilities, check_model_class, declare

M = TypeVar("M", bound=type[nn.Module])


@dataclass(frozen=True)
class ModelEntry:
    name: str
    model_cls: type[nn.Module]
    config_cls: type
    tasks: tuple[str, ...]
    paper: str  # a short citation of the model's paper (docs/models.md has the full one)
    # The input kinds (attnmatch.inputs.KINDS) the model reads, and the one it reads by default.
    inputs: tuple[str, ...] = KINDS
    default_inputs: dict[str, Any] = field(default_factory=dict)
    # What the model offers besides forward (attention maps, auxiliary loss terms).
    capabilities: Capabilities = Capabilities()


@dataclass(frozen=True)
class Preset:
    """A named configuration of a registered model (e.g. a paper's table row), with the
    `[inputs]` it reads unless an experiment names others (empty: the model's default), and
    optionally its training recipe: `recipe(task)` gives the {"train": ..., "model_overrides":
    ...} settings that apply where an experiment keeps the defaults (e.g. a pretrained
    encoder's fine-tuning learning rate, warm-up and loss)."""

    name: str
    model: str
    overrides: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    recipe: Callable[[Any], dict[str, Any]] | None = None


_MODELS: dict[str, ModelEntry] = {}
_PRESETS: dict[str, Preset] = {}


def register_model(
    name: str,
    *,
    config: type,
    tasks: tuple[str, ...] = TASKS,
    paper: str = "",
    inputs: tuple[str, ...] = KINDS,
    default_inputs: dict[str, Any] | None = None,
    explains: bool = False,
    auxiliary_loss: bool = False,
) -> Callable[[M], M]:
    """Class decorator registering a model under `name` with its config dataclass, the tasks
    its head supports (default: all of `attnmatch.data.labels.TASKS`), the input kinds it reads
    (default: all of `attnmatch.inputs.KINDS`) and its capabilities: `explains` (it defines
    `attention(batch)`), `auxiliary_loss` (it defines `auxiliary_terms()`).

    Raises:
        ValueError: the name is taken, or the class breaks the model contract
            (`attnmatch.models.contract.check_model_class`).
    """

    def wrap(cls: M) -> M:
        if name in _MODELS:
            raise ValueError(f"model {name!r} is already registered ({_MODELS[name].model_cls})")
        offers = Capabilities(explains=explains, auxiliary_loss=auxiliary_loss)
        check_model_class(name, cls, config, offers)
        declare(cls, offers)
        _MODELS[name] = ModelEntry(
            name, cls, config, tasks, paper, inputs, default_inputs or {}, offers
        )
        return cls

    return wrap


def register_preset(
    name: str,
    *,
    model: str,
    overrides: dict[str, Any],
    description: str,
    inputs: dict[str, Any] | None = None,
    recipe: Callable[[Any], dict[str, Any]] | None = None,
) -> None:
    if name in _PRESETS:
        raise ValueError(f"preset {name!r} is already registered")
    if model not in _MODELS:
        raise ValueError(f"preset {name!r} refers to unknown model {model!r}")
    _PRESETS[name] = Preset(name, model, dict(overrides), description, dict(inputs or {}), recipe)


def get_model_entry(name: str) -> ModelEntry:
    if name not in _MODELS:
        raise KeyError(f"unknown model {name!r}; registered models: {', '.join(sorted(_MODELS))}")
    return _MODELS[name]


def get_preset(name: str) -> Preset:
    if name not in _PRESETS:
        raise KeyError(f"unknown preset {name!r}; presets: {', '.join(sorted(_PRESETS))}")
    return _PRESETS[name]


def list_models() -> list[str]:
    """Names of the registered model types."""
    return sorted(_MODELS)


def list_presets() -> list[str]:
    """Names of the registered presets (paper table rows and common configurations)."""
    return sorted(_PRESETS)
