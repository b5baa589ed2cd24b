"""Whole-input CPU inference paths, registered by the exact class of the model they run.

A fast module registers one function per paper model; `inference_for` binds it to a model:

    @register_inference(MVLSTM)
    def predict_mvlstm(model: MVLSTM, data: EncodedPairs, batch_size: int) -> torch.Tensor:
        ...                                                       # (N, num_outputs)

    run = inference_for(model)       # None: no path for this model (run `forward` per batch)
    outputs = run(data, batch_size)  # in eval mode, under torch.inference_mode

A second registration for one class raises. The lookup is by exact class (a subclass may
change what `forward` computes), and `applies(model)` may refuse a configuration the path does
not cover (e.g. IARNN's GRU and OARNN variants).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from attnmatch.data.encoding import EncodedPairs

InferencePath = Callable[[EncodedPairs, int], torch.Tensor]
_M = TypeVar("_M", bound=nn.Module)


@dataclass(frozen=True)
class _Entry:
    run: Callable[[Any, EncodedPairs, int], torch.Tensor]
    applies: Callable[[Any], bool]


_PATHS: dict[type[nn.Module], _Entry] = {}


def _always(model: nn.Module) -> bool:
    return True


def register_inference(
    model_cls: type[_M], *, applies: Callable[[_M], bool] | None = None
) -> Callable[
    [Callable[[_M, EncodedPairs, int], torch.Tensor]],
    Callable[[_M, EncodedPairs, int], torch.Tensor],
]:
    """Decorator registering `fn(model, data, batch_size) -> (N, num_outputs)` as the whole-input
    CPU inference path of models of exactly `model_cls` (for which `applies(model)`, if given).

    Raises:
        ValueError: `model_cls` already has a path.
    """

    def register(
        fn: Callable[[_M, EncodedPairs, int], torch.Tensor],
    ) -> Callable[[_M, EncodedPairs, int], torch.Tensor]:
        if model_cls in _PATHS:
            raise ValueError(
                f"{model_cls.__name__} already has a whole-input inference path "
                f"({_PATHS[model_cls].run.__qualname__})"
            )
        _PATHS[model_cls] = _Entry(fn, applies or _always)
        return fn

    return register


def inference_for(model: nn.Module) -> InferencePath | None:
    """The whole-input inference path of `model`, `run(data, batch_size) -> (N, num_outputs)`
    float32, bound to it; None when its class has none or the path does not apply to it."""
    entry = _PATHS.get(type(model))
    if entry is None or not entry.applies(model):
        return None
    return functools.partial(entry.run, model)
