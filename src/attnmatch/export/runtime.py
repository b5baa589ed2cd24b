"""A model exported to ONNX, run by ONNX Runtime on the CPU: no Python class of the model.

`OnnxModel` stands where a `Matcher`'s torch model stands. It holds one ONNX Runtime session per
graph of the exported directory (`graphs.py` has the forms) and the model config read from
config.json (for `num_outputs` and the input layer's vocabulary size). `Matcher.predict` runs
its whole-input path (`models/fast` registry): for the towers form every distinct text of the
input is encoded once, in length-sorted batches, then the head scores the pairs from the
vectors; for the pairs form the pairs run in length-bucketed batches, as `forward` does, of at
most `PAIR_BATCH` pairs.

It has no parameters and no attention maps; it runs on the CPU in float32 only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmatch.data.collate import bucketed_batches, pad_ids
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.models.contract import Capabilities, declare
from attnmatch.models.fast import register_inference

# Texts per batch of the towers' text graph: length-sorted, so padding is small; larger batches
# gain nothing on a CPU and cost memory.
TEXT_BATCH = 64
# Pairs per batch of the pairs graph, whatever the matcher's batch size: a batch is padded to its
# longest pair, and smaller length-sorted batches pad less and keep their (B, L, R) tensors in
# cache: the seed models' graphs run 1.7-2.9x faster than in batches of 512 on one thread
# (benchmarks/seed_onnx.py --pair-batches 512,32), the MiniLM cross-encoder's fp32 graph 0.79x ->
# 1.52x torch (benchmarks/onnx_speed.py; docs/speed.md).
PAIR_BATCH = 32


# ONNX Runtime's severity for a session's own log: fatal only. A failing run raises an error
# the project reports in its own line; the session's log would print the same error before it.
SESSION_LOG_SEVERITY = 4


def session(path: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session of `path` on `threads` intra-op threads, all graph
    optimisations on, logging nothing below fatal (this session only)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = SESSION_LOG_SEVERITY
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxModel(nn.Module):
    """The graphs of an exported directory under ONNX Runtime (module docstring).

    Args:
        form: "towers" or "pairs" (`graphs.py`).
        sessions: one ONNX Runtime session per graph name.
        config: the model config of the directory's config.json.
        quantize: None or "int8", as exported.

    Shape:
        batch (`PairBatch`) -> (B, num_outputs)
    """

    def __init__(
        self, form: str, sessions: dict[str, Any], config: Any, quantize: str | None
    ) -> None:
        super().__init__()
        self.form = form
        self.sessions = sessions
        self.config = config
        self.quantize = quantize

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left = (batch.left_ids.cpu().numpy(), batch.left_mask.cpu().numpy())
        right = (batch.right_ids.cpu().numpy(), batch.right_mask.cpu().numpy())
        if self.form == "towers":
            u, v = self._vectors(*left), self._vectors(*right)  # (B, E) each
            return torch.from_numpy(self._head(u, v))  # (B, C)
        return torch.from_numpy(self._pairs(*left, *right))  # (B, C)

    def _vectors(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.sessions["text"].run(None, {"ids": ids, "mask": mask})[0]  # (B, E)

    def _head(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.sessions["head"].run(None, {"u": u, "v": v})[0]  # (B, C)

    def _pairs(self, li: np.ndarray, lm: np.ndarray, ri: np.ndarray, rm: np.ndarray) -> np.ndarray:
        feed = {"left_ids": li, "left_mask": lm, "right_ids": ri, "right_mask": rm}
        session = self.sessions["pairs"]
        names = [i.name for i in session.get_inputs()]  # a traced graph drops unused inputs
        return session.run(None, {name: feed[name] for name in names})[0]  # (B, C)


declare(OnnxModel, Capabilities())  # no attention maps, no training terms


@register_inference(OnnxModel)
def predict_onnx(model: OnnxModel, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Every pair of `data` through the exported graphs: (N, num_outputs) float32."""
    if model.form == "towers":
        vectors = _text_vectors(model, data)  # (texts, E)
        chunks = [
            model._head(
                vectors[data.left[i : i + batch_size]], vectors[data.right[i : i + batch_size]]
            )
            for i in range(0, len(data), batch_size)
        ]
        return torch.from_numpy(np.concatenate(chunks))  # (N, C)
    out: np.ndarray | None = None
    for idx in bucketed_batches(data, min(batch_size, PAIR_BATCH)):
        li, lm = pad_ids([data.texts[t] for t in data.left[idx]])
        ri, rm = pad_ids([data.texts[t] for t in data.right[idx]])
        scores = model._pairs(li.numpy(), lm.numpy(), ri.numpy(), rm.numpy())  # (b, C)
        if out is None:
            out = np.empty((len(data), scores.shape[1]), dtype=np.float32)
        out[idx] = scores
    assert out is not None  # Matcher.predict runs no empty input
    return torch.from_numpy(out)


def _text_vectors(model: OnnxModel, data: EncodedPairs) -> np.ndarray:
    """The vector of every text the pairs of `data` use, each encoded once, in batches of
    similar lengths; rows of texts no pair uses stay zero. -> (len(data.texts), E)."""
    used = np.unique(np.concatenate([data.left, data.right]))
    order = used[np.argsort(data.text_lengths[used], kind="stable")]
    vectors: np.ndarray | None = None
    for start in range(0, len(order), TEXT_BATCH):
        rows = order[start : start + TEXT_BATCH]
        ids, mask = pad_ids([data.texts[t] for t in rows])
        out = model._vectors(ids.numpy(), mask.numpy())  # (b, E)
        if vectors is None:
            vectors = np.zeros((len(data.texts), out.shape[1]), dtype=np.float32)
        vectors[rows] = out
    assert vectors is not None
    return vectors
