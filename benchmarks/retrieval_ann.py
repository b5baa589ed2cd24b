"""Which vector library holds the dense index: faiss, usearch and hnswlib side by side.

Clustered random unit vectors (384 dimensions, MiniLM's size) stand in for passage vectors;
queries are noisy copies of held-out points. For each library and index kind: build time, query
latency (one query at a time, p50/p99) and recall@10 against the exact inner-product top 10.
Every index runs in one process, one after another, on one thread, so the ratios are side by
side on the same (possibly shared) machine.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/retrieval_ann.py --n 100000 --queries 200
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def _data(n: int, queries: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 100, 1), dim)).astype(np.float32)
    points = centres[rng.integers(0, len(centres), n + queries)]
    points += 0.6 * rng.standard_normal(points.shape).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points[:n], points[n:]


def _measure(
    name: str,
    build: Callable[[], Callable[[np.ndarray], np.ndarray]],
    qs: np.ndarray,
    truth: np.ndarray,
) -> None:
    start = time.perf_counter()
    search = build()
    built = time.perf_counter() - start
    times, hits = [], 0
    for i, q in enumerate(qs):
        t = time.perf_counter()
        ids = search(q)
        times.append(time.perf_counter() - t)
        hits += len(set(ids.tolist()) & set(truth[i].tolist()))
    ms = np.array(times) * 1000
    print(
        f"{name:28s} build {built:7.1f} s  query p50 {np.percentile(ms, 50):7.2f} ms  "
        f"p99 {np.percentile(ms, 99):7.2f} ms  recall@10 {hits / truth.size:.4f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import faiss
    import hnswlib
    from usearch.index import Index

    faiss.omp_set_num_threads(1)
    xb, xq = _data(args.n, args.queries, args.dim, args.seed)
    truth = np.argsort(-(xq @ xb.T), axis=1)[:, :10]
    print(f"n={args.n} dim={args.dim} queries={args.queries} (one thread)", flush=True)

    def faiss_flat() -> Callable[[np.ndarray], np.ndarray]:
        index = faiss.IndexFlatIP(args.dim)
        index.add(xb)
        return lambda q: index.search(q[None], 10)[1][0]

    def faiss_ivf() -> Callable[[np.ndarray], np.ndarray]:
        nlist = max(int(4 * np.sqrt(args.n)), 1)
        quantizer = faiss.IndexFlatIP(args.dim)
        index = faiss.IndexIVFFlat(quantizer, args.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(xb[np.random.default_rng(1).permutation(args.n)[: 40 * nlist]])
        index.add(xb)
        index.nprobe = 16
        return lambda q: index.search(q[None], 10)[1][0]

    def faiss_hnsw() -> Callable[[np.ndarray], np.ndarray]:
        index = faiss.IndexHNSWFlat(args.dim, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        index.add(xb)
        index.hnsw.efSearch = 128
        return lambda q: index.search(q[None], 10)[1][0]

    def usearch_hnsw() -> Callable[[np.ndarray], np.ndarray]:
        index = Index(
            ndim=args.dim,
            metric="ip",
            dtype="f32",
            connectivity=32,
            expansion_add=80,
            expansion_search=128,
        )
        index.add(np.arange(args.n), xb, threads=1)
        return lambda q: index.search(q, 10, threads=1).keys

    def hnswlib_hnsw() -> Callable[[np.ndarray], np.ndarray]:
        index = hnswlib.Index(space="ip", dim=args.dim)
        index.init_index(max_elements=args.n, M=32, ef_construction=80)
        index.set_num_threads(1)
        index.add_items(xb, np.arange(args.n))
        index.set_ef(128)
        return lambda q: index.knn_query(q, k=10)[0][0]

    _measure("faiss IndexFlatIP (exact)", faiss_flat, xq, truth)
    _measure("faiss IndexIVFFlat nprobe16", faiss_ivf, xq, truth)
    _measure("usearch HNSW M32", usearch_hnsw, xq, truth)
    _measure("hnswlib HNSW M32", hnswlib_hnsw, xq, truth)
    _measure("faiss IndexHNSWFlat M32", faiss_hnsw, xq, truth)


if __name__ == "__main__":
    main()
