"""results/retrieval.md is rendered from results/retrieval.json and up to date; every row has
its metrics in range."""

from __future__ import annotations

import json
from pathlib import Path

from attnmatch.research.retrieval_table import GENERATOR, render
from attnmatch.retrieval.evaluate import METRICS

RESULTS = Path(__file__).parents[2] / "results"


def test_committed_table_is_up_to_date() -> None:
    data = json.loads((RESULTS / "retrieval.json").read_text(encoding="utf-8"))
    committed = (RESULTS / "retrieval.md").read_text(encoding="utf-8")
    assert committed == render(data), f"results/retrieval.md is stale: run `{GENERATOR} --render`"


def test_every_row_is_measured() -> None:
    data = json.loads((RESULTS / "retrieval.json").read_text(encoding="utf-8"))
    assert data["rows"]
    for row in data["rows"]:
        assert row["first_stage"] in ("bm25", "dense", "hybrid")
        assert row["reranker"] is None or row["reranker"] in data["rerankers"]
        assert all(0 <= row["metrics"][m] <= 1 for m in METRICS), row
        assert row["metrics"]["num_queries"] > 0
    # Reranking the top 100 keeps the first stage's candidates: its Recall@100.
    by_key = {(r["corpus"], r["first_stage"], r["reranker"]): r for r in data["rows"]}
    for (corpus, stage, reranker), row in by_key.items():
        alone = by_key[(corpus, stage, None)]
        assert row["metrics"]["recall@100"] == alone["metrics"]["recall@100"], (corpus, reranker)
