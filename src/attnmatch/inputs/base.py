"""What every input kind provides, and the token-encoder config that models read.

A model never asks which kind of input it reads: it builds `build_token_encoder(config.encoder)`
and calls it as ``token_encoder(ids, mask) -> (B, L, E)``. Everything that differs between kinds
(tokenizing, the vocabulary, pretrained weights, what is saved with a model) is a method of the
kind's `Inputs` class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from torch import nn

InputKind = Literal["word_vectors", "transformer", "trigrams"]


@dataclass(frozen=True, kw_only=True)
class TokenEncoderConfig:
    """The input layer of a model, as the model's config records it (filled by `Inputs`).

    Args:
        kind: which `Inputs` kind built it: "word_vectors" (a word-vector table), "transformer"
            (a pretrained sub-word encoder) or "trigrams" (letter-trigram bags per word).
        vocab_size: rows of the table (word vectors: `<pad>` (0) and `<unk>` (1) included;
            transformer: its vocabulary; trigrams: the hash buckets, 0 = padding).
        embedding_dim: E, the output size (transformer: its hidden size).
        trainable: fine-tune the table / the transformer.
        dropout: dropout on the output vectors.
        layer: transformer: which hidden state to output (0 = the embedding layer, -1 = the last).
        max_length: transformer: sub-words per text, special tokens included.
        transformer_config: transformer: the Hugging Face config.json of the encoder, kept here
            so a saved model rebuilds the architecture without the original files.
    """

    kind: InputKind = "word_vectors"
    vocab_size: int
    embedding_dim: int = 50
    trainable: bool = False
    dropout: float = 0.0
    layer: int = -1
    max_length: int = 256
    transformer_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.embedding_dim < 1:
            raise ValueError(f"embedding_dim must be >= 1, got {self.embedding_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        from attnmatch.inputs import inputs_class  # the kinds register there

        inputs_class(self.kind).check_encoder_config(self)

    @property
    def output_dim(self) -> int:
        return self.embedding_dim


class Inputs:
    """One input kind: tokenize, fit, encode, build and initialise the token encoder, save/load.

    Subclasses set `kind`, `config_cls` (the `[inputs]` section) and `encoder_cls` (the module).
    """

    kind: ClassVar[str]
    config_cls: ClassVar[type]
    encoder_cls: ClassVar[type[nn.Module]]

    def __init__(self, config: Any) -> None:
        self.config = config
        self.stats: dict[str, Any] = {"kind": self.kind}

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        """Raises ValueError when `config` cannot build this kind's encoder."""

    def fit(
        self, train_texts: Iterable[str], eval_texts: Iterable[str] = (), *, seed: int = 0
    ) -> None:
        """Prepares the inputs for a new model (vocabulary, pretrained weights); a no-op by
        default. `eval_texts` may add words of dev/test texts that have a pretrained vector
        (texts only, never labels)."""

    def encoder_config(self) -> dict[str, Any]:
        """The model config's `encoder` values (a `TokenEncoderConfig` as a dict)."""
        raise NotImplementedError

    def init_encoder(self, encoder: nn.Module) -> None:
        """Copies pretrained weights into a freshly built token encoder (no-op by default)."""

    def enable_cache(self, encoder: nn.Module) -> None:
        """Lets a frozen encoder memoise its outputs per distinct text (no-op by default)."""

    def disable_cache(self, encoder: nn.Module) -> None:
        """Turns `enable_cache` off: every text is encoded again (no-op by default)."""

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Id arrays of texts: (n,) token ids, or (n, K) per-token ids (trigrams)."""
        raise NotImplementedError

    def tokens(self, text: str) -> list[str]:
        """The tokens `encode` gives ids for, as strings (for attention plots)."""
        raise NotImplementedError

    def save(self, directory: Path) -> dict[str, Any]:
        """Writes what the inputs need besides the weights into a model directory (a vocabulary
        or a tokenizer file) and returns the `inputs` entry of its config.json."""
        raise NotImplementedError

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> Inputs:
        """The inputs saved by `save` in `directory` (`entry` is what `save` returned)."""
        raise NotImplementedError
