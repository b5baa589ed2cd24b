"""What inputs that read a pretrained encoder's sub-word tokenizer share: `transformer` (the
encoder itself) and `wordpiece` (its input table as static vectors).

A subclass finds its source in `_resolve` (the directory, the tokenizer, what the encoder
config needs) and builds and initialises its encoder; tokenising, counting unknown and cut
sub-words, saving the tokenizer and checking it against a saved table are the same for both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch import configs
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.inputs.base import Inputs


class SubwordInputs(Inputs):
    """Inputs tokenised by a pretrained encoder's sub-word tokenizer (`tokenizer.json`)."""

    state_file = "tokenizer.json"

    def __init__(self, config: Any, tokenizer: SubwordTokenizer | None = None) -> None:
        super().__init__(config)
        self.tokenizer = tokenizer
        self.directory: Path | None = None

    def _resolve(self) -> None:
        """Finds the source directory and reads its tokenizer (once)."""
        raise NotImplementedError

    def fit(self, train_texts: Any = (), eval_texts: Any = (), *, seed: int = 0) -> None:
        """Reads the source; records the eval texts' unknown sub-words and the fit texts that
        `encode` cuts."""
        self._resolve()
        eval_texts = list(eval_texts)
        self.stats = {"kind": self.kind, "source": self.config.source}
        self.record_eval_unknown(*self.unknown_tokens(dict.fromkeys(eval_texts)))
        self.record_truncated(self.truncated(dict.fromkeys([*train_texts, *eval_texts])))

    def _tokenizer(self) -> SubwordTokenizer:
        if self.tokenizer is None:
            self._resolve()
        assert self.tokenizer is not None
        return self.tokenizer

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._tokenizer().encode_batch(list(texts))

    @property
    def max_tokens(self) -> int:
        """The sub-words a text keeps (`max_length`, or fewer when the source says so)."""
        return self._tokenizer().max_length

    def truncated(self, texts: Iterable[str]) -> int:
        return self._tokenizer().truncated(list(texts))

    def tokens(self, text: str) -> list[str]:
        return self._tokenizer().tokenize(text)

    def unknown_tokens(self, texts: Iterable[str]) -> tuple[Counter[str], int]:
        """The text behind each unknown sub-word (`[UNK]`) of `texts`, and the number of
        sub-words, special tokens not counted (after truncation to `max_tokens`)."""
        unknown, total = self._tokenizer().unknown_pieces(list(texts))
        return Counter(unknown), total

    def save(self, directory: Path) -> dict[str, Any]:
        (directory / "tokenizer.json").write_text(self._tokenizer().to_json(), encoding="utf-8")
        return configs.to_dict(self.config)

    def check_fits(self, rows: int, directory: Path) -> None:
        """Every sub-word id of the tokenizer is a row of the saved embedding table."""
        size = self.tokenizer.vocab_size if self.tokenizer is not None else 0
        if size > rows:
            raise ValueError(
                f"{directory / 'tokenizer.json'} has {size} sub-words but the embedding table of "
                f"{directory / 'model.safetensors'} has {rows} rows: the tokenizer belongs to "
                "another model"
            )
