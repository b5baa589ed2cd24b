"""Export to ONNX and run under ONNX Runtime (`export_onnx`, `attnmatch export`).

An exported directory keeps the model directory's files that are not weights (config.json with
its model type, model config, task and inputs; tokenizer.json or vocab.json; metrics.json) and
holds ONNX graphs instead of model.safetensors:

    config.json        as in the model directory (`attnmatch.model_dir`)
    tokenizer.json     or vocab.json: the inputs, as in the model directory
    metrics.json       as in the model directory (when it has one)
    onnx.json          {"format": "attnmatch.onnx/1", "form", "graphs": {name: file},
                        "quantize": null | "int8", "int8": {how int8 was written} (int8 only),
                        "max_length": the packed form's cut of a pair (form "packed" only),
                        "opset"}
    text.onnx, head.onnx (form "towers"), packed.onnx (form "packed") or pairs.onnx ("pairs")

`Matcher.load` reads it with no Python class of the model (`runtime.OnnxModel`). Export checks
that the float32 graphs equal the model's `forward` within `EXACT_ATOL` on pairs of other
lengths than the example it traces, and refuses a model whose graphs do not
(`graphs.py` says why a traced `forward` may not). int8 is ONNX Runtime's dynamic quantisation
(`onnxruntime.quantization.quantize_dynamic`: int8 weights of the matrix products, a scale per
output channel, activations quantised per batch at run time; `INT8`, recorded in onnx.json);
its metric change is measured, not checked (docs/speed.md).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from attnmatch import __version__
from attnmatch.atomic import atomic_directory
from attnmatch.data.collate import collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.export.graphs import Graph, eager_attention, graphs_of
from attnmatch.export.runtime import OnnxModel, predict_onnx
from attnmatch.models.contract import TextModel
from attnmatch.runtime.graphs import (
    FORMAT,
    MANIFEST,
    PACKED_INPUTS,
    QUANTIZE,
    OnnxGraphs,
    is_exported,
    load_graphs,
    pack_pair_ids,
    recorded_files,
    session,
)
from attnmatch.runtime.graphs import (
    check_exported_files as check_exported_files,
)

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher

OPSET = 17
EXACT_ATOL = 1e-5  # float32 graphs against `forward`, on the probe pairs
# How `quantize="int8"` writes the graphs (recorded in onnx.json as "int8"; docs/speed.md has
# the variants measured): ONNX Runtime's dynamic quantisation, int8 weights symmetric per
# output channel, full range, of every operator it quantises (the matrix products, and the
# embeddings' lookups per tensor); no node kept in float32. sentence-transformers' "avx512_vnni"
# configuration; of the variants measured, the one that keeps the zero-shot MiniLM
# bi-encoder's WikiQA test MAP within .005 (-.0049; per tensor -.0143).
INT8: dict[str, Any] = {
    "weights": "int8",
    "per_channel": True,
    "reduce_range": False,
    "symmetric_weights": True,
    "operators": [
        "Conv",
        "MatMul",
        "Attention",
        "LSTM",
        "Gather",
        "Transpose",
        "EmbedLayerNormalization",
    ],
    "exclude": [],
}
_FILES_KEPT = ("config.json", "tokenizer.json", "vocab.json", "metrics.json")
# Texts of the example and probe pairs: of several lengths, so that a graph that froze a
# length of the example is caught on the others.
_TEXTS = (
    "how are glacier caves formed?",
    "A glacier cave is a cave formed within the ice of a glacier.",
    "The Alps",
    "what is the capital of france and how many people live there today",
    "Paris is the capital and most populous city of France, with an estimated population of "
    "about two million residents in the city proper.",
    "ok",
)


def export_onnx(
    matcher: Matcher,
    path: str | Path,
    *,
    quantize: str | None = None,
    int8: dict[str, Any] | None = None,
) -> Path:
    """Writes the exported directory of `matcher` (atomically) and returns its path: the model
    as ONNX graphs with dynamic batch and length axes (exported from a CPU copy), beside its
    config.json and inputs, so that `Matcher.load(path)` runs it on ONNX Runtime with no
    Python class of the model.

    Args:
        quantize: None (float32, equal to torch within `EXACT_ATOL`: checked on export) or
            "int8" (ONNX Runtime's dynamic int8 quantisation of the matrix products).
        int8: how int8 quantises (`INT8`'s keys; default `INT8`), for comparing variants.

    Raises:
        ValueError: a lexical or already exported matcher, an unknown `quantize`, a model
            that does not export (traced graphs that differ from `forward`; the difference
            named; docs/speed.md lists them), or `path` is not a folder to write.
    """
    if isinstance(matcher.model, OnnxModel):
        raise ValueError("this matcher runs an exported model already: copy its directory")
    if isinstance(matcher.model, TextModel):
        raise ValueError(f"a {matcher.model_type} matcher has no weights to export")
    with tempfile.TemporaryDirectory() as saved:
        header_files = _kept_files(matcher.save(Path(saved) / "model"))
    if quantize not in QUANTIZE:
        raise ValueError(f"quantize must be None or 'int8', got {quantize!r}")
    unknown = sorted(set(int8 or {}) - set(INT8))
    if unknown or (int8 or {}).get("weights", "int8") not in ("int8", "uint8"):
        raise ValueError(f"int8 takes {sorted(INT8)} (weights 'int8' or 'uint8'), got {int8!r}")
    path = Path(path)
    if path.exists() and not (path.is_dir() and (is_exported(path) or not any(path.iterdir()))):
        raise ValueError(
            f"{path} exists and is not an exported directory: not replacing it (choose another "
            "path, or remove it first)"
        )
    model = copy.deepcopy(matcher.model).cpu().eval()
    eager_attention(model)
    probe = matcher.encode(_probe_examples())
    form, graphs = graphs_of(model)
    max_length = next((g.max_length for g in graphs if g.max_length is not None), None)
    with atomic_directory(path) as tmp:
        files = {g.name: _export_graph(g, model, form, probe, tmp) for g in graphs}
        _check_exact(model, form, files, probe, tmp, max_length)
        int8 = INT8 if int8 is None else INT8 | int8
        if quantize == "int8":
            for name in files:
                _quantize_int8(tmp / files[name], int8)
        for name, text in header_files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "attnmatch_version": __version__,
            "form": form,
            "graphs": files,
            "quantize": quantize,
            "opset": OPSET,
        }
        if quantize == "int8":
            manifest["int8"] = int8
        if max_length is not None:
            manifest["max_length"] = max_length
        manifest["files"] = recorded_files(tmp)  # every file's size and sha256, checked on load
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path


def load_onnx_model(path: str | Path, config: Any, *, threads: int | None = None) -> OnnxModel:
    """The graphs of an exported directory under ONNX Runtime (`attnmatch.runtime.graphs.
    load_graphs`), on `threads` intra-op threads (default: torch's thread count), as the
    module a `Matcher` runs.

    Raises:
        FileNotFoundError: onnx.json or a graph file is missing (named).
        ValueError: onnx.json is malformed (the field named) or a graph cannot be read.
    """
    num_outputs = getattr(config, "num_outputs", None)
    graphs = load_graphs(path, num_outputs, threads or torch.get_num_threads())
    return OnnxModel(graphs, config)


_NATIVE_LOCK = threading.Lock()  # one redirection of fds 1 and 2 at a time (`_native_quiet`)


@contextmanager
def _native_quiet() -> Iterator[None]:
    """The process's file descriptors 1 and 2 sent to /dev/null for the body, then put back:
    what torch's C++ exporter writes there itself (`[W ... shape_type_inference.cpp]`
    warnings; the whole graph, "Torch IR graph at exception", when it fails), which neither
    Python's warning filters nor logging reach. Export raises its own errors and writes no
    output of its own, so nothing of the caller's is lost."""
    with _NATIVE_LOCK:
        _flush()
        saved = [os.dup(fd) for fd in (1, 2)]
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                for fd in (1, 2):
                    os.dup2(null, fd)
            finally:
                os.close(null)
            yield
        finally:
            _flush()
            for fd, copy_ in zip((1, 2), saved, strict=True):
                os.dup2(copy_, fd)
                os.close(copy_)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


@contextmanager
def _quiet() -> Iterator[None]:
    """The exporters' and the quantiser's log lines (torch's and the root logger's) silenced
    for the body: export reports its own errors."""
    loggers = [logging.getLogger(), logging.getLogger("torch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _probe_examples() -> list[Any]:
    from attnmatch.data.schema import Example

    pairs = [(a, b) for a in _TEXTS for b in _TEXTS]
    return [Example(left=a, right=b, label=0) for a, b in pairs]


def _export_graph(graph: Graph, model: nn.Module, form: str, probe: EncodedPairs, tmp: Path) -> str:
    """Exports `graph` on an example from `probe` into tmp/<name>.onnx with its exporter
    (`Graph.exporter`); returns the file name."""
    dynamo = graph.exporter == "torch.export"
    batch = collate(probe, np.arange(4))  # the first text against four of several lengths
    if graph.inputs == ("ids", "mask"):
        args: tuple[torch.Tensor, ...] = (batch.right_ids, batch.right_mask)
    elif graph.inputs == ("u", "v"):
        text = graphs_of(model)[1][0].module
        with torch.inference_mode():
            args = (text(batch.left_ids, batch.left_mask), text(batch.right_ids, batch.right_mask))
    elif graph.inputs == PACKED_INPUTS:  # pairs of several lengths: padding at rows' ends
        assert graph.max_length is not None
        texts = [probe.texts[t] for t in probe.left[:4]], [probe.texts[t] for t in probe.right[:4]]
        args = tuple(torch.from_numpy(x) for x in pack_pair_ids(*texts, graph.max_length))
    else:
        args = (batch.left_ids, batch.left_mask, batch.right_ids, batch.right_mask)
    file = f"{graph.name}.onnx"
    try:
        with warnings.catch_warnings(), torch.no_grad(), _quiet(), _native_quiet():
            warnings.simplefilter("ignore")
            if dynamo:
                dims = {
                    n: torch.export.Dim(n) for axes in graph.axes.values() for n in axes.values()
                }
                shapes = tuple({i: dims[n] for i, n in graph.axes[x].items()} for x in graph.inputs)
                options: dict[str, Any] = {
                    "opset_version": max(OPSET, 18),  # torch.export's exporter writes 18 or later
                    "dynamic_shapes": shapes,
                    "external_data": False,
                    "report": False,
                    "verbose": False,
                }
            else:
                options = {"opset_version": OPSET, "dynamic_axes": graph.axes}
            torch.onnx.export(
                graph.module,
                args,
                str(tmp / file),
                dynamo=dynamo,
                input_names=list(graph.inputs),
                output_names=[graph.output],
                **options,
            )
    except Exception as e:
        reason = " ".join(str(e).split())[:200]
        how = "torch.export" if dynamo else "tracing"
        raise ValueError(
            f"the {type(model).__name__} model does not export to ONNX: {how} of its {form} "
            f"graph failed ({type(e).__name__}: {reason})"
        ) from e
    return file


def _check_exact(
    model: nn.Module,
    form: str,
    files: dict[str, str],
    probe: EncodedPairs,
    tmp: Path,
    max_length: int | None,
) -> None:
    """The float32 graphs give `forward`'s outputs on every probe pair (36 pairs of 6 texts of
    several lengths, in batches of several sizes; for the packed form also pairs packed past
    `max_length`, which both cut) within EXACT_ATOL; else a ValueError."""
    sessions = {n: session(tmp / f, 1) for n, f in files.items()}
    onnx_model = OnnxModel(OnnxGraphs(form, sessions, None, max_length), None)
    checks: list[tuple[EncodedPairs, tuple[int, ...]]] = [(probe, (7, 36))]
    if max_length is not None:
        checks.append((_long_probe(probe, max_length), (3,)))
    worst = 0.0
    for data, sizes in checks:
        with torch.inference_mode():
            expected = model(collate(data, np.arange(len(data)))).float().numpy()  # (N, C)
        try:
            got = [predict_onnx(onnx_model, data, size).numpy() for size in sizes]
        except Exception as e:  # ONNX Runtime refuses a shape the trace froze
            reason = " ".join(str(e).split())[:200]
            raise ValueError(
                f"the {type(model).__name__} model does not export to ONNX: its traced graph "
                f"fails on pairs of other lengths than the example's ({reason}); its forward "
                "decides shapes from values"
            ) from e
        worst = max([worst] + [float(np.abs(g - expected).max()) for g in got])
    if not worst <= EXACT_ATOL:
        raise ValueError(
            f"the {type(model).__name__} model does not export to ONNX: its traced graph "
            f"differs from forward by {worst:.3g} (> {EXACT_ATOL}) on pairs of other lengths "
            "than the example's; its forward decides from values (lengths, .item())"
        )


def _long_probe(probe: EncodedPairs, max_length: int) -> EncodedPairs:
    """Pairs whose packed length passes `max_length` (the right text cut, its last token
    lost), and one that fits: texts of the probe's longest text's word pieces repeated, each
    at most `max_length` tokens."""
    longest = max(probe.texts, key=len)  # [CLS] ... [SEP]
    inner = longest[1:-1]

    def text(n: int) -> np.ndarray:
        body = np.resize(inner, max(n - 2, 0))
        return np.concatenate([longest[:1], body, longest[-1:]]).astype(np.int64)

    half = max_length // 2 + 1
    texts = [text(max_length - 1), text(6), text(half), text(half), text(3)]
    left, right = np.array([0, 2, 4], dtype=np.int64), np.array([1, 3, 1], dtype=np.int64)
    return EncodedPairs(
        texts=texts,
        left=left,
        right=right,
        labels=np.zeros(3, dtype=np.float32),
        group_ids=np.arange(3, dtype=np.int64),
        group_names=["0", "1", "2"],
    )


def _quantize_int8(file: Path, options: dict[str, Any]) -> None:
    """Replaces the graph `file` by ONNX Runtime's dynamic int8 quantisation as `options` say
    (`INT8`'s keys): int8 weights of the named operators, per output channel or per tensor,
    activations quantised per batch at run time; nodes whose name contains a string of
    `exclude` stay float32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded = [
        node.name
        for node in onnx.load(str(file), load_external_data=False).graph.node
        if any(part in node.name for part in options["exclude"])
    ]
    out = file.with_name(file.stem + ".int8.onnx")
    with _quiet():
        quantize_dynamic(
            file,
            out,
            weight_type=QuantType.QInt8 if options["weights"] == "int8" else QuantType.QUInt8,
            per_channel=options["per_channel"],
            reduce_range=options["reduce_range"],
            op_types_to_quantize=list(options["operators"]),
            nodes_to_exclude=excluded,
            extra_options={"WeightSymmetric": options["symmetric_weights"]},
        )
    out.replace(file)


def _kept_files(directory: Path) -> dict[str, str]:
    """The text of the files an export keeps from a model directory (`_FILES_KEPT`)."""
    return {
        name: (directory / name).read_text(encoding="utf-8")
        for name in _FILES_KEPT
        if (directory / name).is_file()
    }
