"""Retrieve, then rerank: a first stage over an index, a matcher over its candidates.

First stages (`SearchIndex.retrieve`):

- "bm25": the passages sharing a word with the query, by BM25 (ties: the earlier passage);
- "dense": the nearest passage vectors to the query's (cosine, `attnmatch.retrieval.dense`);
- "hybrid": both lists fused by reciprocal rank fusion (`attnmatch.retrieval.fusion`).

Each returns at most `depth` candidates; a reranker (any Matcher: `search(..., reranker=)`) scores each
candidate with the query and the best `top_k` are kept (ties keep the first stage's order).

Bounds: a query of more than `MAX_QUERY_WORDS` words or `MAX_QUERY_CHARS` characters is refused
(one line naming the bound), and `depth` is at most `MAX_DEPTH`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import numpy as np

from attnmatch.data.tokenize import CHARS_PER_TOKEN, DEFAULT_MAX_TOKENS, lexical_words
from attnmatch.retrieval import dense
from attnmatch.retrieval import index as index_files
from attnmatch.retrieval.fusion import reciprocal_rank_fusion


class Reranker(Protocol):
    """What reranks: a Matcher, or anything scoring (query, passage) pairs alike."""

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


FirstStage = Literal["bm25", "dense", "hybrid"]
FIRST_STAGES: tuple[str, ...] = get_args(FirstStage)
MAX_QUERY_WORDS = DEFAULT_MAX_TOKENS
MAX_QUERY_CHARS = CHARS_PER_TOKEN * DEFAULT_MAX_TOKENS
MAX_DEPTH = 10_000
DEFAULT_DEPTH = 100
DEFAULT_TOP_K = 10


@dataclass(frozen=True)
class Hit:
    """One search result: the passage's id and text, its score (the reranker's, or the first
    stage's without one) and its rank in the first stage (from 1)."""

    id: str
    text: str
    score: float
    first_stage_rank: int


def check_query(query: object) -> str:
    """`query` if it is a non-empty string within the bounds; else a ValueError saying why."""
    if not isinstance(query, str):
        raise ValueError(f"the query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise ValueError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(
            f"the query is {len(query):,} characters long, above the bound of "
            f"{MAX_QUERY_CHARS:,} characters ({MAX_QUERY_WORDS} words)"
        )
    words = len(query.split())
    if words > MAX_QUERY_WORDS:
        raise ValueError(
            f"the query is {words:,} words long, above the bound of {MAX_QUERY_WORDS} words"
        )
    return query


def check_depths(depth: int, top_k: int) -> None:
    """Refuses a `depth` outside 1..MAX_DEPTH and a `top_k` below 1."""
    for name, value, high in (("depth", depth, MAX_DEPTH), ("top_k", top_k, None)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if high is not None and value > high:
            raise ValueError(f"{name} must be at most {high:,}, got {value:,}")


class SearchIndex:
    """An index loaded for searching (`attnmatch.retrieval.index` describes the folder).

    The dense encoder is loaded with the index when it has dense vectors (`load_encoder=False`
    defers it to the first dense search).

    Every file of the folder is checked against index.json as it is loaded (the passages' count
    and sha256, the BM25 files, the vectors' count and dimension, every file's size): a folder
    changed after indexing, or a damaged file, is one ValueError line naming the file (a
    missing one, a FileNotFoundError).
    """

    def __init__(self, path: str | Path, *, load_encoder: bool = True) -> None:
        self.info = index_files.read_manifest(path)
        passages = index_files.read_passages(self.info)
        self.ids = [p.id for p in passages]
        self.texts = [p.text for p in passages]
        self._bm25 = index_files.read_bm25(self.info)
        self._vectors: Any = None
        self._encoder: dense.TextEncoder | None = None
        if self.info.dense_source is not None:
            self._vectors = index_files.read_vectors(self.info)
        index_files.check_sizes(self.info)
        if self._vectors is not None and load_encoder:
            self._encoder = self._load_encoder()

    def _load_encoder(self) -> dense.TextEncoder:
        encoder = dense.TextEncoder(str(self.info.dense_source))
        index_files.check_encoder(self.info, encoder)
        return encoder

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def has_dense(self) -> bool:
        return self._vectors is not None

    @property
    def default_first_stage(self) -> str:
        """ "hybrid" for an index with dense vectors, else "bm25"."""
        return "hybrid" if self.has_dense else "bm25"

    def bm25(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(row, score) of the `depth` best passages sharing a word with the query."""
        scores = index_files.bm25_scores(self._bm25, lexical_words(query))
        matched = np.flatnonzero(scores > 0)
        if len(matched) > depth:
            matched = matched[np.argpartition(-scores[matched], depth - 1)[:depth]]
        order = matched[np.lexsort((matched, -scores[matched]))]  # best first, then by row
        return [(int(r), float(scores[r])) for r in order]

    def dense(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(row, cosine) of the `depth` nearest passages."""
        if self._vectors is None:
            raise ValueError(
                f"{self.info.path}: the index has no dense vectors; build it with --dense "
                "minilm-l6, or search it with --first-stage bm25"
            )
        if self._encoder is None:
            self._encoder = self._load_encoder()
        vector = self._encoder.encode([query])[0]  # (E,)
        rows, scores = dense.search_vectors(self._vectors, vector, depth)
        return [(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]

    def retrieve(
        self, query: str, first_stage: str | None = None, depth: int = DEFAULT_DEPTH
    ) -> list[tuple[int, float]]:
        """The first stage's (row, score) candidates, best first (module docstring)."""
        check_query(query)
        check_depths(depth, 1)
        stage = first_stage or self.default_first_stage
        if stage == "bm25":
            return self.bm25(query, depth)
        if stage == "dense":
            return self.dense(query, depth)
        if stage == "hybrid":
            runs = [
                [r for r, _ in self.bm25(query, depth)],
                [r for r, _ in self.dense(query, depth)],
            ]
            return reciprocal_rank_fusion(runs)[:depth]
        raise ValueError(f"unknown first stage {stage!r}; choose one of {', '.join(FIRST_STAGES)}")

    def search(
        self,
        query: str,
        *,
        reranker: Reranker | None = None,
        first_stage: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        depth: int = DEFAULT_DEPTH,
    ) -> list[Hit]:
        """The best `top_k` passages for `query`: the first stage's `depth` candidates,
        reranked by `reranker` when given."""
        check_depths(depth, top_k)
        candidates = self.retrieve(query, first_stage, depth)
        if reranker is None or not candidates:
            chosen = [(rank, row, score) for rank, (row, score) in enumerate(candidates, 1)]
            return [Hit(self.ids[r], self.texts[r], s, k) for k, r, s in chosen[:top_k]]
        scores = reranker.score([(query, self.texts[r]) for r, _ in candidates])
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [
            Hit(
                self.ids[candidates[i][0]],
                self.texts[candidates[i][0]],
                float(scores[i]),
                int(i) + 1,
            )
            for i in order
        ]


def load_index(path: str | Path, *, load_encoder: bool = True) -> SearchIndex:
    """An index folder loaded for searching (`SearchIndex`)."""
    return SearchIndex(path, load_encoder=load_encoder)


def rows_of(hits: Sequence[tuple[int, float]]) -> list[int]:
    return [row for row, _ in hits]
