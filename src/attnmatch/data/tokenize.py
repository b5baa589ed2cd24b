"""A deterministic, dependency-free tokenizer.

Lower-cases (optionally), splits on whitespace, and separates punctuation from words while
keeping common English clitics ("'s", "n't") and inner hyphens/apostrophes/periods of
numbers and abbreviations together. The same text always gives the same tokens, on every
machine: no locale, no model files.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Order matters: numbers (3.14, 1,000), words with inner hyphens/apostrophes, clitics, then any
# other non-space character on its own.
_TOKEN_RE = re.compile(
    r"""
    \d+(?:[.,]\d+)*              # numbers: 12  3.5  1,000
    | n't                        # clitic: do|n't
    | '(?:s|re|ve|ll|d|m)\b      # clitics: 's 're 've 'll 'd 'm
    | \w+?(?=n't\b)              # the "do" of "don't"
    | \w+(?:[-]\w+)*             # words, hyphenated compounds
    | \S                         # any other symbol alone
    """,
    re.VERBOSE | re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class Tokenizer:
    """Splits text into tokens.

    Args:
        lowercase: lower-case the text first (GloVe 6B is lower-cased).
        max_length: keep at most this many tokens (None keeps all).

    Example:
        >>> Tokenizer().tokenize("How are glacier caves formed?")
        ['how', 'are', 'glacier', 'caves', 'formed', '?']
    """

    lowercase: bool = True
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 or None, got {self.max_length}")

    def tokenize(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.lower()
        tokens = _TOKEN_RE.findall(text)
        if self.max_length is not None:
            tokens = tokens[: self.max_length]
        return tokens

    def to_dict(self) -> dict[str, object]:
        return {"lowercase": self.lowercase, "max_length": self.max_length}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Tokenizer:
        unknown = set(data) - {"lowercase", "max_length"}
        if unknown:
            raise ValueError(f"unknown tokenizer settings: {sorted(unknown)}")
        return cls(**data)  # type: ignore[arg-type]
