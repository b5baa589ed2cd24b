"""Word-piece inputs: a pretrained transformer's own sub-word embedding table, read as static
vectors (no transformer pass).

The tokenizer is the encoder's (e.g. all-MiniLM-L6-v2's WordPiece, 30,522 sub-words, its
special tokens `[CLS] ... [SEP]` included, as `transformer` inputs read them); each id looks
up its row of the encoder's input embedding table (`embeddings.word_embeddings.weight`, 384
dimensions for MiniLM), without position or type embeddings and without the layer norm. A
model then reads contextless sub-word vectors at the cost of a table lookup: what a seed
model distilled from MiniLM reads at full speed (`attnmatch.training.distillation`).

The table is the model's own weights (saved in model.safetensors, 47 MB for MiniLM), and the
tokenizer `tokenizer.json` in the model directory: a saved model needs no source.
`normalize` scales each row to unit length, as GloVe is read (`WordVectorsConfig.normalize`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from attnmatch import configs
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import check_max_length
from attnmatch.inputs.base import lazy_class
from attnmatch.inputs.subword import SubwordInputs

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn


TABLE_SUFFIX = "embeddings.word_embeddings.weight"  # the input table of a BERT-like encoder


@dataclass(frozen=True, kw_only=True)
class WordPieceInputsConfig:
    """The `[inputs]` section for a transformer's static sub-word vectors.

    Args:
        source: "minilm-l6" (all-MiniLM-L6-v2) or a local Hugging Face model directory.
        trainable: train the table with the model (fixed by default).
        normalize: scale each vector to unit L2 norm.
        max_length: sub-words per text, special tokens included.
        dropout: dropout on the vectors.
    """

    kind: Literal["wordpiece"] = "wordpiece"
    source: str = "minilm-l6"
    trainable: bool = False
    normalize: bool = False
    max_length: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if not self.source:
            raise ValueError('source is empty: name an encoder ("minilm-l6") or a directory')
        check_max_length(self.max_length, minimum=2)  # 2: the special tokens
        configs.check_dropout(self.dropout)


def read_table(directory: Path) -> torch.Tensor:
    """The input embedding table of the encoder in `directory` (its model.safetensors).

    Raises:
        ValueError: no tensor named `*embeddings.word_embeddings.weight` in the file.
    """
    from safetensors import safe_open

    file = directory / "model.safetensors"
    with safe_open(str(file), framework="pt") as weights:
        names = [k for k in weights.keys() if k.endswith(TABLE_SUFFIX)]  # noqa: SIM118
        if not names:
            raise ValueError(f"{file}: no sub-word embedding table ({TABLE_SUFFIX})")
        return weights.get_tensor(names[0]).float()


class WordPieceInputs(SubwordInputs):
    """A transformer's tokenizer and its sub-word table as static vectors
    (`WordPieceInputsConfig`)."""

    kind = "wordpiece"
    config_cls: ClassVar[type] = WordPieceInputsConfig
    encoder_cls = lazy_class("attnmatch.inputs.layers", "WordPieceEncoder")

    def __init__(
        self,
        config: Any,  # WordPieceInputsConfig, or a subclass kind's config
        tokenizer: SubwordTokenizer | None = None,
        shape: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(config, tokenizer)
        self.shape = shape

    def _resolve(self) -> None:
        """Finds the source directory and reads its tokenizer and table size (once)."""
        if self.directory is not None:
            return
        from attnmatch.encoders import read_config, read_tokenizer, resolve_source

        self.directory = resolve_source(self.config.source)
        tc = read_config(self.directory)
        self.shape = (int(tc["vocab_size"]), int(tc["hidden_size"]))
        self.tokenizer = SubwordTokenizer(
            read_tokenizer(self.directory), max_length=self.config.max_length
        )

    def encoder_config(self) -> dict[str, Any]:
        if self.shape is None:
            self._resolve()
        assert self.shape is not None
        return {
            "kind": self.kind,
            "vocab_size": self.shape[0],
            "embedding_dim": self.shape[1],
            "trainable": self.config.trainable,
            "dropout": self.config.dropout,
            "max_length": self.config.max_length,
        }

    def _table(self) -> torch.Tensor:
        """The (V, E) table the encoder starts from (after `_resolve`)."""
        assert self.directory is not None
        return read_table(self.directory)

    def init_encoder(self, encoder: nn.Module) -> None:
        self._resolve()
        table = self._table()  # (V, E)
        if self.config.normalize:
            table = table / table.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        encoder.load_table(table)  # type: ignore[operator]
        self.stats.update(source=self.config.source, kind=self.kind, rows=int(table.shape[0]))

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> WordPieceInputs:
        config: Any = configs.from_dict(cls.config_cls, entry, path="inputs")
        tokenizer = SubwordTokenizer.from_file(
            directory / "tokenizer.json", max_length=config.max_length
        )
        return cls(config, tokenizer)
