"""MV-LSTM and aMV-LSTM.

Papers:
    Wan et al., "A Deep Architecture for Semantic Matching with Multiple Positional Sentence
    Representations", AAAI 2016 (MV-LSTM).
    Belkacem, Dkaki, Moreno, Boughanem, "aMV-LSTM: an attention-based model with multiple
    positional text matching", SAC 2019 (https://doi.org/10.1145/3297280.3297355).

Summary: word vectors -> optional learned attention gate per side (eq. 4) -> shared BiLSTM
(positional representations, eq. 1-2) -> interaction matrix between every pair of positions ->
k-max pooling over the real cells -> linear layer (eq. 3) -> score.

Attention gate (eq. 4): alpha_t = softmax_t(v . w_t) over one sentence's real words, with a learned
vector v per gated side; w'_t = alpha_t * w_t.

Deviations from the paper / decisions (see docs/models.md, aMV-LSTM):
- The softmax weights sum to 1, so gated vectors are ~1/L of their size; that is the paper's
  method and our default. `gate_scale="length"` multiplies them by the number of real tokens
  (an option, off by default).
- Interaction `cosine` (the paper) and also `dot`, `bilinear` and `tensor` (MV-LSTM's tensor
  layer with `tensor_slices` slices, ReLU). `directions="concat"` builds one matrix over
  [fwd; bwd] states; `"separate"` builds one per direction (footnote 8) and k-max pools each.
- k-max pooling takes the k largest values over all real (i, j) cells; padding never wins; when
  fewer than k real cells exist the remainder is 0.
- `mlp_hidden` adds tanh hidden layers before the output layer (default none: eq. 3 exactly).
- The paper trained on a random 80/10/10 WikiQA split; we use the official split.
- On the CPU each distinct text of a batch is encoded once (a question's candidates share its
  token vectors, gate and BiLSTM states; `attnmatch.nn.distinct.encode_distinct_pairs`), then
  broadcast to the pairs: the same outputs up to float rounding; in training too when the token
  encoder draws no dropout. `share_encodings=False` runs every pair's own. On a GPU every
  pair's own runs. `Matcher.predict` on the CPU runs `models/fast/mvlstm.py` instead.

Dims: B batch, L left length, R right length, E embedding size, H hidden size per direction,
C interaction channels, k pooled values per channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.distinct import encode_distinct_pairs
from attnmatch.nn.masking import masked_kmax, masked_softmax
from attnmatch.nn.recurrent import BiRNN, encode_pair


@dataclass(frozen=True, kw_only=True)
class MVLSTMConfig:
    """Args:
    encoder: the token encoder (input layer).
    hidden_size: BiLSTM units per direction (paper: 50).
    gate: attention gate on "none" (MV-LSTM), "left" (aMV-LSTM Q), "right" (A), "both" (Q+A).
    gate_scale: "none" (paper) or "length" (gated vectors times the number of real tokens).
    interaction: "cosine" (paper), "dot", "bilinear" or "tensor".
    tensor_slices: slices c of the tensor interaction (only used when interaction="tensor").
    directions: "concat" (one matrix over [fwd; bwd]) or "separate" (one per direction).
    k: k-max pooling size per channel (paper: 100).
    shared_encoder: one BiLSTM for both sides (paper) or one per side.
    mlp_hidden: sizes of tanh hidden layers before the output layer (paper: none).
    dropout: dropout on the pooled features.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    share_encodings: each distinct text of a batch encoded once (see "Deviations"); False:
        every pair's own (benchmarks and tests compare the two).
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 50
    gate: Literal["none", "left", "right", "both"] = "none"
    gate_scale: Literal["none", "length"] = "none"
    interaction: Literal["cosine", "dot", "bilinear", "tensor"] = "cosine"
    tensor_slices: int = 4
    directions: Literal["concat", "separate"] = "concat"
    k: int = 100
    shared_encoder: bool = True
    mlp_hidden: tuple[int, ...] = ()
    dropout: float = 0.0
    num_outputs: int = 1
    share_encodings: bool = True

    def __post_init__(self) -> None:
        check_positive(self, "hidden_size", "tensor_slices", "k", "num_outputs")
        if any(h < 1 for h in self.mlp_hidden):
            raise ValueError(f"mlp_hidden sizes must be >= 1, got {self.mlp_hidden}")
        check_dropout(self.dropout)
        if self.interaction == "tensor" and self.directions == "separate":
            raise ValueError(
                "interaction='tensor' works on [fwd; bwd] states: use directions='concat'"
            )


class AttentionGate(nn.Module):
    """aMV-LSTM's gate (eq. 4): w'_t = softmax_t(v . w_t) * w_t over real tokens.

    Shape:
        x: (B, T, E), mask: (B, T) -> gated (B, T, E) and weights (B, T)
    """

    def __init__(self, dim: int, scale: Literal["none", "length"]) -> None:
        super().__init__()
        self.v = nn.Parameter(torch.empty(dim).normal_(0.0, dim**-0.5))
        self.scale = scale

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        alpha = masked_softmax(x @ self.v, mask, dim=-1)  # (B, T)
        if self.scale == "length":
            alpha = alpha * mask.sum(dim=-1, keepdim=True).to(alpha.dtype)  # (B, T)
        return x * alpha.unsqueeze(-1), alpha


class Interaction(nn.Module):
    """Position-by-position interaction channels.

    Shape:
        u: (B, L, D), v: (B, R, D) -> (B, C, L, R)
    """

    def __init__(self, kind: str, dim: int, directions: str, slices: int) -> None:
        super().__init__()
        self.kind = kind
        self.directions = directions
        self.channels = 2 if directions == "separate" else 1
        if kind == "bilinear":
            self.weight = nn.Parameter(
                torch.empty(self.channels, dim // self.channels, dim // self.channels)
            )
            nn.init.xavier_uniform_(self.weight)
        elif kind == "tensor":
            self.channels = slices
            self.weight = nn.Parameter(torch.empty(slices, dim, dim))
            nn.init.xavier_uniform_(self.weight)
            self.linear_left = nn.Linear(dim, slices)  # the V[u; v] + b term, split by side
            self.linear_right = nn.Linear(dim, slices, bias=False)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.kind == "tensor":
            bilinear = torch.einsum("bld,cde,bre->bclr", u, self.weight, v)  # (B, C, L, R)
            linear = self.linear_left(u).transpose(1, 2).unsqueeze(-1) + self.linear_right(
                v
            ).transpose(1, 2).unsqueeze(-2)  # (B, C, L, R)
            return F.relu(bilinear + linear)
        if self.directions == "separate":
            u = torch.stack(u.chunk(2, dim=-1), dim=1)  # (B, 2, L, H)
            v = torch.stack(v.chunk(2, dim=-1), dim=1)  # (B, 2, R, H)
        else:
            u, v = u.unsqueeze(1), v.unsqueeze(1)  # (B, 1, L, D), (B, 1, R, D)
        if self.kind == "cosine":
            # u.v / (|u| |v|), each norm at least 1e-8 as in F.normalize: dividing the L x R
            # cells costs less (and so does its backward) than normalising the L + R states.
            norm_u = u.norm(dim=-1).clamp_min(1e-8)  # (B, C, L)
            norm_v = v.norm(dim=-1).clamp_min(1e-8)  # (B, C, R)
            return (u @ v.transpose(-1, -2)) / (norm_u.unsqueeze(-1) * norm_v.unsqueeze(-2))
        if self.kind == "bilinear":
            u = u @ self.weight  # (B, C, L, D)
        return u @ v.transpose(-1, -2)  # (B, C, L, R)


@register_model(
    "mvlstm",
    config=MVLSTMConfig,
    paper="Wan et al. AAAI 2016; aMV-LSTM: Belkacem et al. SAC 2019",
    explains=True,
)
class MVLSTM(nn.Module):
    """MV-LSTM with aMV-LSTM's optional attention gates. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: MVLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        dim, gate, scale = config.encoder.output_dim, config.gate, config.gate_scale
        self.left_gate = AttentionGate(dim, scale) if gate in ("left", "both") else None
        self.right_gate = AttentionGate(dim, scale) if gate in ("right", "both") else None
        self.left_rnn = BiRNN("lstm", dim, config.hidden_size)
        self.right_rnn = (
            self.left_rnn if config.shared_encoder else BiRNN("lstm", dim, config.hidden_size)
        )
        self.interaction = Interaction(
            config.interaction, 2 * config.hidden_size, config.directions, config.tensor_slices
        )
        self.dropout = nn.Dropout(config.dropout)
        layers: list[nn.Module] = []
        width = self.interaction.channels * config.k
        for hidden in config.mlp_hidden:
            layers += [nn.Linear(width, hidden), nn.Tanh()]
            width = hidden
        layers.append(nn.Linear(width, config.num_outputs))
        self.mlp = nn.Sequential(*layers)

    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """Gate weights, BiLSTM states and the interaction (B, C, L, R)."""
        sides = (batch.left_ids, batch.left_mask, batch.right_ids, batch.right_mask)
        # Each distinct text once, broadcast to the pairs (the CPU only: see nn/distinct.py);
        # in training too unless the encoder draws dropout, the gradients of a text's copies
        # adding up. The features' dropout stays per pair.
        share = self.config.share_encodings
        if share and not (self.training and _draws_per_row(self.token_encoder)):
            left, right = encode_distinct_pairs(self._encode_texts, *sides)
        else:
            left, right = self._encode_texts(*sides)
        out = left | right
        out["interaction"] = self.interaction(out["left_states"], out["right_states"])
        return out  # interaction: (B, C, L, R)

    def _encode_texts(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Gate weights and BiLSTM states of each row of each side; the sides' row counts may
        differ (B_l, B_r)."""
        left = self.token_encoder(left_ids, left_mask)  # (B_l, L, E)
        right = self.token_encoder(right_ids, right_mask)  # (B_r, R, E)
        out_l: dict[str, torch.Tensor] = {}
        out_r: dict[str, torch.Tensor] = {}
        if self.left_gate is not None:
            left, out_l["left_gate"] = self.left_gate(left, left_mask)  # (B_l, L, E), (B_l, L)
        if self.right_gate is not None:
            right, out_r["right_gate"] = self.right_gate(right, right_mask)  # (B_r, R, E), (B_r, R)
        if self.config.shared_encoder:
            states = encode_pair(self.left_rnn, left, left_mask, right, right_mask)
            out_l["left_states"], out_r["right_states"] = states  # (B_l, L, 2H), (B_r, R, 2H)
        else:
            out_l["left_states"] = self.left_rnn(left, left_mask)  # (B_l, L, 2H)
            out_r["right_states"] = self.right_rnn(right, right_mask)  # (B_r, R, 2H)
        return out_l, out_r

    def forward(self, batch: PairBatch) -> torch.Tensor:
        sim = self._encode(batch)["interaction"]  # (B, C, L, R)
        return self._score(sim, batch.left_mask, batch.right_mask)

    def _score(
        self, sim: torch.Tensor, left_mask: torch.Tensor, right_mask: torch.Tensor
    ) -> torch.Tensor:
        """k-max pooling over the real cells, dropout, the output layers.

        Shape:
            sim: (B, C, L, R), left_mask: (B, L), right_mask: (B, R) -> (B, num_outputs)
        """
        b, c = sim.shape[:2]
        cell_mask = left_mask.unsqueeze(-1) & right_mask.unsqueeze(-2)  # (B, L, R)
        cell_mask = cell_mask.unsqueeze(1).expand_as(sim)  # (B, C, L, R)
        pooled = masked_kmax(sim.reshape(b * c, -1), cell_mask.reshape(b * c, -1), self.config.k)
        features = self.dropout(pooled.reshape(b, c * self.config.k))  # (B, C*k)
        return self.mlp(features)  # (B, num_outputs)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """Gate weights ("left_gate"/"right_gate", (B, T)) and the interaction (B, C, L, R)."""
        out = self._encode(batch)
        return {k: v for k, v in out.items() if k in ("left_gate", "right_gate", "interaction")}


def _draws_per_row(module: nn.Module) -> bool:
    """Whether `module` would draw dropout now (a dropout layer with p > 0 in training mode):
    then each pair's texts must be encoded apart, each with its own draws."""
    return any(isinstance(m, nn.Dropout) and m.p > 0 and m.training for m in module.modules())


def _preset(name: str, gate: str, description: str, **extra: str) -> None:
    register_preset(
        name,
        model="mvlstm",
        overrides={"gate": gate, "hidden_size": 50, "k": 100, "interaction": "cosine", **extra},
        description=description,
    )


_preset("mvlstm", "none", "MV-LSTM (Wan et al. 2016): BiLSTM 50, cosine, k-max 100")
_preset("amvlstm_q", "left", "aMV-LSTM (Q): attention gate on the question")
_preset("amvlstm_a", "right", "aMV-LSTM (A): attention gate on the answer")
_preset("amvlstm_qa", "both", "aMV-LSTM (Q+A): attention gates on both sides")
_preset(
    "amvlstm_q_len",
    "left",
    "aMV-LSTM (Q) with gate_scale='length' (our option, not in the paper)",
    gate_scale="length",
)
