"""The whole pipeline measured: corpora built from benchmarks, a first stage, a reranker.

A benchmark's corpus (`benchmark_corpus`) is every distinct candidate text of the split, one
passage each; its queries are the split's questions with at least one relevant candidate (the
official WikiQA and TrecQA protocols drop the others), and a question's relevant passages
(qrels) are its candidates labelled relevant. For your own pairs (`pairs:FOLDER:SPLIT`) the
corpus is every right text of every split of the folder (an FAQ's answers), the queries the
split's left texts.

Metrics per query, averaged over queries (`attnmatch.metrics.ranking` computes the ranked ones):
Recall@100 (relevant passages among the first 100 / relevant passages), MRR@10 (reciprocal
rank of the first relevant passage within the first 10, else 0) and nDCG@10 (binary gains; the
ideal ranking counts every relevant passage, retrieved or not).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnmatch.metrics.ranking import ndcg_at_k, reciprocal_rank
from attnmatch.retrieval.corpus import Passage
from attnmatch.retrieval.search import Reranker, SearchIndex

METRICS = ("recall@100", "mrr@10", "ndcg@10")


@dataclass(frozen=True)
class RetrievalBenchmark:
    """A corpus with queries and their relevant passages (qrels)."""

    name: str
    passages: list[Passage]
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def benchmark_corpus(ref: str, data_dir: str | Path | None = None) -> RetrievalBenchmark:
    """The corpus, queries and qrels of "NAME:SPLIT" (module docstring), e.g. "wikiqa:test",
    "trecqa:raw-test" or "pairs:examples/own_data/faq:test"."""
    from attnmatch.data.datasets import load_split, parse_dataset_ref

    name, split = parse_dataset_ref(ref)
    examples = load_split(name, split, data_dir=data_dir).examples
    texts = [e.right for e in examples]
    if name.startswith("pairs"):
        from attnmatch.data.datasets import pairs

        folder = Path(name.split(":", 1)[1]) if ":" in name else Path(data_dir or ".")
        for other in ("train", "dev", "test"):
            if other != split and pairs.split_path(folder, other) is not None:
                texts += [e.right for e in load_split(name, other, data_dir=data_dir).examples]
    ids = {text: f"p{i}" for i, text in enumerate(dict.fromkeys(texts), 1)}
    queries: dict[str, str] = {}
    qrels: dict[str, set[str]] = {}
    for e in examples:
        qid = e.group if e.group is not None else e.left
        queries.setdefault(qid, e.left)
        if e.label > 0:
            qrels.setdefault(qid, set()).add(ids[e.right])
    queries = {q: text for q, text in queries.items() if q in qrels}
    passages = [Passage(pid, text) for text, pid in ids.items()]
    return RetrievalBenchmark(ref, passages, queries, qrels)


def query_metrics(ranked_ids: list[str], relevant: set[str]) -> dict[str, float]:
    """Recall@100, MRR@10 and nDCG@10 of one ranking (best first) for its relevant ids."""
    labels = [1.0 if pid in relevant else 0.0 for pid in ranked_ids]
    missing = len(relevant) - int(sum(labels))
    scores = np.arange(len(labels), 0, -1, dtype=np.float64)  # the given order
    # Relevant passages never retrieved count in the ideal ranking only: ranked after the first
    # 10 (behind non-relevant filler when fewer than 10 were retrieved).
    filler = max(0, 10 - len(labels))
    all_labels = np.array(labels + [0.0] * filler + [1.0] * missing)
    all_scores = np.concatenate([scores, np.full(filler + missing, -np.inf)])
    return {
        "recall@100": float(sum(labels[:100])) / len(relevant),
        "mrr@10": reciprocal_rank(scores[:10], labels[:10]),
        "ndcg@10": ndcg_at_k(all_scores, all_labels, 10),
    }


def evaluate_pipeline(
    index: SearchIndex,
    benchmark: RetrievalBenchmark,
    *,
    first_stage: str,
    reranker: Reranker | None = None,
    depth: int = 100,
) -> dict[str, float]:
    """Mean metrics over the benchmark's queries of a first stage (and a reranker) on `index`
    (built from `benchmark.passages`), plus the number of queries."""
    rows: list[dict[str, float]] = []
    for qid, query in benchmark.queries.items():
        hits = index.search(
            query, reranker=reranker, first_stage=first_stage, top_k=depth, depth=depth
        )
        rows.append(query_metrics([h.id for h in hits], benchmark.qrels[qid]))
    means = {m: float(np.mean([r[m] for r in rows])) for m in METRICS}
    return means | {"num_queries": float(len(rows))}
