"""The input layer: token ids + masks -> (B, L, E) vectors.

Models never own a word-embedding table directly; they build a token encoder from
`TokenEncoderConfig`, so a contextual encoder replaces static vectors without touching models.

- `static`: a vocabulary-sized embedding table, usually filled with pretrained vectors (GloVe)
  by `load_pretrained` and kept fixed, as the papers do.
- `transformer`: a pretrained Hugging Face encoder (e.g. all-MiniLM-L6-v2) over sub-word ids;
  the output of one of its layers, frozen or fine-tuned. Its architecture is the HF config kept
  in `transformer_config`, so a saved model directory rebuilds it without the original files;
  the weights come from `load_pretrained_transformer` (training) or the model directory.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True, kw_only=True)
class TokenEncoderConfig:
    """Args:
    kind: "static" (a word-vector table) or "transformer" (a pretrained sub-word encoder).
    vocab_size: rows of the table (static: `<pad>` (0) and `<unk>` (1) included; transformer:
        the encoder's vocabulary).
    embedding_dim: E, the output size (transformer: its hidden size).
    trainable: fine-tune the vectors / the transformer (the papers keep word vectors fixed).
    dropout: dropout on the output vectors.
    source: transformer: where it came from ("minilm-l6" or a model directory); informational
        once `transformer_config` is filled (the trainer fills both from the source).
    layer: transformer: which hidden state to output (0 = the embedding layer, 1..N = the
        layers, -1 = the last).
    max_length: transformer: sub-words per text, special tokens included.
    transformer_config: transformer: the Hugging Face config.json of the encoder.
    """

    kind: Literal["static", "transformer"] = "static"
    vocab_size: int
    embedding_dim: int = 50
    trainable: bool = False
    dropout: float = 0.0
    source: str = ""
    layer: int = -1
    max_length: int = 256
    transformer_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind == "static" and self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad>, <unk>), got {self.vocab_size}")
        if self.embedding_dim < 1:
            raise ValueError(f"embedding_dim must be >= 1, got {self.embedding_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.kind != "transformer":
            return
        tc = self.transformer_config
        if not tc:
            raise ValueError(
                "a transformer encoder needs transformer_config (the Hugging Face config.json); "
                "set encoder.source and the trainer fills it"
            )
        hidden, layers = tc.get("hidden_size"), tc.get("num_hidden_layers")
        if hidden != self.embedding_dim:
            raise ValueError(
                f"embedding_dim ({self.embedding_dim}) must equal the transformer's hidden_size "
                f"({hidden})"
            )
        if tc.get("vocab_size") != self.vocab_size:
            raise ValueError(
                f"vocab_size ({self.vocab_size}) must equal the transformer's vocab_size "
                f"({tc.get('vocab_size')})"
            )
        if isinstance(layers, int) and not -layers - 1 <= self.layer <= layers:
            raise ValueError(f"layer must be in [{-layers - 1}, {layers}], got {self.layer}")
        if self.max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {self.max_length}")

    @property
    def output_dim(self) -> int:
        return self.embedding_dim


class StaticTokenEncoder(nn.Module):
    """A word-vector table; the `<pad>` row is zero.

    Shape:
        ids: (B, L) long, mask: (B, L) bool -> (B, L, E), zero on padding.
    """

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=0)
        self.embedding.weight.requires_grad_(config.trainable)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        vectors = self.embedding(ids)  # (B, L, E)
        return self.dropout(vectors) * mask.unsqueeze(-1)

    @torch.no_grad()
    def load_pretrained(self, matrix: np.ndarray | torch.Tensor) -> None:
        """Copies an aligned (vocab_size, E) matrix into the table."""
        weight = torch.as_tensor(np.asarray(matrix), dtype=self.embedding.weight.dtype)
        if tuple(weight.shape) != tuple(self.embedding.weight.shape):
            raise ValueError(
                f"pretrained matrix has shape {tuple(weight.shape)}, expected "
                f"{tuple(self.embedding.weight.shape)} (vocab_size, embedding_dim)"
            )
        self.embedding.weight.copy_(weight)


class TransformerTokenEncoder(nn.Module):
    """A pretrained transformer over sub-word ids; outputs one layer's hidden states.

    Frozen (`trainable=False`), it always runs in eval mode (no dropout inside) and without
    gradients, and `enable_cache` can memoise its outputs per distinct text: a frozen encoder
    gives a text the same vectors every epoch, so training on it costs one encoder pass per text.

    Shape:
        ids: (B, L) long, mask: (B, L) bool, token_type_ids: (B, L) long or None
        -> (B, L, H), zero on padding.
    """

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel

        self.config = config
        tc = dict(config.transformer_config)
        hf_config = AutoConfig.for_model(tc.pop("model_type"), **tc)
        model = AutoModel.from_config(hf_config)
        if getattr(model, "pooler", None) is not None:  # unused: we read hidden states
            model.pooler = None
        self.transformer = model
        self.transformer.requires_grad_(config.trainable)
        self.pad_id = int(tc.get("pad_token_id") or 0)
        self.num_layers = int(hf_config.num_hidden_layers)
        layer = config.layer if config.layer >= 0 else self.num_layers + 1 + config.layer
        self.layer = layer  # index into hidden_states: 0 = embeddings ... num_layers = last
        self.dropout = nn.Dropout(config.dropout)
        self._cache: _OutputCache | None = None
        if not config.trainable:
            self.transformer.eval()

    def train(self, mode: bool = True) -> TransformerTokenEncoder:
        super().train(mode)
        if not self.config.trainable:
            self.transformer.eval()  # a frozen encoder never uses its dropout
        return self

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self._cache is not None and token_type_ids is None and not self.config.trainable:
            hidden = self._cache.lookup(self, ids, mask)  # (B, L, H)
        elif self.config.trainable:
            hidden = self._encode(ids, mask, token_type_ids)  # (B, L, H)
        else:
            with torch.no_grad():
                hidden = self._encode(ids, mask, token_type_ids)  # (B, L, H)
        return self.dropout(hidden) * mask.unsqueeze(-1)

    def _encode(
        self, ids: torch.Tensor, mask: torch.Tensor, token_type_ids: torch.Tensor | None
    ) -> torch.Tensor:
        # A text without tokens attends to its first (padding) position instead of nothing;
        # its output is zeroed by the caller.
        attend = mask.clone()  # (B, L)
        attend[:, 0] |= ~mask.any(dim=1)
        ids = ids.masked_fill(~mask, self.pad_id)  # (B, L)
        want_all = self.layer != self.num_layers
        out = self.transformer(
            input_ids=ids,
            attention_mask=attend.long(),
            token_type_ids=token_type_ids,
            output_hidden_states=want_all,
            return_dict=True,
        )
        return out.hidden_states[self.layer] if want_all else out.last_hidden_state

    def load_pretrained_transformer(self, path: str | Path) -> dict[str, list[str]]:
        """Loads the weights of an encoder directory (`encoders.resolve_source`)."""
        from attnmatch.encoders import load_weights

        info = load_weights(self.transformer, Path(path))
        if self._cache is not None:
            self._cache = None  # the weights changed
        return info

    def enable_cache(self, max_mb: int = 4096) -> None:
        """Memoise outputs per distinct text (frozen encoders only; a no-op when trainable).

        Encoders with identical weights share one cache (the key is a hash of the weights), so
        the seeds and models of one process encode each text once. Least recently used texts
        are dropped beyond `max_mb` megabytes per cache.
        """
        if self.config.trainable:
            return
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((self.layer, self.config.transformer_config)).encode())
        for name, tensor in self.transformer.state_dict().items():
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        key = h.hexdigest()
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = _OutputCache(max_mb * 2**20)
        self._cache = cache

    def disable_cache(self) -> None:
        self._cache = None


class _OutputCache:
    """Hidden states per distinct id sequence (right-padded batches), least recently used
    dropped beyond a size."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.items: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def lookup(
        self, encoder: TransformerTokenEncoder, ids: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        lengths = mask.sum(dim=1).tolist()
        rows = ids.detach().cpu().numpy()
        keys = [rows[i, :n].tobytes() for i, n in enumerate(lengths)]
        missing: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in self.items and k not in missing:
                missing[k] = i
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            idx = torch.tensor(list(missing.values()), dtype=torch.long)
            width = max(1, max(lengths[i] for i in missing.values()))
            sub_ids, sub_mask = ids[idx, :width], mask[idx, :width]  # (M, W)
            with torch.no_grad():
                hidden = encoder._encode(sub_ids, sub_mask, None)  # (M, W, H)
            for j, (k, i) in enumerate(missing.items()):
                vec = hidden[j, : lengths[i]].clone()  # (n, H)
                self.items[k] = vec
                self.bytes += vec.numel() * vec.element_size()
        batch, width = ids.shape
        first = self.items[keys[0]]
        out = torch.zeros(batch, width, first.shape[-1], dtype=first.dtype)  # (B, L, H)
        for i, k in enumerate(keys):
            vec = self.items[k]
            self.items.move_to_end(k)
            out[i, : vec.shape[0]] = vec
        while self.bytes > self.max_bytes and len(self.items) > 1:
            _, old = self.items.popitem(last=False)
            self.bytes -= old.numel() * old.element_size()
        return out.to(ids.device)


_CACHES: dict[str, _OutputCache] = {}


def build_token_encoder(
    config: TokenEncoderConfig,
) -> StaticTokenEncoder | TransformerTokenEncoder:
    if config.kind == "static":
        return StaticTokenEncoder(config)
    if config.kind == "transformer":
        return TransformerTokenEncoder(config)
    raise ValueError(f"unknown token encoder kind {config.kind!r}")
