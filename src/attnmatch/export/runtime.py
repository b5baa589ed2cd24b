"""A model exported to ONNX, run by ONNX Runtime on the CPU: no Python class of the model.

`OnnxModel` stands where a `Matcher`'s torch model stands. It holds one ONNX Runtime session per
graph of the exported directory (`graphs.py` has the forms) and the model config read from
config.json (for `num_outputs` and the input layer's vocabulary size). `Matcher.predict` runs
its whole-input path (`models/fast` registry): for the towers form every distinct text of the
input is encoded once, in length-sorted batches, then the head scores the pairs from the
vectors; for the packed and pairs forms the pairs run in length-bucketed batches, as `forward`
does, the packed form's pairs packed here in numpy (`pack_pair_ids`) as the model packs them.

It has no parameters and no attention maps; it runs on the CPU in float32 only.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def pack_pair_ids(
    left: Sequence[np.ndarray], right: Sequence[np.ndarray], max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each pair as one sequence, as `models.pretrained.pack_pairs` packs it (and a tokenizer
    packs a pair): the left text's ids, then the right text's without its first token
    (`[CLS] a [SEP]` + `[CLS] b [SEP]` -> `[CLS] a [SEP] b [SEP]`), cut to `max_length`,
    right-padded with 0 to the longest (at least 1 column).

    Returns:
        ids (B, W) int64, mask (B, W) bool (True on real tokens), types (B, W) int64 (1 on the
        right text's tokens, 0 elsewhere).
    """
    n_left = np.fromiter((len(a) for a in left), dtype=np.int64, count=len(left))
    n_right = np.fromiter((max(len(b) - 1, 0) for b in right), dtype=np.int64, count=len(right))
    total = np.minimum(n_left + n_right, max_length)  # (B,)
    width = max(int(total.max(initial=0)), 1)
    ids = np.zeros((len(left), width), dtype=np.int64)  # (B, W)
    for row, (a, b) in enumerate(zip(left, right, strict=True)):
        seq = np.concatenate([a, b[1:]])[:max_length]
        ids[row, : len(seq)] = seq
    pos = np.arange(width)[None, :]  # (1, W)
    mask = pos < total[:, None]  # (B, W)
    types = (mask & (pos >= n_left[:, None])).astype(np.int64)  # (B, W)
    return ids, mask, types


class OnnxModel(nn.Module):
    """The graphs of an exported directory under ONNX Runtime (module docstring).

    Args:
        form: "towers", "packed" or "pairs" (`graphs.py`).
        sessions: one ONNX Runtime session per graph name.
        config: the model config of the directory's config.json.
        quantize: None or "int8", as exported.
        max_length: the packed form's cut of a pair (onnx.json's `max_length`); else None.

    Shape:
        batch (`PairBatch`) -> (B, num_outputs)
    """

    def __init__(
        self,
        form: str,
        sessions: dict[str, Any],
        config: Any,
        quantize: str | None,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        self.form = form
        self.sessions = sessions
        self.config = config
        self.quantize = quantize
        self.max_length = max_length

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left = (batch.left_ids.cpu().numpy(), batch.left_mask.cpu().numpy())
        right = (batch.right_ids.cpu().numpy(), batch.right_mask.cpu().numpy())
        if self.form == "towers":
            u, v = self._vectors(*left), self._vectors(*right)  # (B, E) each
            return torch.from_numpy(self._head(u, v))  # (B, C)
        if self.form == "packed":
            lefts = [ids[m] for ids, m in zip(*left, strict=True)]
            rights = [ids[m] for ids, m in zip(*right, strict=True)]
            return torch.from_numpy(self._packed(lefts, rights))  # (B, C)
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

    def _packed(self, left: Sequence[np.ndarray], right: Sequence[np.ndarray]) -> np.ndarray:
        """The packed graph on pairs of texts' ids (each text's real tokens): -> (B, C)."""
        assert self.max_length is not None  # the packed form's manifest records it
        ids, mask, types = pack_pair_ids(left, right, self.max_length)  # (B, W) each
        feed = {"ids": ids, "mask": mask, "types": types}
        session = self.sessions["packed"]
        names = [i.name for i in session.get_inputs()]
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
    for idx in bucketed_batches(data, batch_size):
        lefts = [data.texts[t] for t in data.left[idx]]
        rights = [data.texts[t] for t in data.right[idx]]
        if model.form == "packed":
            scores = model._packed(lefts, rights)  # (b, C)
        else:
            (li, lm), (ri, rm) = pad_ids(lefts), pad_ids(rights)
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
