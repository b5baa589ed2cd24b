"""Token ids computed once per dataset and kept as integer arrays.

Many pairs share a text (a question has ~10 candidate answers), so each distinct text is
tokenised and encoded once; pairs refer to texts by index. Batches are then built by indexing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnmatch.data.schema import Example
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.trigrams import word_trigram_ids
from attnmatch.data.vocab import Vocab


@dataclass(frozen=True)
class EncodedPairs:
    """A dataset split as integer arrays.

    Attributes:
        texts: id arrays (int64) of the distinct texts.
        left, right: (N,) indices into `texts` for each pair.
        labels: (N,) float32 labels.
        group_ids: (N,) int64 index into `group_names` (pairs without a group get their own).
        group_names: the original group (query) ids, in order of first appearance.
        trigrams: per text, its tokens' letter-trigram ids (n, K) (`data/trigrams.py`), when
            a model asks for them (`encode_examples(..., trigram_buckets=N)`); else None.
    """

    texts: list[np.ndarray]
    left: np.ndarray
    right: np.ndarray
    labels: np.ndarray
    group_ids: np.ndarray
    group_names: list[str]
    trigrams: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return int(self.left.shape[0])

    @property
    def text_lengths(self) -> np.ndarray:
        return np.fromiter((len(t) for t in self.texts), dtype=np.int64, count=len(self.texts))

    def groups(self) -> list[np.ndarray]:
        """Pair indices of each group, in group order."""
        order = np.argsort(self.group_ids, kind="stable")
        bounds = np.flatnonzero(np.diff(self.group_ids[order])) + 1
        return np.split(order, bounds)


def encode_examples(
    examples: Sequence[Example],
    tokenizer: Tokenizer | SubwordTokenizer,
    vocab: Vocab | None,
    *,
    trigram_buckets: int = 0,
) -> EncodedPairs:
    """Tokenises and encodes each distinct text once.

    Args:
        tokenizer, vocab: words -> `vocab` ids (static encoders); or a `SubwordTokenizer`, whose
            own ids are used (transformer encoders; `vocab` is None).
        trigram_buckets: > 0 also computes each text's letter-trigram ids (DSSM's word hashing,
            from the tokens, so words outside `vocab` keep theirs); see `encoding_options`.

    Raises:
        ValueError: if `examples` is empty.
    """
    if not examples:
        raise ValueError("cannot encode an empty list of examples")
    subword = isinstance(tokenizer, SubwordTokenizer)
    if subword and trigram_buckets > 0:
        raise ValueError("letter-trigram inputs (DSSM, CDSSM) need the word tokenizer")
    if not subword and vocab is None:
        raise ValueError("a word tokenizer needs a Vocab")
    text_index: dict[str, int] = {}
    texts: list[np.ndarray] = []
    trigrams: list[np.ndarray] | None = [] if trigram_buckets > 0 else None

    def index_of(text: str) -> int:
        i = text_index.get(text)
        if i is None:
            i = text_index[text] = len(texts)
            if subword:
                texts.append(None)  # type: ignore[arg-type]  # encoded in one batch below
                return i
            tokens = tokenizer.tokenize(text)
            texts.append(np.asarray(vocab.encode(tokens), dtype=np.int64))  # type: ignore[union-attr]
            if trigrams is not None:
                trigrams.append(word_trigram_ids(tokens, trigram_buckets))
        return i

    n = len(examples)
    left = np.empty(n, dtype=np.int64)
    right = np.empty(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.float32)
    group_ids = np.empty(n, dtype=np.int64)
    group_index: dict[str, int] = {}
    group_names: list[str] = []
    for i, ex in enumerate(examples):
        left[i] = index_of(ex.left)
        right[i] = index_of(ex.right)
        labels[i] = float(ex.label)
        name = ex.group if ex.group is not None else f"#{i}"
        g = group_index.get(name)
        if g is None:
            g = group_index[name] = len(group_names)
            group_names.append(name)
        group_ids[i] = g
    if subword:  # the fast tokenizer encodes a list of texts in one call
        texts = tokenizer.encode_batch(list(text_index))  # type: ignore[union-attr]
    return EncodedPairs(texts, left, right, labels, group_ids, group_names, trigrams)
