"""Bidirectional recurrent encoders over right-padded batches, exact under padding.

The backward direction of a bidirectional RNN must start at each sequence's last *real* token,
or padding leaks into every state. We pack the batch by length (fused cuDNN/MKL kernels handle
the shrinking batch), so a sequence's outputs do not depend on how much padding it carries.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class BiRNN(nn.Module):
    """A one-layer bidirectional LSTM or GRU over masked inputs.

    Args:
        cell: "lstm" or "gru".
        input_size: E.
        hidden_size: H per direction.

    Shape:
        x: (B, T, E), mask: (B, T) bool with real tokens first (right padding)
        -> (B, T, 2H): [forward; backward] states, zero on padding.
    """

    def __init__(self, cell: Literal["lstm", "gru"], input_size: int, hidden_size: int) -> None:
        super().__init__()
        rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_cls(input_size, hidden_size, batch_first=True, bidirectional=True)
        self.hidden_size = hidden_size

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, steps, _ = x.shape
        # Empty sequences cannot be packed; give them one (zero) step, masked out below.
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # (B,)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=steps)  # (B, T, 2H)
        return out * mask.unsqueeze(-1)
