"""Retrieve, then rerank: index a corpus (BM25 and dense vectors), search it, rerank the
candidates with any matcher, and measure the pipeline (docs/retrieval.md).

    >>> from attnmatch.retrieval import build_index, load_index   # doctest: +SKIP
    >>> build_index("passages.txt", "idx", dense_source="minilm-l6")   # doctest: +SKIP
    >>> load_index("idx").search("how are glacier caves formed?", top_k=3)   # doctest: +SKIP
"""

from attnmatch.retrieval.corpus import Passage, read_corpus
from attnmatch.retrieval.index import add_to_index, build_index, read_manifest, rebuild_index
from attnmatch.retrieval.search import (
    FIRST_STAGES,
    MAX_QUERY_WORDS,
    Hit,
    SearchIndex,
    check_query,
    load_index,
)

__all__ = [
    "FIRST_STAGES",
    "MAX_QUERY_WORDS",
    "Hit",
    "Passage",
    "SearchIndex",
    "add_to_index",
    "build_index",
    "check_query",
    "load_index",
    "read_corpus",
    "read_manifest",
    "rebuild_index",
]
