"""`attnmatch export`: a saved model (or a zero-shot encoder) as ONNX graphs."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from attnmatch.cli.console import err
from attnmatch.cli.files import reading, writing
from attnmatch.terminal import shown


class _Format(StrEnum):
    onnx = "onnx"


class _Quantize(StrEnum):
    int8 = "int8"


def export(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The exported directory to write.")
    ],
    format: Annotated[_Format, typer.Option("--format", help="The export format.")] = _Format.onnx,
    quantize: Annotated[
        _Quantize | None,
        typer.Option(
            "--quantize",
            help="int8: ONNX Runtime's dynamic int8 matrix products, weights per output "
            "channel (default: float32, equal to torch within 1e-5).",
        ),
    ] = None,
) -> None:
    """Export a model as ONNX graphs (dynamic batch and length) beside its config and inputs.

    The directory loads with `Matcher.load` and every command that takes a model (rank, score,
    evaluate, serve), run by ONNX Runtime, with no Python class of the model.
    """
    from attnmatch.export import export_onnx
    from attnmatch.matcher import load_matcher

    with reading(model_dir):
        matcher = load_matcher(model_dir, backend="torch")
    with writing(output, "--output"):
        written = export_onnx(matcher, output, quantize=quantize.value if quantize else None)
    err.print(shown(f"exported {model_dir} to {written}"), highlight=False, soft_wrap=True)
