"""Lexical matching: scores from the words two texts share, with no training.

Kinds (`LexicalScorer(kind)`), over the project's word tokens (`attnmatch.data.tokenize`,
lower-cased; tokens without a letter or digit, i.e. punctuation, are dropped):

- "bm25": Okapi BM25 of the right text as a document for the left text as a query (the `bm25s`
  library, Lucene's variant, k1 = 1.2, b = 0.75). The index is the collection of the distinct
  right texts being scored plus the background corpus given to `fit`, so IDF and the average
  document length come from a real collection. A word repeated in the query counts each time.
- "overlap": the fraction of the left text's distinct words that occur in the right text
  (0 for a left text without words).
- "idf_overlap": the same fraction weighted by IDF, sum_{w in L & R} idf(w) / sum_{w in L}
  idf(w), with BM25's idf(w) = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5)) over the same
  collection as "bm25" (always > 0, so a word unseen in the collection weighs most).

These are the classic floors of answer selection (Yang et al. 2015's word count baselines; BM25,
Robertson & Zaragoza 2009). `LexicalModel` wraps a scorer and a zero-shot head
(`attnmatch.zero_shot`) as a Matcher's model: a text model (`attnmatch.models.contract`), which
reads the texts themselves, so a Matcher gives it texts (`score_texts(pairs)`), never ids, and
holds no inputs; its model folder holds the head and the background corpus
(`attnmatch.lexical_dir`).

Example:
    >>> scorer = LexicalScorer("overlap")
    >>> scorer.score([("how are caves formed?", "caves are formed by water")]).tolist()
    [0.75]
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal, get_args

import numpy as np
import torch
from numpy.typing import NDArray

from attnmatch.data.schema import PairBatch
from attnmatch.data.tokenize import lexical_words
from attnmatch.models.contract import TextModel
from attnmatch.zero_shot import ScoreHead

LexicalKind = Literal["bm25", "overlap", "idf_overlap"]
LEXICAL_KINDS: tuple[str, ...] = get_args(LexicalKind)
BM25_K1 = 1.2
BM25_B = 0.75


class LexicalScorer:
    """One lexical similarity per (left, right) pair (module docstring).

    Args:
        kind: "bm25", "overlap" or "idf_overlap".
    """

    def __init__(self, kind: str = "bm25") -> None:
        if kind not in LEXICAL_KINDS:
            raise ValueError(
                f"unknown lexical scorer {kind!r}; choose one of {', '.join(LEXICAL_KINDS)}"
            )
        self.kind = kind
        self.background: tuple[str, ...] = ()
        self._background_words: dict[str, list[str]] = {}

    @property
    def similarity_range(self) -> tuple[float, float] | None:
        """The (low, high) values scores lie in: (0, 1) for the overlaps, None for BM25."""
        return None if self.kind == "bm25" else (0.0, 1.0)

    def fit(self, texts: Iterable[str] = ()) -> LexicalScorer:
        """Sets the background corpus that joins every scored collection (e.g. a training
        split's right texts); returns self."""
        self.background = tuple(dict.fromkeys(texts))
        self._background_words = {t: self.words(t) for t in self.background}
        return self

    def words(self, text: str) -> list[str]:
        """The lower-cased word tokens the scorer compares (punctuation dropped)."""
        return lexical_words(text)

    def score(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]:
        """Shape: N pairs -> (N,) float32; higher = more shared words."""
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float32)
        rights = dict.fromkeys(right for _, right in pairs)
        docs = list(dict.fromkeys([*rights, *self.background]))  # scored texts first
        words = dict(self._background_words)
        for text in dict.fromkeys([*rights, *(left for left, _ in pairs)]):
            if text not in words:
                words[text] = self.words(text)
        if self.kind == "bm25":
            return _bm25(pairs, docs, words)
        if self.kind == "overlap":
            return np.fromiter(
                (_overlap(words[a], words[b], None) for a, b in pairs), np.float32, len(pairs)
            )
        idf, unseen = _idf((words[d] for d in docs), len(docs)), _bm25_idf(0, len(docs))
        return np.fromiter(
            (_overlap(words[a], words[b], idf, unseen) for a, b in pairs), np.float32, len(pairs)
        )


def _bm25(
    pairs: Sequence[tuple[str, str]], docs: list[str], words: dict[str, list[str]]
) -> NDArray[np.float32]:
    """BM25 of each pair's right text (a document of `docs`) for its left text."""
    import bm25s

    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    retriever.index([words[d] for d in docs], show_progress=False)
    doc_index = {d: i for i, d in enumerate(docs)}
    by_query: dict[str, list[int]] = {}
    for i, (left, _) in enumerate(pairs):
        by_query.setdefault(left, []).append(i)
    out = np.zeros(len(pairs), dtype=np.float32)
    for query, members in by_query.items():
        ids = retriever.get_tokens_ids(words[query])  # words outside the collection score 0
        if not ids:
            continue
        all_docs = retriever.get_scores_from_ids(ids)  # (num_docs,)
        out[members] = all_docs[[doc_index[pairs[i][1]] for i in members]]
    return out


def _bm25_idf(df: int, num_docs: int) -> float:
    return math.log(1 + (num_docs - df + 0.5) / (df + 0.5))


def _idf(documents: Iterable[list[str]], num_docs: int) -> dict[str, float]:
    """BM25's idf of every word of `documents` (a word outside them has `_bm25_idf(0, N)`)."""
    df = Counter(w for doc in documents for w in set(doc))
    return {w: _bm25_idf(n, num_docs) for w, n in df.items()}


def _overlap(
    left: list[str], right: list[str], idf: dict[str, float] | None, unseen: float = 1.0
) -> float:
    """The (idf-weighted) fraction of the distinct words of `left` that occur in `right`."""
    query = set(left)
    if not query:
        return 0.0
    shared = query & set(right)
    if idf is None:
        return len(shared) / len(query)
    return sum(idf.get(w, unseen) for w in shared) / sum(idf.get(w, unseen) for w in query)


class LexicalModel(TextModel):
    """A Matcher's text model with no weights: a lexical similarity per pair through a
    zero-shot head (`attnmatch.zero_shot.ScoreHead`).

    Shape:
        N (left, right) texts -> (N, head.num_outputs)
    """

    def __init__(self, scorer: LexicalScorer, head: ScoreHead | None = None) -> None:
        super().__init__()
        self.scorer = scorer
        self.head = head or ScoreHead()

    @property
    def num_outputs(self) -> int:
        return self.head.num_outputs

    def score_texts(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]:
        """The head's outputs for (left, right) pairs: (N, num_outputs) float32."""
        return self.head.outputs(self.scorer.score(pairs))

    def fingerprint(self) -> str:
        """The kind, the head and a sha256 of the background corpus."""
        corpus = hashlib.sha256(json.dumps(self.scorer.background).encode("utf-8")).hexdigest()
        head = self.head
        return f"{self.scorer.kind} {head.num_outputs} {head.scale!r} {head.shift!r} {corpus}"

    def save_refusal(self) -> str:
        kind = self.scorer.kind
        return (
            f"a lexical matcher ({kind}) has no weights to save: build it again with "
            f'Matcher.from_lexical("{kind}")'
        )

    def forward(self, batch: PairBatch) -> torch.Tensor:
        raise TypeError(
            f"a lexical model ({self.scorer.kind}) scores texts, not id batches: use "
            "Matcher.score, rank, outputs or evaluate"
        )
