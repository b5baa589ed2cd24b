"""The ONNX graphs of a model: which computation each graph holds, its inputs and dynamic axes.

A model exports in one of three forms (`FORMS`, by the model's exact class, like the whole-input
paths of `models/fast/`):

- **towers** (the bi-encoder): a `text` graph, (ids (B, T), mask (B, T)) -> vectors (B, E), and
  a `head` graph, (u (B, E), v (B, E)) -> (B, C). The runtime encodes each distinct text once
  and scores the pairs from the vectors, as sentence-transformers encodes a corpus once.
- **packed** (the cross-encoder): one `packed` graph over pairs packed outside the graph as a
  tokenizer packs a pair (`runtime.pack_pair_ids`: `[CLS] a [SEP] b [SEP]`, cut to the model's
  max_length, right-padded), (ids (B, W), mask (B, W), types (B, W)) -> (B, C): the transformer
  and the model's head (`CrossEncoder.outputs`, which reads each text's span from the types).
- **pairs** (late interaction, every other model, and exports written before the packed form):
  one `pairs` graph, (left_ids (B, L), left_mask, right_ids (B, R), right_mask) -> (B, C).

The bi- and cross-encoder's graphs are written for export and equal `forward` up to float
rounding: `forward` decides things from values (it encodes a text repeated in a batch once; it
packs a pair to the longest pair's width, read with `.item()`; it sets a mask in place), which a
traced graph would freeze at the example's values. The graphs compute the same outputs without
those decisions (every row encoded; the cross-encoder's pairs packed before the graph, or, inside
the pairs graph of a cross-encoder with exact-match features, to the width L + R - 1 with the
extra columns masked). Every other model exports its own `forward`, traced inside
`nn.exporting.export_paths`: the shared building blocks that decide from values (the seed
models' BiLSTM and GRU over packed sequences, k-max pooling, convolution padding, IARNN-CONTEXT's
step loop) take paths there whose shapes follow the inputs. `export_onnx` keeps the graph only if
it equals `forward` (run outside the export paths) on pairs of other lengths than the example's
(`check_exact`).

Dims: B pairs or texts, T / L / R tokens, W = L + R - 1 packed tokens, E vector size,
C outputs, H hidden size.

A transformer exports with its eager attention (`eager_attention`): the same outputs as the
fused kernel it runs on torch (scaled_dot_product_attention), as plain matrix products and a
softmax, which ONNX Runtime runs 1.1x faster in float32 and 1.14x in int8 on one thread (MiniLM,
1,500 WikiQA test texts; docs/speed.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnmatch.data.schema import PairBatch
from attnmatch.inputs.transformer_layer import traceable_states
from attnmatch.models.contract import token_encoder, unwrap
from attnmatch.models.pretrained import BiEncoder, CrossEncoder
from attnmatch.nn.exporting import export_paths
from attnmatch.nn.masking import masked_mean
from attnmatch.nn.overlap import WithOverlapFeatures
from attnmatch.runtime.graphs import PACKED_INPUTS, PAIR_INPUTS

# The packed graph's exporter (`Graph.exporter`): both are exact on it (padding only at a row's
# end); this one runs faster under ONNX Runtime (docs/speed.md).
PACKED_EXPORTER = "trace"


@dataclass(frozen=True)
class Graph:
    """One graph to export: a module whose `forward` takes `inputs` (in order) and returns
    `output`; `axes[name]` names the dynamic axes of each input and of the output. `exporter`:
    "trace" (torch's TorchScript tracer, seconds) or "torch.export" (a minute or two for
    MiniLM; the tracer mis-exports the transformer over pairs packed inside the graph, whose
    masks have padding inside a row, and `torch.export` exports it exactly). `max_length`: the
    packed form's cut of a pair (recorded in onnx.json; the runtime packs to it)."""

    name: str
    module: nn.Module
    inputs: tuple[str, ...]
    output: str
    axes: dict[str, dict[int, str]]
    exporter: str = "trace"
    max_length: int | None = None


def _pair_axes(output: str) -> dict[str, dict[int, str]]:
    return {
        "left_ids": {0: "batch", 1: "left_length"},
        "left_mask": {0: "batch", 1: "left_length"},
        "right_ids": {0: "batch", 1: "right_length"},
        "right_mask": {0: "batch", 1: "right_length"},
        output: {0: "batch"},
    }


class _TextTower(nn.Module):
    """A bi-encoder's sentence vectors: (ids (B, T), mask (B, T)) -> (B, E)."""

    def __init__(self, model: BiEncoder) -> None:
        super().__init__()
        self.encoder = token_encoder(model)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = traceable_states(self.encoder, ids, mask)  # (B, T, E)
        return masked_mean(states, mask.unsqueeze(-1), dim=1)  # (B, E)


class _BiEncoderHead(nn.Module):
    """A bi-encoder's score from the two sentence vectors: (u (B, E), v (B, E)) -> (B, C)."""

    def __init__(self, model: BiEncoder) -> None:
        super().__init__()
        self.classifier = model.classifier  # the head's weights, and no encoder's
        self.compare = model.compare

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.compare(u, v)  # (B, C)


class _CrossEncoderPairs(nn.Module):
    """A cross-encoder over packed pairs (`pack_pairs`, to the static width L + R - 1 cut to
    the model's max_length): (left_ids, left_mask, right_ids, right_mask) -> (B, C)."""

    def __init__(self, model: CrossEncoder) -> None:
        super().__init__()
        self.encoder = token_encoder(model)
        self.model = model  # its head on the states (`CrossEncoder.outputs`, as `pooling` says)
        self.max_length = model.max_length

    def forward(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        # Sizes are read as tensors, never as Python numbers, which a trace would freeze.
        n_left = left_mask.sum(dim=1, keepdim=True)  # (B, 1)
        n_right = (right_mask.sum(dim=1, keepdim=True) - 1).clamp(min=0)  # (B, 1)
        total = (n_left + n_right).clamp(max=self.max_length)  # (B, 1)
        joined = torch.cat([left_ids, right_ids[:, 1:]], dim=1)  # (B, W)
        pos = torch.cumsum(torch.ones_like(joined[:1]), dim=1) - 1  # (1, W)
        width_l = torch.ones_like(left_ids[:1]).sum(dim=1, keepdim=True)  # (1, 1): L
        from_left = pos < n_left  # (B, W)
        # The right text's tokens follow the left text's real ones: skip the left padding.
        index = torch.where(from_left, pos, pos + width_l - n_left)  # (B, W)
        index = torch.minimum(index, pos[:, -1:])  # (B, W), within the W columns
        ids = joined.gather(1, index)  # (B, W)
        mask = pos < total  # (B, W)
        types = (~from_left & mask).long()  # (B, W)
        ids, mask, types = (t[:, : self.max_length] for t in (ids, mask, types))  # (B, W')
        hidden = traceable_states(self.encoder, ids * mask, mask, types)  # (B, W, H)
        return self.model.outputs(hidden, mask, types)  # (B, C)


class _CrossEncoderPacked(nn.Module):
    """A cross-encoder over pairs packed before the graph (`runtime.pack_pair_ids`, the
    packing of `pack_pairs`): (ids (B, W), mask (B, W), types (B, W)) -> (B, C). Padding is
    only at a row's end, as a tokenizer pads a batch of pairs."""

    def __init__(self, model: CrossEncoder) -> None:
        super().__init__()
        self.encoder = token_encoder(model)
        self.model = model  # its head on the states (`CrossEncoder.outputs`, as `pooling` says)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        hidden = traceable_states(self.encoder, ids, mask, types)  # (B, W, H)
        return self.model.outputs(hidden, mask, types)  # (B, C)


class _Forward(nn.Module):
    """A model's own `forward` over the four id tensors of a batch, inside the building blocks'
    export paths (`nn.exporting`): -> (B, C)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        b = left_ids.shape[0]
        batch = PairBatch(
            left_ids=left_ids,
            left_mask=left_mask,
            right_ids=right_ids,
            right_mask=right_mask,
            labels=torch.zeros(b),
            group_index=torch.zeros(b, dtype=torch.long),
        )
        with export_paths():  # the building blocks' traceable paths (`nn.exporting`)
            return self.model(batch)  # (B, C)


class _WithOverlapPairs(nn.Module):
    """A model with exact-match features (`WithOverlapFeatures`) whose inner model has graphs
    written for export, as one pairs graph: the inner graphs (a bi-encoder's text graph on
    each side and its head; a cross-encoder's packed pairs), plus the features' linear head.
    The features read both texts' ids, so the towers form (texts encoded alone) cannot hold
    them."""

    def __init__(self, model: WithOverlapFeatures, form: str, graphs: list[Graph]) -> None:
        super().__init__()
        self.features = model.features
        self.head = model.head
        self.graphs = nn.ModuleList(g.module for g in graphs)
        self.towers = form == "towers"

    def forward(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        if self.towers:
            text, head = self.graphs
            outputs = head(text(left_ids, left_mask), text(right_ids, right_mask))  # (B, C)
        else:
            outputs = self.graphs[0](left_ids, left_mask, right_ids, right_mask)  # (B, C)
        features = self.features(left_ids, left_mask, right_ids, right_mask)  # (B, 3)
        return outputs + self.head(features)  # (B, C)


def _with_overlap(model: nn.Module) -> tuple[str, list[Graph]]:
    assert isinstance(model, WithOverlapFeatures)
    inner = INNER_FORMS.get(type(model.inner))
    if inner is None:
        return _own_forward(model)
    form, graphs = inner(model.inner)
    exporter = "torch.export" if any(g.exporter == "torch.export" for g in graphs) else "trace"
    module = _WithOverlapPairs(model, form, graphs)
    return "pairs", [
        Graph("pairs", module, PAIR_INPUTS, "outputs", _pair_axes("outputs"), exporter)
    ]


def _towers(model: nn.Module) -> tuple[str, list[Graph]]:
    assert isinstance(model, BiEncoder)
    text_axes = {"ids": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}}
    head_axes = {"u": {0: "batch"}, "v": {0: "batch"}, "outputs": {0: "batch"}}
    return "towers", [
        Graph(
            "text",
            _TextTower(model),
            ("ids", "mask"),
            "vectors",
            text_axes | {"vectors": {0: "batch"}},
        ),
        Graph("head", _BiEncoderHead(model), ("u", "v"), "outputs", head_axes),
    ]


def _cross_pairs(model: nn.Module) -> tuple[str, list[Graph]]:
    assert isinstance(model, CrossEncoder)
    if model.late:  # each text's own positions: the model's forward, with symbolic sizes
        forward = _Forward(model)
        return "pairs", [
            Graph("pairs", forward, PAIR_INPUTS, "outputs", _pair_axes("outputs"), "torch.export")
        ]
    return "pairs", [
        Graph(
            "pairs",
            _CrossEncoderPairs(model),
            PAIR_INPUTS,
            "outputs",
            _pair_axes("outputs"),
            exporter="torch.export",
        )
    ]


def _cross_packed(model: nn.Module) -> tuple[str, list[Graph]]:
    assert isinstance(model, CrossEncoder)
    if model.late:  # each text keeps its own positions: no packing (`_cross_pairs`)
        return _cross_pairs(model)
    axes = {name: {0: "batch", 1: "width"} for name in PACKED_INPUTS}
    graph = Graph(
        "packed",
        _CrossEncoderPacked(model),
        PACKED_INPUTS,
        "outputs",
        axes | {"outputs": {0: "batch"}},
        exporter=PACKED_EXPORTER,
        max_length=model.max_length,
    )
    return "packed", [graph]


def _own_forward(model: nn.Module) -> tuple[str, list[Graph]]:
    return "pairs", [Graph("pairs", _Forward(model), PAIR_INPUTS, "outputs", _pair_axes("outputs"))]


# The export form of each model class with a graph written for export; others: `_own_forward`.
FORMS: dict[type[nn.Module], Callable[[nn.Module], tuple[str, list[Graph]]]] = {
    BiEncoder: _towers,
    CrossEncoder: _cross_packed,
}
# The graphs of a model inside a wrapper whose graph reads both texts' ids (`_with_overlap`):
# the cross-encoder packs its pairs inside that graph.
INNER_FORMS: dict[type[nn.Module], Callable[[nn.Module], tuple[str, list[Graph]]]] = {
    BiEncoder: _towers,
    CrossEncoder: _cross_pairs,
}
WRAPPERS: dict[type[nn.Module], Callable[[nn.Module], tuple[str, list[Graph]]]] = {
    WithOverlapFeatures: _with_overlap,  # the inner model's graphs, plus the features
}


def eager_attention(model: nn.Module) -> None:
    """Switches every Hugging Face transformer inside `model` (an export's copy) to its eager
    attention (module docstring); `export_onnx` checks the graphs against `forward` after."""
    for module in model.modules():
        switch: Any = getattr(module, "set_attn_implementation", None)
        if callable(switch):
            switch("eager")


def graphs_of(model: nn.Module) -> tuple[str, list[Graph]]:
    """The form ("towers", "packed" or "pairs") and graphs of `model` (module docstring), each
    graph's module in eval mode. A module is built in training mode, and `torch.onnx.export` puts a
    module back in the mode it found it in: a wrapper left in training mode would switch the
    wrapped model's dropout back on after its export (a fine-tuned encoder's, which a frozen
    one never runs), and the check against `forward` would then compare with dropout."""
    form, graphs = (FORMS | WRAPPERS).get(type(model), _own_forward)(model)
    for graph in graphs:
        graph.module.eval()
    return form, graphs


def written_for_export(model: nn.Module) -> bool:
    """Whether `model` exports graphs written for export (else its traced `forward`)."""
    return type(unwrap(model)) in FORMS
