"""MiniLM zero-shot pair scoring on torch: attnmatch's default path against
sentence-transformers', same model files, same pairs, one CPU thread, side by side.

Each round takes a fresh slice of WikiQA test pairs (no text of an earlier round, so no cache
of either library answers), and each side encodes the slice's distinct texts once and scores
the pairs by cosine: attnmatch through `Matcher.from_encoder("minilm-l6").score` (its default
batching), sentence-transformers through `SentenceTransformer(folder).encode` (its default
batch of 32, sorted by length) and a cosine. The sides alternate inside each round; the median
of the rounds is kept and the ratio printed.

    python benchmarks/embed_vs_sentence_transformers.py --pairs 300 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from attnmatch.data.datasets import load_split
from attnmatch.encoders import resolve_source
from attnmatch.matcher import Matcher


def slices(n: int, rounds: int) -> list[list[tuple[str, str]]]:
    """`rounds` lists of `n` WikiQA test (then dev) pairs, no text shared between lists."""
    pool = load_split("wikiqa", "test").examples + load_split("wikiqa", "dev").examples
    seen: set[str] = set()
    out: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    for ex in pool:
        if ex.left in seen or ex.right in seen:  # a text of an earlier round
            continue
        current.append((ex.left, ex.right))
        if len(current) == n:
            seen.update(t for p in current for t in p)
            out.append(current)
            current = []
            if len(out) == rounds:
                return out
    raise SystemExit(f"not enough distinct pairs for {rounds} rounds of {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-token-budget",
        action="store_true",
        help="attnmatch's earlier batching: up to 512 texts a batch, padded to the longest",
    )
    parser.add_argument(
        "--token-budget",
        type=int,
        default=None,
        help="padded tokens per batch of attnmatch (default: its EMBED_TOKENS)",
    )
    args = parser.parse_args()
    import attnmatch.matcher

    if args.no_token_budget:
        attnmatch.matcher.EMBED_TOKENS = 10**9
    elif args.token_budget is not None:
        attnmatch.matcher.EMBED_TOKENS = args.token_budget
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    folder = resolve_source("minilm-l6")
    ours = Matcher.from_encoder("minilm-l6")
    theirs = SentenceTransformer(str(folder), device="cpu")

    def st_score(pairs: list[tuple[str, str]]) -> np.ndarray:
        texts = list(dict.fromkeys(t for p in pairs for t in p))
        vectors = theirs.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        index = {t: i for i, t in enumerate(texts)}
        a = vectors[[index[p[0]] for p in pairs]]
        b = vectors[[index[p[1]] for p in pairs]]
        return (a * b).sum(1)

    ours.score([("warm up", "the model")])
    st_score([("warm up", "the model")])
    for n in args.pairs:
        times: dict[str, list[float]] = {"attnmatch": [], "sentence-transformers": []}
        for pairs in slices(n, args.rounds):
            for name, run in (("attnmatch", ours.score), ("sentence-transformers", st_score)):
                start = time.perf_counter()
                run(pairs)
                times[name].append(time.perf_counter() - start)
        median = {k: statistics.median(v) for k, v in times.items()}
        texts = len({t for p in pairs for t in p})
        print(
            f"{n} pairs ({texts} distinct texts a round), one thread, median of {args.rounds}: "
            f"attnmatch {n / median['attnmatch']:,.0f} pairs/s, sentence-transformers "
            f"{n / median['sentence-transformers']:,.0f} pairs/s: "
            f"{median['sentence-transformers'] / median['attnmatch']:.2f}x "
            f"(token budget {attnmatch.matcher.EMBED_TOKENS})",
            flush=True,
        )


if __name__ == "__main__":
    main()
