"""Option values several commands share: `--set KEY=VALUE`, `--seeds`, `--device` and
`--precision`, and the name of a model folder (a run tag, a served model's name)."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

MAX_KEY_PARTS = 8  # the deepest config key is 3 levels (data.options.task)


def _parse_value(text: str, option: str) -> Any:
    """A `--set` value as TOML (0.01, true, [1, 2], "x"), else the text as a bare string."""
    import tomllib

    if any(c in text for c in "\n\r"):
        raise typer.BadParameter(f"a value is one line, got {text!r}", param_hint=option)
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string
    except RecursionError:
        raise typer.BadParameter(
            f"{text[:40]!r}...: nested too deeply", param_hint=option
        ) from None


def _finite(value: Any) -> bool:
    """Whether every number in `value` (nested lists and tables) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def parse_sets(items: list[str], option: str = "--set") -> dict[str, Any]:
    """`--set train.lr=0.01 --set model_overrides.k=50` -> a nested dict (values parsed as TOML).

    Refused, naming `option`: an item without '=', an empty key part (`train..lr`), a number
    that is not finite (`nan`, `inf`), and a key set both as a value and as a table
    (`train=1` with `train.lr=2`). The same key given twice: the last wins.
    """
    result: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = [part.strip() for part in key.split(".")]
        if not sep or not all(parts):
            raise typer.BadParameter(
                f"expected KEY=VALUE with a dotted KEY such as train.lr=0.01, got {item!r}",
                param_hint=option,
            )
        if len(parts) > MAX_KEY_PARTS:
            raise typer.BadParameter(
                f"{key[:60]!r}: at most {MAX_KEY_PARTS} dotted parts", param_hint=option
            )
        key = ".".join(parts)
        value = _parse_value(text.strip(), option)
        if not _finite(value):
            raise typer.BadParameter(
                f"{key}={text.strip()}: not a finite number; give a number such as 0.01",
                param_hint=option,
            )
        node = result
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise typer.BadParameter(
                    f"{'.'.join(parts[: i + 1])} is given a value and also {key}; give one",
                    param_hint=option,
                )
            node = child
        if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
            raise typer.BadParameter(
                f"{key} is given a value and also keys inside it; give one", param_hint=option
            )
        node[parts[-1]] = value
    return result


def parse_seeds(text: str | None, option: str = "--seeds") -> list[int] | None:
    """`--seeds N` (seeds 1..N, N >= 1) or a list `1,2,3` of distinct integers >= 0."""
    from attnmatch.configs import MAX_SEEDS, ConfigError, check_seeds

    if text is None:
        return None
    text = text.strip()
    usage = "give N (seeds 1..N) or distinct seeds like 1,2,3"
    if text.isascii() and text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_SEEDS:
            raise typer.BadParameter(
                f"{text}: N must be 1..{MAX_SEEDS} (N runs, seeds 1..N)", param_hint=option
            )
        return list(range(1, count + 1))  # "--seeds 3" means seeds 1, 2, 3
    items = [s.strip() for s in text.split(",")]
    if not text or not all(s.isascii() and s.isdigit() for s in items):
        raise typer.BadParameter(f"{text!r}: {usage} (integers >= 0)", param_hint=option)
    try:
        return list(check_seeds([int(s) for s in items], option))
    except ConfigError as e:
        reason = str(e).removeprefix(f"{option}: ")
        raise typer.BadParameter(f"{reason}; {usage}", param_hint=option) from None


class Precision(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


DEVICE_HELP = "Where the model runs: cpu, cuda, cuda:N, or auto (CUDA when available, else cpu)."


PRECISION_HELP = (
    "fp32, or bf16 / fp16: forward passes under torch.autocast, scores still float32 "
    "(fp16 needs CUDA)."
)


DeviceOption = Annotated[str, typer.Option("--device", help=DEVICE_HELP)]


class Backend(StrEnum):
    auto = "auto"
    torch = "torch"
    onnx = "onnx"


_BACKEND_HELP = (
    "What runs the model: torch, onnx (ONNX Runtime on the CPU in fp32; a model directory is "
    "exported first, an exported one runs as it is), or auto (onnx for an exported directory, "
    "else torch; docs/speed.md)."
)


BackendOption = Annotated[Backend, typer.Option("--backend", help=_BACKEND_HELP)]


def load_model(spec: str, device: Any, precision: Precision, backend: Backend) -> Any:
    """A command's MODEL with its --device, --precision and --backend (`attnmatch.loading.
    load_served`: an exported directory on `attnmatch.runtime`, with no torch imported)."""
    from attnmatch.loading import load_served

    return load_served(spec, device, precision.value, backend.value)


def model_device(spec: str, device: str, precision: str, backend: Backend) -> Any:
    """Where the command's MODEL runs: for an exported directory None (ONNX Runtime on the CPU
    in fp32; `--backend torch`, a GPU or another precision refused in one line, with no torch
    imported), else `--device` as the torch device it means (`checked_device`)."""
    from attnmatch.runtime import check_cpu_fp32, check_exported_backend, is_exported

    if is_exported(spec):
        check_exported_backend(spec, backend.value)
        check_cpu_fp32(device, precision)
        return None
    return checked_device(device, precision)


PrecisionOption = Annotated[Precision, typer.Option("--precision", help=PRECISION_HELP)]


def checked_device(device: str, precision: str) -> Any:
    """`--device` as the torch device it means here, checked with `--precision`: one clear
    line for a misspelt device, CUDA where there is none, or fp16 on the CPU."""
    from attnmatch.devices import check_precision, resolve_device

    torch_device = resolve_device(device, "--device")
    check_precision(precision, torch_device, "--precision")
    return torch_device


def default_run_tag(model_dir: str) -> str:
    """The default TREC run tag: the model directory's name (its run's for RUN/model), or the
    encoder's name."""
    path = Path(model_dir)
    name = path.name or path.resolve().name
    if name == "model" and path.parent.name:
        name = path.parent.name
    return "".join(c if c.isprintable() and not c.isspace() else "_" for c in name) or "attnmatch"
