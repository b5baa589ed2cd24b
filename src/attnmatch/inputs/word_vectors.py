"""Word-vector inputs: word tokens -> a vocabulary -> a (pretrained) word-vector table.

The vocabulary is, in id order: the training texts' words (at least `min_freq` times); with
`vocab_from_eval_splits`, the dev/test words that have a pretrained vector, so fixed pretrained
vectors are not lost to `<unk>` at evaluation; and, with `pretrained_vocab`, the most frequent
words of the pretrained file not yet in it, so that a model keeps knowing words its training
texts never held (`python`, `password` for a model trained on WikiQA). Pretrained vectors (GloVe,
a vectors file) are aligned to it by `attnmatch.embeddings` and kept fixed, as the papers do,
unless `trainable`; the rows of the words added from the file stay fixed even then.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from attnmatch import configs
from attnmatch.data.tokenize import DEFAULT_MAX_TOKENS, Tokenizer, check_max_length
from attnmatch.data.vocab import UNK_ID, Vocab
from attnmatch.inputs.base import Inputs, lazy_class

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from attnmatch.inputs import TokenEncoderConfig


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
        lowercase: lower-case the text before tokenising.
        max_length: tokens kept per text (1 to 1,000,000; unset: `DEFAULT_MAX_TOKENS`, 512),
            in training, scoring and serving alike; the rest of a longer text is not read.
            A model directory records the number.
        min_freq: minimum training-set frequency of a vocabulary word.
        vocab_from_eval_splits: also add dev/test words that have a pretrained vector.
        pretrained_vocab: also add the words among the first `pretrained_vocab` rows of the
            pretrained file (its most frequent words) that the tokenizer gives as one token,
            with their pretrained vectors, kept fixed; "all" reads the whole file, 0 adds none.
            A bound on the table: 100,000 rows of 50 dimensions are 20 MB of float32.
        trainable: fine-tune the table (the rows added by `pretrained_vocab` stay fixed).
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
    pretrained_vocab: int | Literal["all"] = 100_000
    trainable: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        configs.check_positive(self, "dim", "min_freq")
        configs.check_dropout(self.dropout)
        if self.max_length is not None:
            check_max_length(self.max_length)
        n = self.pretrained_vocab
        if n != "all" and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
            raise ValueError(f'pretrained_vocab must be >= 0 or "all", got {n!r}')

    @property
    def max_tokens(self) -> int:
        """The tokens kept per text: `max_length`, or `DEFAULT_MAX_TOKENS` when unset (as in
        model directories written before the bound, loaded with it)."""
        return DEFAULT_MAX_TOKENS if self.max_length is None else self.max_length

    @property
    def pretrained_limit(self) -> int | None:
        """The rows of the pretrained file `pretrained_vocab` reads (None: all of them)."""
        n = self.pretrained_vocab
        return n if isinstance(n, int) else None


class WordVectorInputs(Inputs):
    """Word tokens, a `Vocab` and a word-vector table (`WordVectorsConfig`)."""

    kind = "word_vectors"
    state_file = "vocab.json"
    config_cls = WordVectorsConfig
    encoder_cls = lazy_class("attnmatch.inputs.layers", "WordVectorEncoder")

    def __init__(self, config: WordVectorsConfig, vocab: Vocab | None = None) -> None:
        super().__init__(config)
        self.tokenizer = Tokenizer(lowercase=config.lowercase, max_length=config.max_tokens)
        self.vocab = vocab
        self.matrix: np.ndarray | None = None
        self.pretrained_rows = 0  # the last rows of the vocabulary: words added from the file

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        if config.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad>, <unk>), got {config.vocab_size}")
        if config.pretrained_rows > config.vocab_size - 2:
            raise ValueError(
                f"pretrained_rows ({config.pretrained_rows}) must leave <pad> and <unk> among "
                f"the vocab_size ({config.vocab_size}) rows"
            )

    def fit(
        self, train_texts: Iterable[str], eval_texts: Iterable[str] = (), *, seed: int = 0
    ) -> None:
        """The vocabulary and, with pretrained vectors, its matrix (see the module docstring).

        The training words keep the ids and vectors they have without `pretrained_vocab`; the
        aligned matrix of the fitted words goes through the embedding cache as before, and the
        rows of the added words are read from the already loaded vectors.
        """
        from attnmatch.embeddings import build_embedding_matrix, frequent_words, load_named_vectors

        c, tok = self.config, self.tokenizer
        cut: set[str] = set()  # the distinct texts `encode` cuts
        vocab = Vocab.build(_tokens_of(tok, train_texts, cut), min_freq=c.min_freq)
        eval_counts = _token_counts(tok, dict.fromkeys(eval_texts), cut)  # distinct texts
        self.stats = {"kind": self.kind, "source": c.vectors}
        self.matrix, self.pretrained_rows = None, 0
        if c.vectors != "random":
            read_file = c.vocab_from_eval_splits or c.pretrained_limit != 0
            vectors = load_named_vectors(c.vectors) if read_file else None
            if vectors is not None and c.vocab_from_eval_splits:
                known = vectors.index()
                vocab = vocab.extend(w for w in eval_counts if w in known)
            self.matrix, align = build_embedding_matrix(
                c.vectors, vocab, oov=c.oov, normalize=c.normalize, seed=seed, vectors=vectors
            )
            self.stats.update(vars(align))
            if vectors is not None and c.pretrained_limit != 0:
                words, rows = frequent_words(
                    vectors,
                    c.pretrained_limit,
                    skip=vocab,
                    accept=lambda w: tok.tokenize(w) == [w],
                    normalize=c.normalize,
                )
                vocab = vocab.extend(words, sort=False)
                self.matrix = np.concatenate([self.matrix, rows])  # (V, D)
                self.pretrained_rows = len(words)
                self.stats["pretrained_words"] = len(words)
        self.vocab = vocab
        self.record_eval_unknown(*_unknown_of(eval_counts, vocab))
        self.record_truncated(len(cut))

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
            "pretrained_rows": self.pretrained_rows,
        }

    def init_encoder(self, encoder: nn.Module) -> None:
        if self.matrix is not None:
            encoder.load_pretrained(self.matrix)  # type: ignore[operator]

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        vocab, tok = self.vocab, self.tokenizer
        return [np.asarray(vocab.encode(tok.tokenize(t)), dtype=np.int64) for t in texts]

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens

    def truncated(self, texts: Iterable[str]) -> int:
        return sum(self.tokenizer.tokenize_checked(t)[1] for t in texts)

    def unknown_tokens(self, texts: Iterable[str]) -> tuple[Counter[str], int]:
        """The words of `texts` that `encode` maps to `<unk>`, and the number of words."""
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        return _unknown_of(_token_counts(self.tokenizer, texts), self.vocab)

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.tokenize(text)

    def save(self, directory: Path) -> dict[str, Any]:
        if self.vocab is None:
            raise RuntimeError("word-vector inputs have no vocabulary yet: call fit() first")
        self.vocab.save(directory / "vocab.json")
        return configs.to_dict(self.config) | {"max_length": self.max_tokens}

    def check_fits(self, rows: int, directory: Path) -> None:
        """The vocabulary has one token per row of the embedding table."""
        if self.vocab is not None and len(self.vocab) != rows:
            raise ValueError(
                f"{directory / 'vocab.json'} holds {len(self.vocab)} tokens but the embedding "
                f"table of {directory / 'model.safetensors'} has {rows} rows: the vocabulary "
                "belongs to another model (save the model with Matcher.save rather than copying "
                "its files)"
            )

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> WordVectorInputs:
        file = directory / "vocab.json"
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: not a complete attnmatch model directory")
        config = configs.from_dict(WordVectorsConfig, entry, path="inputs")
        return cls(config, Vocab.load(file))  # the saved vocabulary, whatever built it


def _tokens_of(tokenizer: Tokenizer, texts: Iterable[str], cut: set[str]) -> Iterator[list[str]]:
    """The tokens of each text; the texts the tokenizer cuts are added to `cut`."""
    for text in texts:
        tokens, was_cut = tokenizer.tokenize_checked(text)
        if was_cut:
            cut.add(text)
        yield tokens


def _token_counts(
    tokenizer: Tokenizer, texts: Iterable[str], cut: set[str] | None = None
) -> Counter[str]:
    counts: Counter[str] = Counter()
    for tokens in _tokens_of(tokenizer, texts, set() if cut is None else cut):
        counts.update(tokens)
    return counts


def _unknown_of(counts: Counter[str], vocab: Vocab) -> tuple[Counter[str], int]:
    """(the counts of the tokens `vocab` maps to `<unk>`, the number of tokens)."""
    unknown = Counter({w: n for w, n in counts.items() if vocab.id(w) == UNK_ID})
    return unknown, sum(counts.values())
