"""`Matcher.rank` with a bi-encoder: the candidate set encoded once, against scoring every
(query, candidate) pair, on the same queries and candidates, interleaved in one process.

Each of `--queries` questions of WikiQA's dev split is ranked against the same `--queries`
candidate answers (46 x 46 by default, the case that took 371 s when every call re-encoded
every candidate). Prints the seconds of each way, their ratio, and the largest score
difference between them (a candidate vector computed in another batch differs in the last
bits only).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/rank_encode_once.py --queries 46
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from attnmatch import Matcher
from attnmatch.data.datasets import load_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=46)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--encoder", default="minilm-l6")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dev = load_split("wikiqa", "dev")
    questions = list(dict.fromkeys(e.left for e in dev.examples))[: args.queries]
    answers = list(dict.fromkeys(e.right for e in dev.examples))[: args.queries]
    matcher = Matcher.from_encoder(args.encoder)
    pairs_way = Matcher.from_encoder(args.encoder)  # its own instance: no shared cache
    start = time.perf_counter()
    by_pairs = [pairs_way.score([(q, a) for a in answers]) for q in questions]
    t_pairs = time.perf_counter() - start
    start = time.perf_counter()
    ranked = [matcher.rank(q, answers) for q in questions]
    t_rank = time.perf_counter() - start
    diff = max(
        float(np.max(np.abs(np.array([r.score for r in sorted(rs, key=lambda r: r.index)]) - s)))
        for rs, s in zip(ranked, by_pairs, strict=True)
    )
    n = len(questions)
    print(f"{n} queries x {len(answers)} candidates, {args.threads} thread(s), {args.encoder}")
    print(f"every pair scored (before): {t_pairs:.1f} s")
    print(f"rank, candidates encoded once: {t_rank:.1f} s")
    print(f"ratio: {t_pairs / t_rank:.1f}x; largest score difference {diff:.2e}")


if __name__ == "__main__":
    main()
