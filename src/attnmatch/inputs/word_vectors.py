"""Word-vector inputs: word tokens -> a vocabulary -> a (pretrained) word-vector table.

The vocabulary is the training texts' words (at least `min_freq` times), plus, with
`vocab_from_eval_splits`, dev/test words that have a pretrained vector, so fixed pretrained
vectors are not lost to `<unk>` at evaluation. Pretrained vectors (GloVe, a vectors file) are
aligned to it by `attnmatch.embeddings` and kept fixed, as the papers do, unless `trainable`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from attnmatch import configs
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import Vocab
from attnmatch.inputs.base import Inputs, TokenEncoderConfig


@dataclass(frozen=True, kw_only=True)
class WordVectorsConfig:
    """The `[inputs]` section for word vectors.

    Args:
        vectors: "glove-6b-50d", a vectors file (GloVe text, word2vec binary), or "random"
            (no pretrained vectors: a random table of `dim` columns, best trained).
        dim: the vector size when vectors = "random" (otherwise the file's).
        normalize: L2-normalise the pretrained vectors (aMV-LSTM does).
        oov: vectors of words without a pretrained one: "random" (normal, scaled to the
            pretrained std) or "zero".
        lowercase, max_length: word tokenizer settings.
        min_freq: minimum training-set frequency of a vocabulary word.
        vocab_from_eval_splits: also add dev/test words that have a pretrained vector.
        trainable: fine-tune the table.
        dropout: dropout on the word vectors.
    """

    kind: Literal["word_vectors"] = "word_vectors"
    vectors: str = "glove-6b-50d"
    dim: int = 50
    normalize: bool = True
    oov: Literal["random", "zero"] = "random"
    lowercase: bool = True
    max_length: int | None = None
    min_freq: int = 1
    vocab_from_eval_splits: bool = True
    trainable: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        configs.check_positive(self, "dim", "min_freq")
        configs.check_dropout(self.dropout)
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 or unset, got {self.max_length}")


class WordVectorEncoder(nn.Module):
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

    def rescale_init(self, fan_in: int, fan_out: int) -> None:
        """A no-op: the initial values are the word vectors', not a random table to scale to a
        model's first-layer fans (`TrigramEncoder.rescale_init`)."""

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


class WordVectorInputs(Inputs):
    """Word tokens, a `Vocab` and a word-vector table (`WordVectorsConfig`)."""

    kind = "word_vectors"
    config_cls = WordVectorsConfig
    encoder_cls = WordVectorEncoder

    def __init__(self, config: WordVectorsConfig, vocab: Vocab | None = None) -> None:
        super().__init__(config)
        self.tokenizer = Tokenizer(lowercase=config.lowercase, max_length=config.max_length)
        self.vocab = vocab
        self.matrix: np.ndarray | None = None

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        if config.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad>, <unk>), got {config.vocab_size}")

    def fit(
        self, train_texts: Iterable[str], eval_texts: Iterable[str] = (), *, seed: int = 0
    ) -> None:
        from attnmatch.embeddings import build_embedding_matrix, load_named_vectors

        c, tok = self.config, self.tokenizer
        vocab = Vocab.build((tok.tokenize(t) for t in train_texts), min_freq=c.min_freq)
        self.stats = {"kind": self.kind, "source": c.vectors}
        if c.vectors != "random":
            if c.vocab_from_eval_splits:
                known = load_named_vectors(c.vectors).index()
                vocab = vocab.extend(
                    w for text in eval_texts for w in tok.tokenize(text) if w in known
                )
            self.matrix, align = build_embedding_matrix(
                c.vectors, vocab, oov=c.oov, normalize=c.normalize, seed=seed
            )
            self.stats.update(vars(align))
        self.vocab = vocab

    def encoder_config(self) -> dict[str, Any]:
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        dim = self.config.dim if self.matrix is None else int(self.matrix.shape[1])
        return {
            "kind": self.kind,
            "vocab_size": len(self.vocab),
            "embedding_dim": dim,
            "trainable": self.config.trainable,
            "dropout": self.config.dropout,
        }

    def init_encoder(self, encoder: nn.Module) -> None:
        if self.matrix is not None:
            encoder.load_pretrained(self.matrix)  # type: ignore[operator]

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        vocab, tok = self.vocab, self.tokenizer
        return [np.asarray(vocab.encode(tok.tokenize(t)), dtype=np.int64) for t in texts]

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.tokenize(text)

    def save(self, directory: Path) -> dict[str, Any]:
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        (directory / "vocab.json").write_text(self.vocab.to_json(), encoding="utf-8")
        return configs.to_dict(self.config)

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> WordVectorInputs:
        file = directory / "vocab.json"
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: not a complete attnmatch model directory")
        config = configs.from_dict(WordVectorsConfig, entry, path="inputs")
        return cls(config, Vocab.load(file))
