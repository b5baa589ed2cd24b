"""Retrieval at scale: build and query a BM25 index of N synthetic passages, and a dense
(faiss) index of N random unit vectors; build time, peak memory, index size, query latency.

Passages are sentences of 8-40 words drawn from a Zipf-distributed vocabulary of 50,000 made-up
words (seeded), so that BM25's posting lists look like a natural corpus's. The dense part stores
random 384-dimensional unit vectors, as MiniLM's vectors would be stored: encoding a million
passages with MiniLM on a CPU is measured apart (`--encode`, passages a second), and the
projection is that rate times N. Reranking: the top 100 of each BM25 query scored by a
matcher (`--rerank`, e.g. minilm-l6 or a saved model) on a sample of the queries.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/retrieval_scale.py --n 1000000 \
        --out /tmp/scale --rerank minilm-l6
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import time
from pathlib import Path

import numpy as np


def _passages(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i:05d}" for i in range(50_000)])
    lengths = rng.integers(8, 41, size=n)
    words = vocab[np.minimum(rng.zipf(1.3, size=int(lengths.sum())), 50_000) - 1]
    out, start = [], 0
    for length in lengths:
        out.append(" ".join(words[start : start + length]))
        start += length
    return out


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _latency(fn, queries: list) -> dict[str, float]:  # type: ignore[no-untyped-def]
    times = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": float(np.percentile(times, 50)), "p99_ms": float(np.percentile(times, 99))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rerank", default=None, help="a matcher for the top 100 (e.g. minilm-l6)")
    parser.add_argument("--rerank-queries", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("/tmp/attnmatch-scale"))
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--skip-bm25", action="store_true")
    parser.add_argument(
        "--encode", type=int, default=0, help="measure MiniLM's encoding rate on this many passages"
    )
    args = parser.parse_args()
    report: dict[str, object] = {"n": args.n}
    rng = np.random.default_rng(1)
    if args.encode:
        _encode_rate(args.encode, report)
        return
    if not args.skip_bm25:
        _bm25(args, report, rng)
    if not args.skip_dense:
        _dense(args, report, rng)


def _bm25(args: argparse.Namespace, report: dict[str, object], rng: np.random.Generator) -> None:
    from attnmatch.retrieval.corpus import Passage
    from attnmatch.retrieval.index import write_index
    from attnmatch.retrieval.search import load_index

    texts = _passages(args.n, 0)
    queries = [" ".join(texts[i].split()[:4]) for i in rng.integers(0, args.n, args.queries)]
    shutil.rmtree(args.out / "bm25", ignore_errors=True)
    start = time.perf_counter()
    write_index(args.out / "bm25", [Passage(str(i), t) for i, t in enumerate(texts)])
    report["bm25_build_s"] = round(time.perf_counter() - start, 1)
    report["bm25_index_mb"] = round(_size(args.out / "bm25") / 1e6, 1)
    print(json.dumps(report), flush=True)
    start = time.perf_counter()
    index = load_index(args.out / "bm25")
    report["bm25_load_s"] = round(time.perf_counter() - start, 1)
    report["bm25_query"] = _latency(lambda q: index.retrieve(q, "bm25", 100), queries)
    report["peak_rss_mb_after_bm25"] = round(_peak_mb())
    print(json.dumps(report), flush=True)
    if args.rerank:
        from attnmatch.matcher import load_matcher

        matcher = load_matcher(args.rerank)
        sample = queries[: args.rerank_queries]
        report["bm25_rerank100_query"] = _latency(
            lambda q: index.search(q, reranker=matcher, first_stage="bm25", depth=100), sample
        )
        print(json.dumps(report), flush=True)


def _encode_rate(count: int, report: dict[str, object]) -> None:
    """MiniLM passages a second on the FAQ's answers (about 45 words each), repeated."""
    from attnmatch.retrieval.dense import TextEncoder

    faq = Path(__file__).parents[1] / "examples" / "own_data" / "faq" / "train.tsv"
    answers = sorted({line.split("\t")[1] for line in faq.read_text().splitlines()[1:]})
    texts = [f"{answers[i % len(answers)]} ({i})" for i in range(count)]
    encoder = TextEncoder("minilm-l6")
    encoder.encode(texts[:8])  # warm up
    start = time.perf_counter()
    encoder.encode(texts)
    seconds = time.perf_counter() - start
    report["minilm_passages_per_s"] = round(count / seconds, 1)
    report["minilm_projected_1m_hours"] = round(1_000_000 / (count / seconds) / 3600, 1)
    print(json.dumps(report), flush=True)


def _dense(args: argparse.Namespace, report: dict[str, object], rng: np.random.Generator) -> None:
    from attnmatch.retrieval import dense

    vectors = rng.standard_normal((args.n, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    start = time.perf_counter()
    ann = dense.build_vector_index(vectors)
    report["dense_build_s"] = round(time.perf_counter() - start, 1)
    report["dense_kind"] = dense.index_kind(ann)
    args.out.mkdir(parents=True, exist_ok=True)
    dense.write_vector_index(ann, args.out / "dense.faiss")
    report["dense_index_mb"] = round((args.out / "dense.faiss").stat().st_size / 1e6, 1)
    qs = list(vectors[rng.integers(0, args.n, args.queries)] + 0.05)
    report["dense_query"] = _latency(lambda q: dense.search_vectors(ann, q, 100), qs)
    report["peak_rss_mb"] = round(_peak_mb())
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
