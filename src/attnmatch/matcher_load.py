"""Reading a model directory or an exported one into the parts of a `Matcher`, strictly:
every key known and of its type, every weight present, shaped, typed and finite, the inputs
those the model reads (`Matcher.load`)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from attnmatch import lexical_dir, model_dir
from attnmatch.configs import ConfigError
from attnmatch.export import check_exported_files, load_onnx_model
from attnmatch.inputs import KINDS, Inputs, inputs_class, load_inputs
from attnmatch.model_header import (
    check_task_fits,
    load_task,
    naming,
    read_exported_header,
    read_metrics,
)
from attnmatch.models import build_model, get_model_entry, model_config_from_dict
from attnmatch.models.contract import TextModel, model_config
from attnmatch.nn.overlap import WithOverlapFeatures
from attnmatch.runtime.exported import check_exported_backend as check_exported_backend
from attnmatch.tasks import Task


class LoadedModel(NamedTuple):
    """What a directory holds: the fields of a `Matcher` it is read into."""

    model: nn.Module
    model_type: str
    inputs: Inputs | None  # None: a lexical matcher, which reads the texts themselves
    task: Task
    metrics: dict[str, Any]
    path: Path


def read_model_dir(path: str | Path, device: torch.device) -> LoadedModel:
    """A model directory's model, on `device`, built under a forked random generator (the
    caller's is untouched)."""
    files = model_dir.read(path)
    header = files.header
    config_file = files.path / "config.json"
    model_type = header["model_type"]
    if lexical_dir.is_lexical(model_type):
        return _read_lexical(files)
    with naming(config_file):
        get_model_entry(model_type)  # an unknown model type: the registered ones listed
        config = model_config_from_dict(model_type, header["config"], path="config")
    task = load_task(config_file, header["task"])
    check_task_fits(config_file, task, getattr(config, "num_outputs", None))
    overlap = header["features"]["overlap"] if "features" in header else None
    try:  # shapes first, on the meta device: a config of huge sizes allocates nothing
        with _on_meta_device():
            template = _build(model_type, config, overlap)
    except Exception as e:
        reason = " ".join(str(e).split())[:300]
        raise ValueError(
            f"{config_file}: the model config describes a model that cannot be built "
            f"({type(e).__name__}: {reason})"
        ) from e
    model_dir.check_weights(template, files)
    with torch.random.fork_rng(devices=[]):  # the caller's random generator is untouched
        model = _build(model_type, config, overlap)
    # Checked above against the template, which the same config builds with the same
    # tensors: loaded without checking them a second time (tied weights: one name is enough).
    model.load_state_dict(files.state, strict=False)
    model.to(device).eval()
    inputs = _load_inputs(files, header["inputs"])
    _check_inputs_fit(files.path, model, inputs)
    return LoadedModel(model, model_type, inputs, task, files.metrics, files.path)


def _read_lexical(files: model_dir.ModelFiles) -> LoadedModel:
    """A lexical matcher's folder (`attnmatch.lexical_dir`), its task fitting its head."""
    config_file = files.path / "config.json"
    task = load_task(config_file, files.header["task"])
    model = lexical_dir.read(files)
    with naming(config_file):
        task.check_num_outputs(model.num_outputs)
    return LoadedModel(model, files.header["model_type"], None, task, files.metrics, files.path)


def save_text_model(model: TextModel, path: Path, task: Task, metrics: dict[str, Any]) -> Path:
    """The model folder of a model that reads texts (`Matcher.save`): a lexical matcher's
    (`attnmatch.lexical_dir`).

    Raises:
        ValueError: another text model (its `save_refusal`).
    """
    from attnmatch.lexical import LexicalModel

    if not isinstance(model, LexicalModel):
        raise ValueError(model.save_refusal())
    return lexical_dir.save(model, path, task, metrics)


def read_exported(path: Path) -> LoadedModel:
    """An exported directory's graphs under ONNX Runtime (`attnmatch.export`), every file
    checked first against what onnx.json recorded at export (`check_exported_files`)."""
    check_exported_files(path)
    config_file = path / "config.json"
    header = read_exported_header(path)
    model_type = header["model_type"]
    with naming(config_file):
        config = model_config_from_dict(model_type, header["config"], path="config")
    task = load_task(config_file, header["task"])
    check_task_fits(config_file, task, getattr(config, "num_outputs", None))
    model = load_onnx_model(path, config)
    try:
        inputs = load_inputs(path, header["inputs"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{config_file}: inputs: {' '.join(str(e).split())}") from e
    _check_inputs_fit(path, model, inputs)
    return LoadedModel(model, model_type, inputs, task, read_metrics(path), path)


BACKENDS = ("auto", "torch", "onnx")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def check_onnx_device(device: torch.device, precision: str) -> None:
    """An exported model runs on the CPU in float32 (ONNX Runtime's CPU provider)."""
    if device.type != "cpu" or precision != "fp32":
        raise ValueError(
            f"an ONNX model runs on the CPU in fp32 (got device {device}, precision "
            f"{precision}): use backend torch for a GPU or another precision"
        )


def check_batch_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {size!r}")


class _SkipRandomFills(TorchFunctionMode):
    """Random initialisation of a meta tensor does nothing (it has no values to fill); run in
    Python, it would import torch's compiler (`torch._dynamo`, a second or so) to do nothing."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
        name = getattr(func, "__name__", "")
        if name in _RANDOM_FILLS and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)


_RANDOM_FILLS = frozenset(
    {
        "normal_",
        "uniform_",
        "trunc_normal_",
        "kaiming_normal_",
        "kaiming_uniform_",
        "xavier_normal_",
        "xavier_uniform_",
        "orthogonal_",
        "bernoulli_",
        "exponential_",
        "random_",
    }
)


@contextmanager
def _on_meta_device() -> Iterator[None]:
    """Tensors created in the body live on the meta device: shapes without memory.

    An operation that torch runs in Python on meta tensors imports its compiler
    (`torch._dynamo`) the first time, which sets an environment variable and a warnings
    filter: both are put back as they were, so that loading a model changes no process-wide
    setting.
    """
    environ = dict(os.environ)
    with warnings.catch_warnings(), _SkipRandomFills(), torch.device("meta"):
        try:
            yield
        finally:
            for key in set(os.environ) - set(environ):
                del os.environ[key]
            for key, value in environ.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value


def _build(model_type: str, config: Any, overlap: int | None) -> nn.Module:
    """The registered model of a directory, with its exact-match features (`overlap`: the
    size of their idf table) added to its outputs when it has them."""
    model = build_model(model_type, config)
    if overlap is None:
        return model
    return WithOverlapFeatures(model, config.num_outputs, torch.zeros(overlap))


def _load_inputs(files: model_dir.ModelFiles, entry: dict[str, Any]) -> Inputs:
    """The directory's inputs; an error that does not name its file is given the file (the
    kind's `Inputs.state_file`, or config.json for a setting)."""
    try:
        return load_inputs(files.path, entry)
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        if isinstance(e, RecursionError):
            message = f"JSON nested deeper than {model_dir.MAX_JSON_DEPTH} levels"
        if str(files.path) in message:
            raise
        kind = entry.get("kind")
        known = not isinstance(e, ConfigError) and kind in KINDS
        name = inputs_class(str(kind)).state_file if known else "config.json"
        raise ValueError(f"{files.path / name}: {' '.join(message.split())}") from e


def _check_inputs_fit(path: Path, model: nn.Module, inputs: Inputs) -> None:
    """The model reads the inputs' kind, and the ids the inputs give are the rows of its
    embedding table, all of them (`Inputs.check_fits`)."""
    encoder = model_config(model).encoder
    if encoder.kind != inputs.kind:
        raise ValueError(
            f"{path / 'config.json'}: the inputs are {inputs.kind} but the model reads "
            f"{encoder.kind} (config.encoder.kind): the files do not belong together"
        )
    inputs.check_fits(encoder.vocab_size, path)
