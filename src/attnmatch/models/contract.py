"""What a matching model is, what it may offer besides, and how callers ask for it.

A matching model is an `nn.Module` (no base class) with

- `config`: its frozen config dataclass, with at least `encoder` (the input layer, a
  `TokenEncoderConfig`) and `num_outputs` (C);
- `token_encoder`: the input layer, `build_token_encoder(config.encoder)`;
- `forward(batch: PairBatch) -> Tensor`, shape (B, C).

Its optional capabilities are declared when it is registered (`register_model(...,
explains=True, auxiliary_loss=True)`) and checked once, there, against the class
(`check_model_class`): a declared capability needs its method, and a method needs its
declaration. The members an instance holds are checked on every model `build_model` builds
(`check_built`).

- explains: `attention(batch) -> dict[str, Tensor]`, attention maps of shape (B, ...) for
  `Matcher.explain` and attention analysis;
- auxiliary_loss: `auxiliary_terms() -> dict[str, Tensor]`, scalar training terms the model
  recorded in its last forward pass, which training adds to the task loss (losses stay outside
  models; IARNN's Occam regulariser).

Callers ask `capabilities(model)` or the accessors below, which see through the wrappers a
model is trained or saved in (`WithOverlapFeatures`, `DistributedDataParallel`,
`DataParallel`); nothing probes a model's attributes.

A model that reads the texts themselves, not ids (a lexical matcher), is a `TextModel`: a kind of
its own, with no inputs, no token encoder and nothing to save.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.nn.overlap import WithOverlapFeatures

REQUIRED_CONFIG_FIELDS = ("encoder", "num_outputs")


class ModelConfig(Protocol):
    """What every model config holds (a frozen dataclass with the model's own fields too)."""

    @property
    def encoder(self) -> TokenEncoderConfig: ...

    @property
    def num_outputs(self) -> int: ...


class MatchingModel(Protocol):
    """A registered model (module docstring). Shape: batch -> (B, config.num_outputs)."""

    @property
    def config(self) -> ModelConfig: ...

    @property
    def token_encoder(self) -> nn.Module: ...

    def forward(self, batch: PairBatch) -> torch.Tensor: ...

    def __call__(self, batch: PairBatch) -> torch.Tensor: ...


class Explains(Protocol):
    """The capability `explains`: attention maps of a batch, each (B, ...)."""

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]: ...


class AuxiliaryLoss(Protocol):
    """The capability `auxiliary_loss`: the scalar terms of the last forward pass."""

    def auxiliary_terms(self) -> dict[str, torch.Tensor]: ...


@dataclass(frozen=True)
class Capabilities:
    """What a registered model offers besides `forward` (module docstring)."""

    explains: bool = False
    auxiliary_loss: bool = False


# The method each capability needs.
CAPABILITY_METHODS = {"explains": "attention", "auxiliary_loss": "auxiliary_terms"}

_DECLARED: dict[type[nn.Module], Capabilities] = {}


def check_model_class(name: str, cls: type, config_cls: type, capabilities: Capabilities) -> None:
    """Refuses a model class that breaks the contract: one ValueError naming the model and
    what is wrong. `register_model` calls it once per class, before `declare`."""
    where = f"model {name!r} ({cls.__name__})"
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"{where}: a model is an nn.Module subclass")
    if not _defines(cls, "forward"):
        raise ValueError(f"{where}: defines no forward(batch) -> (B, num_outputs)")
    if not _is_frozen_dataclass(config_cls):
        raise ValueError(
            f"{where}: its config {config_cls.__name__} must be a frozen dataclass "
            "(@dataclass(frozen=True, kw_only=True))"
        )
    fields = {f.name for f in dataclasses.fields(config_cls)}
    missing = [f for f in REQUIRED_CONFIG_FIELDS if f not in fields]
    if missing:
        raise ValueError(
            f"{where}: its config {config_cls.__name__} has no field {', '.join(missing)} "
            f"(every model config has {' and '.join(REQUIRED_CONFIG_FIELDS)})"
        )
    for capability, declared in dataclasses.asdict(capabilities).items():
        method = CAPABILITY_METHODS[capability]
        defined = _defines(cls, method)
        if declared and not defined:
            raise ValueError(f"{where}: declares {capability}=True but defines no {method}()")
        if defined and not declared:
            raise ValueError(
                f"{where}: defines {method}() but does not declare it: register it with "
                f"{capability}=True"
            )


def check_built(name: str, model: nn.Module, config: object) -> None:
    """Refuses a freshly built model without the members every model has (an instance's, so
    not visible on its class): `config`, the config it was built from, and `token_encoder`, a
    module. `build_model` calls it on every model it builds."""
    where = f"model {name!r} ({type(model).__name__})"
    if vars(model).get("config") is not config:
        raise ValueError(f"{where}: keeps no `config` (self.config = config in __init__)")
    if "token_encoder" not in dict(model.named_children()):
        raise ValueError(
            f"{where}: has no `token_encoder` module "
            "(self.token_encoder = build_token_encoder(config.encoder) in __init__)"
        )


def declare(cls: type[nn.Module], capabilities: Capabilities) -> None:
    """Records the capabilities of a registered model class (`register_model`, after
    `check_model_class`), which `capabilities(model)` then answers.

    Raises:
        ValueError: the class is registered already (under another name).
    """
    if cls in _DECLARED:
        raise ValueError(f"{cls.__name__} is registered already: one name per model class")
    _DECLARED[cls] = capabilities


def _is_frozen_dataclass(cls: type) -> bool:
    if not dataclasses.is_dataclass(cls):
        return False
    return bool(cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]


def _defines(cls: type, method: str) -> bool:
    """Whether `cls` or one of its bases other than nn.Module defines `method`."""
    return any(method in vars(klass) for klass in cls.__mro__ if klass not in (nn.Module, object))


def unwrap(model: nn.Module) -> nn.Module:
    """The registered model inside the wrappers it may be trained or saved in."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
            model = model.module
        elif isinstance(model, WithOverlapFeatures):
            model = model.inner
        else:
            return model


def capabilities(model: nn.Module) -> Capabilities:
    """What `model` (its registered class, seen through wrappers) declared at registration.

    Raises:
        TypeError: the model's class is not registered (`attnmatch.models.register_model`).
    """
    inner = unwrap(model)
    for klass in type(inner).__mro__:
        if klass in _DECLARED:
            return _DECLARED[klass]
    raise TypeError(
        f"{type(inner).__name__} is not a registered model (attnmatch.models): its "
        "capabilities are unknown"
    )


def model_config(model: nn.Module) -> ModelConfig:
    """The model's config (`config`, a required member)."""
    return cast(MatchingModel, unwrap(model)).config


def token_encoder(model: nn.Module) -> nn.Module:
    """The model's input layer (`token_encoder`, a required member).

    Raises:
        TypeError: the model has none (it is not a matching model).
    """
    encoder = cast(MatchingModel, unwrap(model)).token_encoder
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"{type(model).__name__} has no token encoder")
    return encoder


def attention_maps(model: nn.Module, batch: PairBatch) -> dict[str, torch.Tensor]:
    """The model's attention maps of `batch`, each (B, ...) (capability `explains`).

    Raises:
        NotImplementedError: the model does not explain.
    """
    if not capabilities(model).explains:
        raise NotImplementedError(f"{type(unwrap(model)).__name__} exposes no attention maps")
    return cast(Explains, unwrap(model)).attention(batch)


def auxiliary_terms(model: nn.Module) -> dict[str, torch.Tensor]:
    """The scalar training terms of the model's last forward pass (capability
    `auxiliary_loss`); empty for a model without the capability."""
    if not capabilities(model).auxiliary_loss:
        return {}
    return cast(AuxiliaryLoss, unwrap(model)).auxiliary_terms()


class TextModel(nn.Module, abc.ABC):
    """A model that reads the texts of each pair themselves, not ids (a lexical matcher,
    `attnmatch.lexical`): no inputs, no token encoder, no weights (a lexical matcher's folder
    holds its head and corpus instead: `attnmatch.lexical_dir`).

    A declared type, so that a `Matcher` decides once, when it is built, whether it feeds ids
    to a matching model or texts to a text model. It is a module without parameters only so that
    a Matcher moves and switches it like any model; `forward` refuses id batches.

    Shape:
        N (left, right) texts -> (N, num_outputs)
    """

    @property
    @abc.abstractmethod
    def num_outputs(self) -> int:
        """C, the outputs per pair."""

    @abc.abstractmethod
    def score_texts(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]:
        """The outputs of (left, right) pairs: (N, num_outputs) float32."""

    @abc.abstractmethod
    def save_refusal(self) -> str:
        """The one line `Matcher.save` raises for a text model that has no folder format (a
        lexical matcher has one): why it cannot be saved, and how to build it again."""

    def fingerprint(self) -> str:
        """What decides its outputs besides its (absent) weights, as text that changes when
        they change (e.g. a distillation's cache of a teacher's scores is keyed by it)."""
        return type(self).__name__

    def forward(self, batch: PairBatch) -> torch.Tensor:
        raise TypeError(
            f"a text model ({type(self).__name__}) scores texts, not id batches: use "
            "Matcher.score, rank, outputs or evaluate"
        )
