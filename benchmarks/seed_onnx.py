"""The five headline seed models on ONNX Runtime against torch: fp32's largest output difference
over whole test splits, and pairs/s of each backend side by side on one thread.

Models: aMV-LSTM (Q), HCRN, DAMM, attention MP-CNN and IARNN-GATE, their default presets on
GloVe 6B 50d ("glove-6b-50d", the vocabulary fitted to WikiQA's training texts), randomly
initialised (seed 0) as ranking models: a ranking model scores any pairs, so each scores the
whole test splits of WikiQA, STS Benchmark and MSRP. Each is exported in float32
(`export_onnx`, which checks its own probe pairs) and loaded with `Matcher.load` (auto: ONNX
Runtime).

(a) The largest |ONNX - torch| over every pair of each split (`Matcher.outputs`, batches of
512); it must stay within 1e-5 (`attnmatch.export.EXACT_ATOL`).
(b) pairs/s of `Matcher.score` on torch's default path (the whole-input fast path of
`models/fast/`) and on ONNX Runtime, on one thread (torch.set_num_threads(1), the sessions'
intra-op threads 1), text included: each round takes `--pairs` pairs that no matcher has scored
before (neither backend keeps a cache between calls): the training splits of WikiQA, STS
Benchmark and MSRP and WikiQA's dev split, shuffled together; with `--grouped`, WikiQA's training
and dev splits in their order, each question beside its candidates, as a reranker is fed (torch's
whole-input paths encode each distinct text of a window once, the pairs graph every pair's own).
The two backends score the same pairs in turn, the order alternating by round; the median round
is printed.
(c) With `--pair-batches 512,32,...`: ONNX Runtime's pairs/s when the pairs graph runs batches of
at most that many pairs (`attnmatch.runtime.graphs.PAIR_BATCH`, 32 by default; the matcher's
batch size is 512), the caps in turn on one more set of unseen pairs, best of 2.

Run: nice -n 5 python benchmarks/seed_onnx.py [--models amvlstm_q,hcrn] [--pairs 1000]
[--rounds 3] [--grouped] [--pair-batches 512,32] [--output results/seed_onnx.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch.atomic import write_text_atomic
from attnmatch.data.datasets import load_split
from attnmatch.export import EXACT_ATOL, export_onnx
from attnmatch.matcher import Matcher
from attnmatch.runtime import graphs as runtime
from attnmatch.tasks import RankingTask

MODELS = ("amvlstm_q", "hcrn", "damm", "mpcnn_attention", "iarnn_gate")
SPLITS = ("wikiqa", "sts-benchmark", "msrp")
FIT_TEXTS = 4000  # WikiQA training texts the vocabulary is fitted to
# The timing rounds' pairs: splits other than the test splits of (a).
POOL = (("wikiqa", "train"), ("wikiqa", "dev"), ("sts-benchmark", "train"), ("msrp", "train"))


def build(name: str, fit_texts: list[str], folder: Path) -> tuple[Matcher, Matcher, float]:
    """The torch matcher of `name`, its float32 export loaded back, and the export's seconds."""
    matcher = Matcher.untrained(
        name, inputs="glove-6b-50d", task=RankingTask(), train_texts=fit_texts, seed=0
    )
    start = time.perf_counter()
    path = export_onnx(matcher, folder / name)
    seconds = time.perf_counter() - start
    return matcher, Matcher.load(path), seconds


def largest_difference(torch_matcher: Matcher, onnx_matcher: Matcher) -> dict[str, float]:
    """The largest |ONNX - torch| output over each whole test split."""
    out = {}
    for split in SPLITS:
        pairs = [(e.left, e.right) for e in load_split(split, "test").examples]
        got, want = onnx_matcher.outputs(pairs), torch_matcher.outputs(pairs)
        out[split] = float(np.abs(got - want).max())
    return out


def rates(
    torch_matcher: Matcher,
    onnx_matcher: Matcher,
    pool: list[tuple[str, str]],
    size: int,
    rounds: int,
) -> dict[str, float]:
    """Median pairs/s of `score` per backend, each round on `size` pairs unseen before."""
    times: dict[str, list[float]] = {"torch": [], "onnx": []}
    backends = [("torch", torch_matcher), ("onnx", onnx_matcher)]
    for r in range(rounds):
        pairs = pool[:size]
        del pool[:size]  # never scored again
        for key, matcher in backends if r % 2 == 0 else backends[::-1]:
            start = time.perf_counter()
            matcher.score(pairs)
            times[key].append(size / (time.perf_counter() - start))
    return {key: statistics.median(values) for key, values in times.items()}


def pair_batch_rates(
    onnx_matcher: Matcher, pool: list[tuple[str, str]], size: int, caps: list[int]
) -> dict[int, float]:
    """ONNX Runtime's pairs/s of `score` per cap on the pairs graph's batch (best of 2)."""
    pairs = pool[:size]
    del pool[:size]
    out: dict[int, float] = {}
    kept = runtime.PAIR_BATCH
    try:
        for cap in caps * 2:
            runtime.PAIR_BATCH = cap
            start = time.perf_counter()
            onnx_matcher.score(pairs)
            out[cap] = max(out.get(cap, 0.0), size / (time.perf_counter() - start))
    finally:
        runtime.PAIR_BATCH = kept
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pairs", type=int, default=1000, help="Pairs per timing round.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--grouped", action="store_true", help="WikiQA pairs in order (docstring).")
    ap.add_argument("--pair-batches", default="", help="e.g. 512,32: (c) in the docstring.")
    ap.add_argument("--output", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)  # the exported sessions take torch's thread count when loaded
    train = load_split("wikiqa", "train").examples
    fit_texts = list(dict.fromkeys(t for e in train for t in (e.left, e.right)))[:FIT_TEXTS]
    refs = POOL[:2] if args.grouped else POOL
    unseen = [(e.left, e.right) for ref in refs for e in load_split(*ref).examples]
    order = (
        np.arange(len(unseen))
        if args.grouped
        else np.random.default_rng(0).permutation(len(unseen))
    )
    pool = [unseen[i] for i in order]
    caps = [int(c) for c in args.pair_batches.split(",") if c]
    needed = len(args.models.split(",")) * (args.rounds + bool(caps)) * args.pairs
    if needed > len(pool):
        raise SystemExit(f"--pairs x --rounds x models needs {needed:,} pairs; {len(pool):,} exist")
    rows: list[dict[str, Any]] = []
    print(f"load: {os.getloadavg()[0]:.1f}; one thread; pairs/s over {args.pairs} unseen pairs")
    header = "| model | export s | max abs diff " + " / ".join(SPLITS) + " | torch pairs/s "
    print(header + "| ONNX pairs/s | ONNX / torch |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            torch_matcher, onnx_matcher, seconds = build(name, fit_texts, Path(tmp))
            worst = largest_difference(torch_matcher, onnx_matcher)
            speed = rates(torch_matcher, onnx_matcher, pool, args.pairs, args.rounds)
            row = {"model": name, "export_s": seconds, "max_abs_diff": worst, **speed}
            if caps:
                row["onnx_by_pair_batch"] = pair_batch_rates(onnx_matcher, pool, args.pairs, caps)
            rows.append(row)
            diffs = " / ".join(f"{worst[s]:.1e}" for s in SPLITS)
            ok = "" if max(worst.values()) <= EXACT_ATOL else " (over 1e-5)"
            print(
                f"| {name} | {seconds:.1f} | {diffs}{ok} | {speed['torch']:,.0f} | "
                f"{speed['onnx']:,.0f} | {speed['onnx'] / speed['torch']:.2f}x |",
                flush=True,
            )
    for row in rows if caps else []:
        by_cap = ", ".join(f"{c}: {r:,.0f}" for c, r in row["onnx_by_pair_batch"].items())
        print(f"{row['model']}: ONNX pairs/s by pairs per batch of the pairs graph: {by_cap}")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    if args.output:
        import onnxruntime

        meta = {
            "pairs_per_round": args.pairs,
            "rounds": args.rounds,
            "threads": 1,
            "load_after": round(os.getloadavg()[0], 1),
            "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__,
            "note": "shared 2-core machine: compare the ratios, measured side by side",
        }
        write_text_atomic(args.output, json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
