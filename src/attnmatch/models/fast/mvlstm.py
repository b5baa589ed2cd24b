"""MV-LSTM / aMV-LSTM whole-input inference on the CPU (`Matcher.predict`, float32).

The pairs are taken in length-sorted windows (`attnmatch.models.fast._windows`). Each distinct
text of a window is encoded once: token vectors, gate, BiLSTM states (by exact length,
`bilstm_by_length`), normalised for the cosine; then the window's pairs are scored
`batch_size` at a time from those states: the interaction (a bmm), k-max pooling of the real
cells and the output layers, as `MVLSTM._score`. The outputs equal `MVLSTM.forward`'s on the
same pairs up to float rounding (tests/models/test_mvlstm_inference.py).

Dims: N pairs, W pairs in a window, U distinct texts of one side, L / R lengths, E embedding
size, H hidden size per direction, C interaction channels.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnmatch.data.encoding import EncodedPairs
from attnmatch.models.fast._registry import register_inference
from attnmatch.models.fast._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.models.mvlstm import MVLSTM, AttentionGate, Interaction
from attnmatch.nn.recurrent import bilstm_by_length


@register_inference(MVLSTM)
def predict_mvlstm(model: MVLSTM, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Outputs for every pair of `data`, in its order: (N, num_outputs) float32. Run it in eval
    mode under `torch.inference_mode`."""
    outputs = torch.empty(len(data), model.config.num_outputs)  # (N, num_outputs)
    run_windows(
        lambda pairs: _predict_window(model, data, pairs, batch_size, outputs),
        inference_windows(data, batch_size),
    )
    return outputs


def _predict_window(
    model: MVLSTM, data: EncodedPairs, pairs: np.ndarray, batch_size: int, outputs: torch.Tensor
) -> None:
    """Scores one window's pairs into their rows of `outputs`.

    Shape:
        pairs: (W,) pair indices, outputs: (N, num_outputs)
    """
    left = window_texts(data, data.left[pairs])  # U_l texts
    right = window_texts(data, data.right[pairs])  # U_r texts
    left_x = _gated(model, left, model.left_gate)  # (U_l, L, E)
    right_x = _gated(model, right, model.right_gate)  # (U_r, R, E)

    def prepare(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        return _prepare(model.interaction, x, out)  # each state normalised once, for the cosine

    if model.config.shared_encoder:
        states = bilstm_by_length(
            model.left_rnn, [(left_x, left.lengths), (right_x, right.lengths)], prepare
        )
    else:
        states = bilstm_by_length(
            model.left_rnn, [(left_x, left.lengths)], prepare
        ) + bilstm_by_length(model.right_rnn, [(right_x, right.lengths)], prepare)
    left_states, right_states = states  # (U_l, L, 2H), (U_r, R, 2H)
    for rows in batch_rows(len(pairs), batch_size):  # (b,)
        u, left_mask = left.gather(left_states, rows)  # (b, L', 2H), (b, L')
        v, right_mask = right.gather(right_states, rows)  # (b, R', 2H), (b, R')
        sim = _interaction(model.interaction, u, v)  # (b, C, L', R')
        scores = model._score(sim, left_mask, right_mask)  # (b, num_outputs)
        outputs[torch.from_numpy(pairs[rows])] = scores


def _gated(model: MVLSTM, texts: WindowTexts, gate: AttentionGate | None) -> torch.Tensor:
    """Token vectors of a window's distinct texts, through the side's gate if any.

    Shape:
        -> (U, T, E)
    """
    x = model.token_encoder(texts.ids, texts.mask)  # (U, T, E)
    if gate is not None:
        x, _ = gate(x, texts.mask)  # (U, T, E)
    return x


def _prepare(interaction: Interaction, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """One side's states as `_interaction` reads them: for the cosine, each state (each
    direction's with "separate") scaled to unit length; else `x` itself. Written into `out`
    when given (a tensor of x's shape; no copy made).

    Shape:
        x: (B, T, D) -> (B, T, D)
    """
    if interaction.kind != "cosine":
        return x if out is None else out.copy_(x)
    if interaction.directions == "separate":
        halves = x.unflatten(-1, (2, -1))  # (B, T, 2, H)
        into = None if out is None else out.unflatten(-1, (2, -1))  # a view of `out`
        return F.normalize(halves, dim=-1, eps=1e-8, out=into).flatten(-2)  # (B, T, D)
    return F.normalize(x, dim=-1, eps=1e-8, out=out)


def _interaction(interaction: Interaction, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """`Interaction.forward` on states from `_prepare`: the cosine of unit-length states is
    their dot product; the other kinds read the states as they are.

    Shape:
        u: (B, L, D), v: (B, R, D) -> (B, C, L, R)
    """
    if interaction.kind != "cosine":
        return interaction(u, v)
    if interaction.directions == "separate":
        u = torch.stack(u.chunk(2, dim=-1), dim=1)  # (B, 2, L, H)
        v = torch.stack(v.chunk(2, dim=-1), dim=1)  # (B, 2, R, H)
    else:
        u, v = u.unsqueeze(1), v.unsqueeze(1)  # (B, 1, L, D), (B, 1, R, D)
    return u @ v.transpose(-1, -2)  # (B, C, L, R)
