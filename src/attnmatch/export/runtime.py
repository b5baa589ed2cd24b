"""A model exported to ONNX, run by ONNX Runtime on the CPU as a `Matcher`'s model: no Python
class of the model.

`OnnxModel` stands where a `Matcher`'s torch model stands. It holds the exported directory's
graphs (`attnmatch.runtime.graphs.OnnxGraphs`: one ONNX Runtime session per graph, and the
whole-input inference path in numpy that `attnmatch.runtime` runs without torch) and the model
config read from config.json (for `num_outputs` and the input layer's vocabulary size).
`Matcher.predict` runs its whole-input path (`models/fast` registry), `OnnxGraphs.predict`.

It has no parameters and no attention maps; it runs on the CPU in float32 only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.models.contract import Capabilities, declare
from attnmatch.models.fast import register_inference
from attnmatch.runtime.graphs import OnnxGraphs


class OnnxModel(nn.Module):
    """The graphs of an exported directory under ONNX Runtime (module docstring).

    Args:
        graphs: the sessions of the directory's graphs.
        config: the model config of the directory's config.json.

    Shape:
        batch (`PairBatch`) -> (B, num_outputs)
    """

    def __init__(self, graphs: OnnxGraphs, config: Any) -> None:
        super().__init__()
        self.graphs = graphs
        self.config = config

    @property
    def form(self) -> str:
        return self.graphs.form

    @property
    def quantize(self) -> str | None:
        return self.graphs.quantize

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left = (batch.left_ids.cpu().numpy(), batch.left_mask.cpu().numpy())
        right = (batch.right_ids.cpu().numpy(), batch.right_mask.cpu().numpy())
        if self.form == "towers":
            u, v = self.graphs.vectors(*left), self.graphs.vectors(*right)  # (B, E) each
            return torch.from_numpy(self.graphs.head(u, v))  # (B, C)
        if self.form == "packed":  # each text's real tokens, packed in numpy
            lefts = [ids[m] for ids, m in zip(*left, strict=True)]
            rights = [ids[m] for ids, m in zip(*right, strict=True)]
            return torch.from_numpy(self.graphs.packed(lefts, rights))  # (B, C)
        return torch.from_numpy(self.graphs.pairs(*left, *right))  # (B, C)


declare(OnnxModel, Capabilities())  # no attention maps, no training terms


@register_inference(OnnxModel)
def predict_onnx(model: OnnxModel, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Every pair of `data` through the exported graphs: (N, num_outputs) float32."""
    return torch.from_numpy(model.graphs.predict(data, batch_size))  # (N, C)
