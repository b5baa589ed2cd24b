"""A deterministic, dependency-free tokenizer, and the bound on the length of a text.

Lower-cases (optionally), splits on whitespace, and separates punctuation from words while
keeping common English clitics ("'s", "n't") and inner hyphens/apostrophes/periods of
numbers and abbreviations together. The same text always gives the same tokens, on every
machine: no locale, no model files.

Length bound: a model's cost grows with its texts' lengths (an interaction model with
left length x right length: two texts of 1 MB would ask for hundreds of GB), so every input
kind keeps at most `inputs.max_length` tokens per text, `DEFAULT_MAX_TOKENS` unless set, and
reads at most `CHARS_PER_TOKEN` characters per kept token before tokenising (a 100 MB text, a
100 MB "word" or a text without spaces costs what 32,768 characters cost). The rest of a longer
text is ignored: it scores exactly as the text cut to its first `max_length` tokens.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

from attnmatch.configs import ConfigError

DEFAULT_MAX_TOKENS = 512
"""Tokens per text for word inputs (word vectors, letter trigrams) when `inputs.max_length` is
unset. Above the longest text of every bundled benchmark (WikiQA train: 300 tokens; TREC QA
train-all: 289), so no reproduced result depends on it."""

MAX_TOKENS_LIMIT = 1_000_000
"""The largest `inputs.max_length` accepted: a bound, not a way to switch bounds off."""

CHARS_PER_TOKEN = 64
"""Characters read per text: `CHARS_PER_TOKEN` x the token bound (32,768 for 512 tokens, ~14x
the ~4.5 characters of an English word and its space; the longest bundled text has 1,547)."""


def check_max_length(value: object, *, minimum: int = 1, name: str = "inputs.max_length") -> int:
    """`value` as a token bound, or a ConfigError naming `name` when it is not an integer in
    `minimum`..`MAX_TOKENS_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer number of tokens per text, got {value!r}")
    if not minimum <= value <= MAX_TOKENS_LIMIT:
        raise ConfigError(
            f"{name} must be between {minimum} and {MAX_TOKENS_LIMIT:,} tokens per text, "
            f"got {value:,}"
        )
    return value


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
        max_length: keep at most this many tokens, reading at most `max_chars` characters
            (None keeps all: the lexical scorers, whose cost is linear).

    Example:
        >>> Tokenizer().tokenize("How are glacier caves formed?")
        ['how', 'are', 'glacier', 'caves', 'formed', '?']
        >>> Tokenizer(max_length=2).tokenize_checked("How are glacier caves formed?")
        (['how', 'are'], True)
    """

    lowercase: bool = True
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.max_length is not None:
            check_max_length(self.max_length, name="max_length")

    @property
    def max_chars(self) -> int | None:
        """Characters read per text (`CHARS_PER_TOKEN` x `max_length`; None: all)."""
        return None if self.max_length is None else self.max_length * CHARS_PER_TOKEN

    def tokenize(self, text: str) -> list[str]:
        return self.tokenize_checked(text)[0]

    def tokenize_checked(self, text: str) -> tuple[list[str], bool]:
        """The tokens of `text`, and whether it was cut (longer than `max_chars` characters
        or `max_length` tokens)."""
        limit = self.max_chars
        cut = limit is not None and len(text) > limit
        if cut:
            text = text[:limit]
        text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.lower()
        if self.max_length is None:
            return _TOKEN_RE.findall(text), cut
        # One token past the bound tells whether the text is longer; no need to scan the rest.
        matches = itertools.islice(_TOKEN_RE.finditer(text), self.max_length + 1)
        tokens = [m.group() for m in matches]
        if len(tokens) > self.max_length:
            return tokens[: self.max_length], True
        return tokens, cut

    def to_dict(self) -> dict[str, object]:
        return {"lowercase": self.lowercase, "max_length": self.max_length}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Tokenizer:
        unknown = set(data) - {"lowercase", "max_length"}
        if unknown:
            raise ValueError(f"unknown tokenizer settings: {sorted(unknown)}")
        return cls(**data)  # type: ignore[arg-type]


_LOWERCASE = Tokenizer(lowercase=True)


def lexical_words(text: str) -> list[str]:
    """The lower-cased word tokens lexical scoring compares (`attnmatch.lexical`, BM25
    retrieval): the tokenizer's tokens without punctuation (its only tokens without a letter or
    digit are single symbols)."""
    return [t for t in _LOWERCASE.tokenize(text) if len(t) > 1 or t.isalnum()]
