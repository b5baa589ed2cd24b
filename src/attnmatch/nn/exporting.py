"""The export paths of the shared building blocks: switched on while a graph is traced.

`forward` of a model may decide things from values: a batch's longest text read as a number
(`max`, `.item()`, `int(...)`), an input padded only when it is shorter than a kernel, the
distinct texts of a batch, a recurrence over a packed layout planned in Python. A traced graph
freezes such a decision at the example's values and then fails (or differs) on other lengths.
Inside `export_paths()` the building blocks that decide so take a path whose shapes follow the
inputs' symbolic sizes and whose outputs equal their usual path's (up to float rounding):

- `recurrent.encode_pair`: each side through the encoder on its own (no common width);
- `recurrent.BiRNN`: `nn.LSTM`/`nn.GRU` over packed sequences, which the ONNX exporter writes
  as one LSTM/GRU node with per-sequence lengths (the backward direction starts at each
  sequence's last real token, as packing does);
- `masking.masked_kmax`: always k extra padded candidates (no `if n < k`);
- `window_padding` (convolutions of DAMM's TextCNN and MP-CNN): always `longest - 1` zero
  columns (no `if T < longest`); a window that starts on a real position never reaches them;
- `distinct.distinct_sides`: every row its own text;
- IARNN-CONTEXT's recurrence: a scripted step loop (`context_gru.context_gru_loop`), which the
  exporter writes as an ONNX Loop over the symbolic length;
- model-specific operators ONNX lacks: MP-CNN's max/min pooling (`aminmax`), HCRN's
  complex-diagonal kernel (`diag`); a frozen transformer token encoder's in-place mask update
  (`inputs.transformer.traceable_states`, as the bi-encoder's text graph);
- DAMM's attention of an empty text: its first position only, as torch's whole-input path and
  `forward` on the pair alone (`forward` in a batch spreads it over the batch's padding).

`export_onnx` traces each model's `forward` inside `export_paths()` (`export/graphs.py`) and
checks the graph against `forward` outside it on pairs of other lengths (`_check_exact`), so a
path that differed would be refused, not exported. Training and torch inference never enter it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
import torch.nn.functional as F

_EXPORTING: ContextVar[bool] = ContextVar("attnmatch_exporting", default=False)


@contextmanager
def export_paths() -> Iterator[None]:
    """The building blocks take their export paths (module docstring) inside the body."""
    token = _EXPORTING.set(True)
    try:
        yield
    finally:
        _EXPORTING.reset(token)


def exporting() -> bool:
    """Whether the building blocks take their export paths now (`export_paths`)."""
    return _EXPORTING.get()


def window_padding(x: torch.Tensor, longest: int) -> torch.Tensor:
    """`x` with zero columns appended so that every text keeps a window of `longest` columns:
    up to `longest` columns in all (`forward`), or always `longest - 1` more (export: the
    columns added do not depend on the batch's width). The input is zero beyond each text's
    real tokens and only windows starting within max(n - width + 1, 1) of a text's n tokens
    count, so both give the same pooled values.

    Shape:
        x: (B, D, T) -> (B, D, T') with T' >= longest
    """
    if exporting():
        return F.pad(x, (0, longest - 1))  # (B, D, T + longest - 1)
    if x.shape[-1] < longest:
        return F.pad(x, (0, longest - x.shape[-1]))  # (B, D, longest)
    return x
