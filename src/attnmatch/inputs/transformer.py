"""Transformer inputs: sub-word tokens -> a pretrained Hugging Face encoder's hidden states.

The encoder (e.g. all-MiniLM-L6-v2, the named source "minilm-l6") reads its own sub-word ids,
with its special tokens (`[CLS] ... [SEP]`), and outputs one layer's hidden states, frozen or
fine-tuned. Its architecture is the Hugging Face config kept in the model config
(`TokenEncoderConfig.transformer_config`), so a saved model rebuilds it without the source; its
tokenizer is saved as `tokenizer.json` in the model directory.

A text is cut to `max_length` sub-words (special tokens included), after reading at most
`CHARS_PER_TOKEN` characters per sub-word (`attnmatch.data.tokenize`), and never to more
sub-words than the encoder has positions (`position_limit`: 512 for MiniLM): a `max_length`
beyond them keeps as many as the encoder reads (`sub_words_read`), at fit and at load alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attnmatch import configs
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import check_max_length
from attnmatch.inputs.base import lazy_class
from attnmatch.inputs.subword import SubwordInputs

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from attnmatch.inputs import TokenEncoderConfig


@dataclass(frozen=True, kw_only=True)
class TransformerInputsConfig:
    """The `[inputs]` section for a pretrained transformer.

    Args:
        source: "minilm-l6" (all-MiniLM-L6-v2, from the `attnmatch[minilm]` extra) or a local
            Hugging Face / sentence-transformers model directory.
        trainable: fine-tune the transformer (frozen by default).
        layer: which hidden state the model reads (0 = the embedding layer, -1 = the last).
        max_length: sub-words per text, special tokens included (2 to 1,000,000), in
            training, scoring and serving alike; at most the encoder's positions are kept
            (512 for MiniLM).
        dropout: dropout on the hidden states.
    """

    kind: Literal["transformer"] = "transformer"
    source: str = "minilm-l6"
    trainable: bool = False
    layer: int = -1
    max_length: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if not self.source:
            raise ValueError('source is empty: name an encoder ("minilm-l6") or a directory')
        check_max_length(self.max_length, minimum=2)  # 2: the special tokens
        configs.check_dropout(self.dropout)


# Models whose position ids start after the padding id (fairseq's convention): they read
# max_position_embeddings - pad_token_id - 1 tokens.
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert", "longformer"})


def position_limit(transformer_config: dict[str, Any]) -> int | None:
    """The most tokens a transformer reads per sequence (its absolute position embeddings);
    None when its config does not say."""
    positions = transformer_config.get("max_position_embeddings")
    if isinstance(positions, bool) or not isinstance(positions, int):
        return None
    if transformer_config.get("model_type") in _OFFSET_POSITIONS:
        pad = transformer_config.get("pad_token_id")
        positions -= (pad if isinstance(pad, int) else 0) + 1
    return positions


def sub_words_read(max_length: int, transformer_config: dict[str, Any] | None) -> int:
    """The sub-words per text the tokenizer keeps: `max_length`, or fewer when the encoder
    has fewer positions (it could not read more)."""
    positions = position_limit(transformer_config or {})
    return max_length if positions is None else max(2, min(max_length, positions))


class TransformerInputs(SubwordInputs):
    """A sub-word tokenizer and a pretrained transformer (`TransformerInputsConfig`)."""

    kind = "transformer"
    config_cls = TransformerInputsConfig
    encoder_cls = lazy_class("attnmatch.inputs.transformer_layer", "TransformerTokenEncoder")

    def __init__(
        self,
        config: TransformerInputsConfig,
        tokenizer: SubwordTokenizer | None = None,
        transformer_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(config, tokenizer)
        self.transformer_config = transformer_config

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        tc = config.transformer_config
        if not tc:
            raise ValueError(
                "a transformer encoder needs transformer_config (the Hugging Face config.json); "
                '[inputs] with kind = "transformer" fills it from its source'
            )
        hidden, layers = tc.get("hidden_size"), tc.get("num_hidden_layers")
        if hidden != config.embedding_dim:
            raise ValueError(
                f"embedding_dim ({config.embedding_dim}) must equal the transformer's hidden_size "
                f"({hidden})"
            )
        if tc.get("vocab_size") != config.vocab_size:
            raise ValueError(
                f"vocab_size ({config.vocab_size}) must equal the transformer's vocab_size "
                f"({tc.get('vocab_size')})"
            )
        if isinstance(layers, int) and not -layers - 1 <= config.layer <= layers:
            raise ValueError(f"layer must be in [{-layers - 1}, {layers}], got {config.layer}")
        check_max_length(config.max_length, minimum=2, name="max_length")

    def _resolve(self) -> None:
        """Finds the source directory and reads its config and tokenizer (once)."""
        if self.directory is not None:
            return
        from attnmatch.encoders import read_config, read_tokenizer, resolve_source

        self.directory = resolve_source(self.config.source)
        self.transformer_config = read_config(self.directory)
        self.tokenizer = SubwordTokenizer(
            read_tokenizer(self.directory),
            max_length=sub_words_read(self.config.max_length, self.transformer_config),
        )

    def encoder_config(self) -> dict[str, Any]:
        if self.transformer_config is None:
            self._resolve()
        tc = self.transformer_config or {}
        return {
            "kind": self.kind,
            "vocab_size": int(tc["vocab_size"]),
            "embedding_dim": int(tc["hidden_size"]),
            "trainable": self.config.trainable,
            "dropout": self.config.dropout,
            "layer": self.config.layer,
            "max_length": self.config.max_length,
            "transformer_config": tc,
        }

    def init_encoder(self, encoder: nn.Module) -> None:
        from attnmatch.encoders import source_fingerprint

        self._resolve()
        assert self.directory is not None
        info = encoder.load_pretrained_transformer(self.directory)  # type: ignore[operator]
        self.stats.update(  # after what `fit` recorded
            source=self.config.source,
            kind=self.kind,
            directory=str(self.directory),
            weights_sha256=source_fingerprint(self.directory),
            ignored_weights=info["ignored"],
            trainable=self.config.trainable,
            layer=self.config.layer,
        )

    def enable_cache(self, encoder: nn.Module) -> None:
        encoder.enable_cache()  # type: ignore[operator]  # a no-op when fine-tuned

    def disable_cache(self, encoder: nn.Module) -> None:
        encoder.disable_cache()  # type: ignore[operator]

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> TransformerInputs:
        config = configs.from_dict(TransformerInputsConfig, entry, path="inputs")
        bound = sub_words_read(config.max_length, _saved_transformer_config(directory))
        tokenizer = SubwordTokenizer.from_file(directory / "tokenizer.json", max_length=bound)
        return cls(config, tokenizer)


def _saved_transformer_config(directory: Path) -> dict[str, Any]:
    """The transformer config a model directory's config.json keeps in its model config (both
    formats keep it at config.encoder.transformer_config); {} when it is not there."""
    try:
        header = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        found = header["config"]["encoder"]["transformer_config"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}
