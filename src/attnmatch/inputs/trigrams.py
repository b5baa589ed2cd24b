"""Letter-trigram inputs (Huang et al., DSSM, CIKM 2013, §3.2): each word is the bag of its
hashed letter trigrams, and its vector is the sum of those trigrams' rows of a trained table.

Word t's vector is W^T f_t, with f_t its trigram count vector (size `buckets`): exactly the first
layer of DSSM applied to one word. No vocabulary is built or saved: any word, seen or not, gets its
trigrams (`data/trigrams.py`, CRC-32 hashing into `buckets - 1` ids, 0 = padding).

Ids per text are (n, K) arrays (K trigrams per word, zero-padded), so batches carry
`left_ids` (B, L, K) with masks (B, L) over words. Both are bounded: n by `inputs.max_length`
words per text (`DEFAULT_MAX_TOKENS` unless set) and K by hashing at most the first
`MAX_WORD_LETTERS` letters of a word (one 30,000-letter "word" would otherwise pad every bag of
its batch to 30,000 trigrams).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from attnmatch import configs
from attnmatch.data.tokenize import DEFAULT_MAX_TOKENS, Tokenizer, check_max_length
from attnmatch.data.trigrams import word_trigram_ids
from attnmatch.inputs.base import Inputs, lazy_class

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.inputs import TokenEncoderConfig

MAX_WORD_LETTERS = 100
"""Letters of a word that are hashed into trigrams (a word has as many trigrams as letters):
the longest word of the bundled benchmarks has 63."""


@dataclass(frozen=True, kw_only=True)
class TrigramInputsConfig:
    """The `[inputs]` section for letter trigrams.

    Args:
        buckets: V, trigram hash buckets (0 = padding; DSSM's ~30K trigram vocabulary).
        dim: E, the size of a word's vector (DSSM: its first layer, 300).
        lowercase: lower-case the text before tokenising.
        max_length: words kept per text (1 to 1,000,000; unset: `DEFAULT_MAX_TOKENS`, 512),
            in training, scoring and serving alike. A model directory records the number.
        trainable: train the trigram table (it starts random, so it should be).
        dropout: dropout on the word vectors.
    """

    kind: Literal["trigrams"] = "trigrams"
    buckets: int = 30001
    dim: int = 300
    lowercase: bool = True
    max_length: int | None = None
    trainable: bool = True
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.buckets < 2:
            raise ValueError(f"buckets must be >= 2 (id 0 is padding), got {self.buckets}")
        configs.check_positive(self, "dim")
        configs.check_dropout(self.dropout)
        if self.max_length is not None:
            check_max_length(self.max_length)

    @property
    def max_tokens(self) -> int:
        """The words kept per text: `max_length`, or `DEFAULT_MAX_TOKENS` when unset."""
        return DEFAULT_MAX_TOKENS if self.max_length is None else self.max_length


class TrigramInputs(Inputs):
    """Word tokens hashed into letter trigrams, and a trigram table (`TrigramInputsConfig`)."""

    kind = "trigrams"
    config_cls = TrigramInputsConfig
    encoder_cls = lazy_class("attnmatch.inputs.layers", "TrigramEncoder")

    def __init__(self, config: TrigramInputsConfig) -> None:
        super().__init__(config)
        self.tokenizer = Tokenizer(lowercase=config.lowercase, max_length=config.max_tokens)

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        if config.vocab_size < 2:
            raise ValueError(
                f"vocab_size (trigram buckets) must be >= 2 (0 is padding), got {config.vocab_size}"
            )

    def encoder_config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "vocab_size": self.config.buckets,
            "embedding_dim": self.config.dim,
            "trainable": self.config.trainable,
            "dropout": self.config.dropout,
        }

    def fit(
        self, train_texts: Iterable[str], eval_texts: Iterable[str] = (), *, seed: int = 0
    ) -> None:
        """Nothing to fit (no vocabulary); records the eval texts' word count and the fit
        texts that `encode` cuts."""
        eval_texts = list(eval_texts)
        super().fit(train_texts, eval_texts, seed=seed)
        self.record_truncated(self.truncated(dict.fromkeys([*train_texts, *eval_texts])))

    def _words(self, text: str) -> tuple[list[str], bool]:
        """The words of `text` as they are hashed (at most `MAX_WORD_LETTERS` letters each),
        and whether anything was cut."""
        words, cut = self.tokenizer.tokenize_checked(text)
        if any(len(w) > MAX_WORD_LETTERS for w in words):
            return [w[:MAX_WORD_LETTERS] for w in words], True
        return words, cut

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        buckets = self.config.buckets
        return [word_trigram_ids(self._words(t)[0], buckets) for t in texts]

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens

    def truncated(self, texts: Iterable[str]) -> int:
        return sum(self._words(t)[1] for t in texts)

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.tokenize(text)

    def unknown_tokens(self, texts: Iterable[str]) -> tuple[Counter[str], int]:
        """No word is unknown (every word hashes to known trigram ids); the number of words."""
        return Counter(), sum(len(self.tokenizer.tokenize(t)) for t in texts)

    def save(self, directory: Path) -> dict[str, Any]:
        return configs.to_dict(self.config) | {"max_length": self.max_tokens}

    def check_fits(self, rows: int, directory: Path) -> None:
        """The hash buckets are the rows of the trigram table."""
        if self.config.buckets != rows:
            raise ValueError(
                f"{directory / 'config.json'}: inputs.buckets is {self.config.buckets} but the "
                f"trigram table of {directory / 'model.safetensors'} has {rows} rows: the files "
                "do not belong together"
            )

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> TrigramInputs:
        return cls(configs.from_dict(TrigramInputsConfig, entry, path="inputs"))
