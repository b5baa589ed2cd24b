"""Sub-word tokenisation for transformer encoders (a Hugging Face fast tokenizer).

The ids it gives are the encoder's own vocabulary ids, with its special tokens
(`[CLS] ... [SEP]` for BERT-style models), so they go to the model without a `Vocab`. Batches
are still padded with id 0 by `collate`; the masks say which positions are real and the
transformer encoder never reads the padded ids.

Each text is read up to `CHARS_PER_TOKEN` x `max_length` characters (`attnmatch.data.tokenize`)
before the fast tokenizer sees it, so a 100 MB text costs what a 16,384-character one costs
(256 sub-words); `truncated` tells which texts were cut.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnmatch.data.tokenize import CHARS_PER_TOKEN, check_max_length


class SubwordTokenizer:
    """A `tokenizers.Tokenizer` with truncation to `max_length` sub-words and no padding.

    Args:
        tokenizer_json: the `tokenizer.json` text of a fast tokenizer.
        max_length: sub-words per text, special tokens included (sentence-transformers'
            all-MiniLM-L6-v2 uses 256), 2 to `MAX_TOKENS_LIMIT`; at most `max_chars`
            characters of a text are read.

    Example:
        >>> tok = SubwordTokenizer.from_file("encoder/tokenizer.json")  # doctest: +SKIP
        >>> tok.tokenize("How are glacier caves formed?")                # doctest: +SKIP
        ['[CLS]', 'how', 'are', 'glacier', 'caves', 'formed', '?', '[SEP]']
    """

    kind = "subword"

    def __init__(self, tokenizer_json: str, *, max_length: int = 256) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        check_max_length(max_length, minimum=2, name="max_length")  # 2: the special tokens
        try:
            tok = HFTokenizer.from_str(tokenizer_json)
        except Exception as e:  # tokenizers raises a bare Exception on malformed JSON
            raise ValueError(f"not a valid fast-tokenizer JSON (tokenizer.json): {e}") from e
        tok.no_padding()
        tok.enable_truncation(max_length)
        self._tok = tok
        self._json = tokenizer_json
        self.max_length = max_length
        self.max_chars = max_length * CHARS_PER_TOKEN

    @classmethod
    def from_file(cls, path: str | Path, *, max_length: int = 256) -> SubwordTokenizer:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        try:
            return cls(path.read_text(encoding="utf-8"), max_length=max_length)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

    def _read(self, texts: list[str]) -> list[str]:
        """The part of each text that is tokenised: its first `max_chars` characters."""
        limit = self.max_chars
        return [t if len(t) <= limit else t[:limit] for t in texts]

    def encode(self, text: str) -> np.ndarray:
        """Sub-word ids with special tokens, (n,) int64."""
        return np.asarray(self._tok.encode(self._read([text])[0]).ids, dtype=np.int64)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        encodings = self._tok.encode_batch(self._read(texts))
        return [np.asarray(e.ids, dtype=np.int64) for e in encodings]

    def tokenize(self, text: str) -> list[str]:
        """The sub-word strings `encode` gives ids of (special tokens included)."""
        return list(self._tok.encode(self._read([text])[0]).tokens)

    def truncated(self, texts: list[str]) -> int:
        """How many of `texts` `encode` cuts: more than `max_chars` characters, or more than
        `max_length` sub-words."""
        read = self._read(texts)
        encodings = self._tok.encode_batch(read)
        return sum(
            len(text) > len(part) or bool(enc.overflowing)
            for text, part, enc in zip(texts, read, encodings, strict=True)
        )

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def unknown_pieces(self, texts: list[str]) -> tuple[list[str], int]:
        """The text behind each unknown sub-word of `texts` (the model's unknown token,
        `[UNK]`), and the number of sub-words, special tokens not counted.

        A tokenizer without an unknown token (byte-level BPE) has no unknown sub-words.
        """
        model = json.loads(self._json).get("model", {})
        unk_id = model.get("unk_id") if model.get("type") == "Unigram" else None
        if unk_id is None and model.get("unk_token") is not None:
            unk_id = self._tok.token_to_id(model["unk_token"])
        unknown: list[str] = []
        total = 0
        texts = self._read(texts)
        for text, enc in zip(texts, self._tok.encode_batch(texts), strict=True):
            for i, special, (start, end) in zip(
                enc.ids, enc.special_tokens_mask, enc.offsets, strict=True
            ):
                if special:
                    continue
                total += 1
                if i == unk_id:
                    unknown.append(text[start:end])
        return unknown, total

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def to_json(self) -> str:
        """The tokenizer.json text, saved with a model directory."""
        return self._json

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "max_length": self.max_length}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SubwordTokenizer)
            and self.max_length == other.max_length
            and self._json == other._json
        )

    def __hash__(self) -> int:
        return hash((self.max_length, self._json))
