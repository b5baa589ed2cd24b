"""Vocabulary: token <-> id, saved as JSON.

Id 0 is padding and id 1 is the unknown token, always; the rest follow in a deterministic order
(frequency descending, then the token itself), so building twice gives the same ids.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from attnmatch.atomic import write_text_atomic
from attnmatch.data.textfile import check_file

PAD = "<pad>"
UNK = "<unk>"
PAD_ID = 0
UNK_ID = 1


class Vocab:
    """An immutable token <-> id mapping.

    Args:
        tokens: every token in id order; must start with `<pad>`, `<unk>` and hold no duplicates.
    """

    def __init__(self, tokens: Sequence[str]) -> None:
        tokens = list(tokens)
        if tokens[:2] != [PAD, UNK]:
            raise ValueError(f"a Vocab must start with {PAD!r}, {UNK!r}; got {tokens[:2]}")
        index = {tok: i for i, tok in enumerate(tokens)}
        if len(index) != len(tokens):
            dup = [t for t, c in Counter(tokens).items() if c > 1][:5]
            raise ValueError(f"duplicate tokens in vocabulary: {dup}")
        self._tokens = tokens
        self._index = index

    @classmethod
    def build(
        cls,
        texts: Iterable[Sequence[str]],
        *,
        min_freq: int = 1,
        max_size: int | None = None,
    ) -> Vocab:
        """Builds a vocabulary from tokenised texts.

        Args:
            texts: token lists.
            min_freq: drop tokens seen fewer times.
            max_size: keep at most this many tokens besides `<pad>` and `<unk>`.
        """
        counts: Counter[str] = Counter()
        for toks in texts:
            counts.update(toks)
        counts.pop(PAD, None)
        counts.pop(UNK, None)
        ordered = sorted(
            (t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t)
        )
        if max_size is not None:
            ordered = ordered[:max_size]
        return cls([PAD, UNK, *ordered])

    def extend(self, tokens: Iterable[str], *, sort: bool = True) -> Vocab:
        """Returns a new Vocab with `tokens` not yet present appended: in sorted order, or with
        `sort=False` in the given order (first occurrence). The ids of the tokens already
        present do not change."""
        new = dict.fromkeys(t for t in tokens if t not in self._index)
        return Vocab(self._tokens + (sorted(new) if sort else list(new)))

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._tokens == other._tokens

    def __hash__(self) -> int:
        return hash(tuple(self._tokens))

    @property
    def tokens(self) -> list[str]:
        return list(self._tokens)

    def id(self, token: str) -> int:
        return self._index.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        get = self._index.get
        return [get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self._tokens[i] for i in ids]

    def to_json(self) -> str:
        return json.dumps(
            {"format": "attnmatch.vocab/1", "tokens": self._tokens}, ensure_ascii=False
        )

    @classmethod
    def from_json(cls, text: str, *, source: str = "<string>") -> Vocab:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON (line {e.lineno}): {e.msg}") from e
        if not isinstance(data, dict) or data.get("format") != "attnmatch.vocab/1":
            raise ValueError(
                f"{source}: not an attnmatch vocabulary (expected format attnmatch.vocab/1)"
            )
        tokens = data.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"{source}: field 'tokens' must be a list of strings")
        try:
            return cls(tokens)
        except ValueError as e:
            raise ValueError(f"{source}: field 'tokens': {e}") from None

    def save(self, path: str | Path) -> None:
        write_text_atomic(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Reads a vocabulary saved by `save`.

        Raises:
            FileNotFoundError, IsADirectoryError: no such file.
            ValueError: not UTF-8, not JSON, or not a vocabulary; the message names `path`.
        """
        path = Path(path)
        check_file(path, "vocabulary file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); save it again"
            ) from None
        return cls.from_json(text, source=str(path))
