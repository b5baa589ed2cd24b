"""results/retrieval.md: retrieve, then rerank, measured on corpora built from benchmarks.

    python -m attnmatch.research.retrieval_table --reranker minilm-l6=minilm-l6 \
        --reranker mpcnn_attention=runs/mpcnn_attention/model     # measures, writes both files
    python -m attnmatch.research.retrieval_table --render          # the .md from the .json

For each corpus (`attnmatch.retrieval.evaluate.benchmark_corpus`) one index is built (BM25 and
MiniLM vectors), and every first stage (BM25, dense, hybrid) is measured alone and with each
reranker over its top 100. results/retrieval.json holds the numbers; the .md is rendered from it
alone, and a test keeps the two in step.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnmatch.atomic import write_text_atomic

RESULTS = Path(__file__).resolve().parents[3] / "results"
GENERATOR = "python -m attnmatch.research.retrieval_table"
CORPORA = ("pairs:examples/own_data/faq:test", "wikiqa:test", "trecqa:raw-test")
STAGES = ("bm25", "dense", "hybrid")
PROTOCOL = (
    "Each corpus is every distinct candidate sentence of the split (WikiQA test; TrecQA raw test; "
    "for the own-data FAQ, every answer of its train, dev and test files), one passage each; the "
    "queries are the split's questions with at least one relevant candidate, and their relevant "
    "passages (qrels) are the candidates labelled relevant. BM25: bm25s, Lucene variant, k1 1.2, "
    "b 0.75, the lexical matcher's word tokens. Dense: mean-pooled all-MiniLM-L6-v2 vectors, "
    "exact cosine (faiss IndexFlatIP). Hybrid: reciprocal rank fusion (k 60) of the two top-100 "
    "lists. A reranker scores the first stage's top 100 (depth 100) with the query (`minilm-l6` from the index's stored vectors: the same cosine as the zero-shot matcher, without encoding the candidates again). Recall@100 is "
    "the first stage's (reranking the top 100 leaves it as it was); MRR@10 and nDCG@10 (binary "
    "gains, the ideal counting unretrieved relevant passages) of the final order. Test splits, "
    "evaluated once; no selection was made on them."
)

# What each reranker name of the table is (the JSON records these words, not the local paths).
RERANKERS = {
    "minilm-l6": "all-MiniLM-L6-v2 zero-shot (cosine of mean-pooled vectors; `attnmatch rank "
    "minilm-l6`), the project's default encoder, untrained",
    "mpcnn_attention": "the seed model attention MP-CNN on GloVe 6B 50d (its default preset), "
    "trained on WikiQA train for 1 epoch and selected on WikiQA dev (dev MAP 0.699), used as is "
    "on every corpus",
}


class IndexCosine:
    """The zero-shot MiniLM matcher's score of (query, passage) pairs, read from the index: the
    cosine of the query's vector and the passage's stored vector, which are the vectors
    `Matcher.from_encoder("minilm-l6")` compares (`attnmatch.retrieval.dense`), so its
    reranking costs no second encoding of the candidates."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.rows = {text: row for row, text in enumerate(index.texts)}
        self.queries: dict[str, Any] = {}

    def score(self, pairs: Sequence[tuple[str, str]]) -> Any:
        import numpy as np

        query = pairs[0][0]
        if query not in self.queries:
            self.queries[query] = self.index._encoder.encode([query])[0]  # (E,)
        rows = [self.rows[text] for _, text in pairs]
        vectors = np.stack([self.index._vectors.reconstruct(r) for r in rows])  # (N, E)
        return vectors @ self.queries[query]  # (N,)


def measure(
    corpora: list[str],
    rerankers: dict[str, str],
    data_dir: str | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """Every (corpus, first stage, reranker) row, measured (and written to `out` after each
    corpus)."""
    from attnmatch.matcher import load_matcher
    from attnmatch.retrieval.evaluate import benchmark_corpus, evaluate_pipeline
    from attnmatch.retrieval.index import write_index
    from attnmatch.retrieval.search import load_index

    loaded: dict[str, Any] = {
        name: None if spec == "minilm-l6" else load_matcher(spec)
        for name, spec in rerankers.items()
    }
    rows: list[dict[str, Any]] = []
    for ref in corpora:
        bench = benchmark_corpus(ref, data_dir)
        with tempfile.TemporaryDirectory() as tmp:
            write_index(Path(tmp) / "index", bench.passages, dense_source="minilm-l6")
            index = load_index(Path(tmp) / "index")
            cosine = IndexCosine(index)
            for stage in STAGES:
                for name in (None, *loaded):
                    start = time.perf_counter()
                    reranker = None if name is None else loaded[name] or cosine
                    metrics = evaluate_pipeline(index, bench, first_stage=stage, reranker=reranker)
                    rows.append(
                        {
                            "corpus": ref,
                            "passages": len(bench.passages),
                            "first_stage": stage,
                            "reranker": name,
                            "metrics": metrics,
                            "seconds": round(time.perf_counter() - start, 1),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
        if out is not None:  # each corpus lands as soon as it is measured
            write_text_atomic(out, json.dumps(_data(rows, rerankers), indent=2) + "\n")
    return _data(rows, rerankers)


def _data(rows: list[dict[str, Any]], rerankers: dict[str, str]) -> dict[str, Any]:
    notes = {name: RERANKERS.get(name, name) for name in rerankers}
    return {"protocol": PROTOCOL, "rerankers": notes, "rows": rows}


def render(data: dict[str, Any]) -> str:
    """The markdown of results/retrieval.json."""
    lines = [
        "# Retrieve, then rerank: first stages and rerankers over benchmark corpora",
        "",
        f"*Generated by `{GENERATOR} --render` from `results/retrieval.json`; do not edit.*",
        "",
        f"**Protocol.** {data['protocol']}",
        "",
        "Rerankers: " + "; ".join(f"`{n}`: {s}" for n, s in data["rerankers"].items()) + ".",
    ]
    for corpus in dict.fromkeys(r["corpus"] for r in data["rows"]):
        rows = [r for r in data["rows"] if r["corpus"] == corpus]
        queries = int(rows[0]["metrics"]["num_queries"])
        lines += ["", f"## {corpus} ({rows[0]['passages']:,} passages, {queries} queries)", ""]
        lines += [
            "| first stage | reranker | Recall@100 | MRR@10 | nDCG@10 |",
            "|---|---|---|---|---|",
        ]
        wanted = [(st, rr) for st in STAGES for rr in (None, *data["rerankers"])]
        have = {(r["first_stage"], r["reranker"]) for r in rows}
        absent = [f"{st} + {rr or 'none'}" for st, rr in wanted if (st, rr) not in have]
        best = max(r["metrics"]["ndcg@10"] for r in rows)
        for r in rows:
            m = r["metrics"]
            ndcg = f"{m['ndcg@10']:.4f}"
            ndcg = f"**{ndcg}**" if m["ndcg@10"] == best else ndcg
            lines.append(
                f"| {r['first_stage']} | {r['reranker'] or '—'} | {m['recall@100']:.4f} | "
                f"{m['mrr@10']:.4f} | {ndcg} |"
            )
        if absent:
            lines += [
                "",
                "Not measured yet (the run did not finish in the time available): "
                + ", ".join(absent)
                + ".",
            ]
    missing = [c for c in CORPORA if c not in {r["corpus"] for r in data["rows"]}]
    if missing:
        lines += [
            "",
            "Not measured yet: " + ", ".join(f"`{c}`" for c in missing) + f" (`{GENERATOR} "
            "--reranker minilm-l6=minilm-l6 --reranker mpcnn_attention=MODEL` measures them).",
        ]
    return "\n".join(lines) + "\n"


def _rows_of_other_corpora(path: Path, corpora: list[str]) -> list[dict[str, Any]]:
    """The rows of `path` (results/retrieval.json) measured on corpora other than `corpora`."""
    if not path.exists():
        return []
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return [r for r in rows if r["corpus"] not in corpora]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reranker", action="append", default=[], help="NAME=SPEC")
    parser.add_argument("--corpus", action="append", default=None, help="NAME:SPLIT")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true", help="only render the .md")
    args = parser.parse_args(argv)
    json_path = args.results / "retrieval.json"
    if not args.render:
        rerankers = dict(item.split("=", 1) for item in args.reranker)
        corpora = args.corpus or list(CORPORA)
        measured = measure(corpora, rerankers, out=None)
        kept = _rows_of_other_corpora(json_path, corpora)  # a corpus not measured now stays
        data = {**measured, "rows": kept + measured["rows"]}
        write_text_atomic(json_path, json.dumps(data, indent=2) + "\n")
    data = json.loads(json_path.read_text(encoding="utf-8"))
    write_text_atomic(args.results / "retrieval.md", render(data))


if __name__ == "__main__":
    main()
