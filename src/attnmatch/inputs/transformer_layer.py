"""The transformer token encoder (torch): a pretrained Hugging Face encoder over sub-word ids
(`TransformerInputs` names it and imports this module only when a model is built), with the
functions that run its layers (`traceable_states`, the export's) and the output cache of a
frozen encoder."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.inputs.transformer import position_limit
from attnmatch.nn.exporting import exporting

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.inputs import TokenEncoderConfig


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
        self.positions = position_limit(dict(config.transformer_config))
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
        if exporting() and not self.training:  # a seed model's export (`nn.exporting`)
            return traceable_states(self, ids, mask, token_type_ids)  # (B, L, H)
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
        width, positions = ids.shape[1], self.positions
        if positions is not None and width > positions:  # padding beyond: drop it, pad back
            longest = int(mask.sum(dim=1).max())  # right-padded: the real tokens come first
            if longest > positions:
                raise ValueError(
                    f"a text of {longest} sub-words is longer than the {positions} positions "
                    f"of the transformer: encode texts to at most {positions} sub-words "
                    "(inputs.max_length)"
                )
            types = None if token_type_ids is None else token_type_ids[:, :positions]
            hidden = self._encode(ids[:, :positions], mask[:, :positions], types)  # (B, P, H)
            return F.pad(hidden, (0, 0, 0, width - positions))  # (B, L, H)
        # The export's path, without in-place updates: the same states (a text without tokens
        # attends to its first position; padding zero).
        return traceable_states(self, ids, mask, token_type_ids)  # (B, L, H)

    def encode_late(
        self,
        left: tuple[torch.Tensor, torch.Tensor],
        right: tuple[torch.Tensor, torch.Tensor],
        separate_layers: int,
        cross_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Late interaction (PreTTR: MacAvaney et al., SIGIR 2020): the embeddings and the lowest
        `separate_layers` layers read each text alone, exactly as a bi-encoder does (its own
        `[CLS]`, positions from 0, token type 0); the layers above read the two texts' states
        side by side, every token attending to both texts. The last layer's states.

        `cross_bias` (one row per layer above, one column per attention head) is added to the
        attention logits from each token to the other text's tokens in those layers: very
        negative, a text all but ignores the other; 0, plain joint attention.

        Shape:
            left (ids (B, L), mask (B, L)), right (ids (B, R), mask (B, R)),
            cross_bias (num_layers - separate_layers, heads) -> (B, L + R, H), zero on padding.
        """
        model = self.transformer
        layers = getattr(getattr(model, "encoder", None), "layer", None)
        if getattr(model, "embeddings", None) is None or layers is None:
            raise ValueError(
                f"separate_layers needs a BERT-style encoder (embeddings, encoder.layer); "
                f"{type(model).__name__} is not one"
            )
        if not 0 <= separate_layers <= len(layers) or self.layer != self.num_layers:
            raise ValueError(
                f"separate_layers must be in 0..{len(layers)} and the encoder must output its "
                f"last layer: got {separate_layers} and layer {self.layer}"
            )
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.config.trainable):
            parts = []
            for ids, mask in (left, right):
                attend = mask.clone()  # (B, T): an empty text attends to its first position
                attend[:, 0] |= ~mask.any(dim=1)
                hidden = model.embeddings(input_ids=ids.masked_fill(~mask, self.pad_id))
                for layer in layers[:separate_layers]:
                    hidden = _run_layer(layer, hidden, attend)  # (B, T, H)
                parts.append((hidden, attend))
            hidden = torch.cat([parts[0][0], parts[1][0]], dim=1)  # (B, L + R, H)
            attend = torch.cat([parts[0][1], parts[1][1]], dim=1)  # (B, L + R)
            width = left[0].shape[1]
            side = torch.arange(hidden.shape[1], device=hidden.device) >= width  # (L + R,)
            across = (side[:, None] != side[None, :]).to(hidden.dtype)  # (L + R, L + R)
            for i, layer in enumerate(layers[separate_layers:]):
                extra = None if cross_bias is None else cross_bias[i][:, None, None] * across
                hidden = _run_layer(layer, hidden, attend, extra)  # (B, L + R, H)
        mask = torch.cat([left[1], right[1]], dim=1)  # (B, L + R)
        return self.dropout(hidden) * mask.unsqueeze(-1)

    def load_pretrained_transformer(self, path: str | Path) -> dict[str, list[str]]:
        """Loads the weights of an encoder directory (`encoders.resolve_source`)."""
        from attnmatch.encoders import load_weights

        info = load_weights(self.transformer, Path(path))
        if self._cache is not None:
            self._cache = None  # the weights changed
        return info

    def rescale_init(self, fan_in: int, fan_out: int) -> None:
        """A no-op: the initial values are the pretrained encoder's, not a random table to scale to a
        model's first-layer fans (`TrigramEncoder.rescale_init`)."""

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


def fine_tuned_transformer(encoder: nn.Module) -> TransformerTokenEncoder | None:
    """`encoder` when it is a transformer trained with the model (what activation
    checkpointing and memory estimates apply to), None otherwise."""
    if isinstance(encoder, TransformerTokenEncoder) and encoder.config.trainable:
        return encoder
    return None


def _run_layer(
    layer: nn.Module,
    hidden: torch.Tensor,
    attend: torch.Tensor,
    extra: torch.Tensor | None = None,
) -> torch.Tensor:
    """One transformer layer with an additive mask over the keys (both the eager and the SDPA
    attention read it), plus `extra` on the logits: (B, T, H), (B, T), (heads, T, T) ->
    (B, T, H)."""
    blocked = torch.finfo(hidden.dtype).min
    bias = (~attend).to(hidden.dtype)[:, None, None, :] * blocked  # (B, 1, 1, T)
    if extra is not None:
        bias = (bias + extra.unsqueeze(0)).clamp(min=blocked)  # (B, heads, T, T)
    out = layer(hidden, bias)
    return out[0] if isinstance(out, tuple) else out  # transformers 4 returns a tuple


def traceable_states(
    encoder: nn.Module, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor | None = None
) -> torch.Tensor:
    """A token encoder's states as an exported graph (`attnmatch.export`) computes them: (B, T)
    -> (B, T, H). A `TransformerTokenEncoder` in eval mode, written without in-place updates,
    zero on padding (a text without tokens attends to its first position, as there); any other
    encoder, its own forward."""
    if not isinstance(encoder, TransformerTokenEncoder):
        return encoder(ids, mask)  # (B, T, E)
    first = mask[:, :1] | ~mask.any(dim=1, keepdim=True)  # (B, 1)
    attend = torch.cat([first, mask[:, 1:]], dim=1)  # (B, T)
    ids = ids.masked_fill(~mask, encoder.pad_id)  # (B, T)
    want_all = encoder.layer != encoder.num_layers
    out = encoder.transformer(
        input_ids=ids,
        attention_mask=attend.long(),
        token_type_ids=types,
        output_hidden_states=want_all,
        return_dict=True,
    )
    hidden = out.hidden_states[encoder.layer] if want_all else out.last_hidden_state  # (B, T, H)
    return hidden * mask.unsqueeze(-1)  # (B, T, H)


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
