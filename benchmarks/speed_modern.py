"""CPU inference pairs/s (and fine-tuning time per epoch) for the rows of a reproduction table.

For each row it builds the row's experiment exactly as `attnmatch reproduce` does (data, the
row's inputs: word vectors or the pretrained encoder, a freshly initialised model: the cost does
not depend on the trained weights), then times:

- inference: scoring the first `--pairs` test pairs with `Matcher.predict` (length-bucketed
  batches of `--batch-size`, `torch.inference_mode`), best of `--repeats`, after one warm-up
  pass. A frozen transformer encoder runs *without* its per-text cache, so every pair pays for
  encoding both texts: the cost of scoring new text;
- training (`--train-steps N`, N > 0): N optimiser steps on real training batches of the row's
  sampler after 2 warm-up steps, reported as pairs/s and as the wall time of one training epoch
  at that rate (the row's sampler's epoch size). Frozen-encoder rows are timed without the cache
  too, so this is the first epoch's cost (later epochs hit the cache).

Run: OMP_NUM_THREADS=1 python benchmarks/speed_modern.py --table modern --threads 1 \\
         --rows wikiqa-zero-shot,wikiqa-damm-minilm [--pairs 1000] [--train-steps 10]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

from attnmatch.data.collate import collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.matcher import Matcher
from attnmatch.models import input_layer
from attnmatch.research.reproduce import experiment_for, find_table, load_table
from attnmatch.training import Experiment, build_experiment
from attnmatch.training.loop import batch_loss, make_sampler
from attnmatch.training.optim import make_optimizer


def head(data: EncodedPairs, n: int) -> EncodedPairs:
    """The first n pairs of `data` (all texts kept; unused ones cost nothing)."""
    n = min(n, len(data))
    return EncodedPairs(
        texts=data.texts,
        left=data.left[:n],
        right=data.right[:n],
        labels=data.labels[:n],
        group_ids=data.group_ids[:n],
        group_names=data.group_names,
    )


def inference_pairs_per_s(matcher: Matcher, data: EncodedPairs, batch: int, repeats: int):
    matcher.batch_size = batch
    matcher.predict(data)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matcher.predict(data)
        best = min(best, time.perf_counter() - start)
    return len(data) / best


def train_pairs_per_s(exp: Experiment, steps: int) -> tuple[float, int]:
    model, t = exp.model, exp.config.train
    sampler = make_sampler(exp)
    optimizer = make_optimizer(model, t)
    batches = sampler.epoch(1)
    model.train()

    def step(idx: np.ndarray) -> None:
        loss = batch_loss(exp, collate(exp.train, idx, group_index=sampler.group_index(idx)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if t.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        optimizer.step()

    for idx in batches[:2]:
        step(idx)
    chosen = batches[2 : 2 + steps]
    start = time.perf_counter()
    for idx in chosen:
        step(idx)
    seconds = time.perf_counter() - start
    pairs = sum(len(i) for i in chosen)
    return pairs / seconds, sum(len(i) for i in batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default="modern")
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: every row run)")
    ap.add_argument("--pairs", type=int, default=1000, help="test pairs scored per row")
    ap.add_argument("--batch-size", type=int, default=128, help="pairs per inference batch")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=0, help="timed training batches (0: none)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="also print one JSON line per row")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    spec = load_table(find_table(args.table))
    wanted = [r for r in args.rows.split(",") if r]
    rows = [r for r in spec.rows if not r.not_run and (not wanted or r.id in wanted)]
    print(
        f"# {spec.table}: CPU speed, {args.threads} thread(s), torch {torch.__version__}, "
        f"{platform.processor() or platform.machine()}; inference over the first {args.pairs} "
        f"test pairs, batches of {args.batch_size}, encoder cache off"
    )
    print("| row | inference pairs/s | training pairs/s | one training epoch |")
    print("|---|---|---|---|")
    for row in rows:
        config = experiment_for(spec, row)
        exp = build_experiment(config)  # turns on a frozen encoder's per-text cache: off here
        exp.matcher.inputs.disable_cache(input_layer(exp.model))
        assert exp.test is not None
        infer = inference_pairs_per_s(
            exp.matcher, head(exp.test.data, args.pairs), args.batch_size, args.repeats
        )
        train, epoch = (float("nan"), 0)
        if args.train_steps > 0 and config.train.epochs > 0:
            train, epoch_pairs = train_pairs_per_s(exp, args.train_steps)
            epoch = epoch_pairs
        epoch_s = epoch / train if epoch else float("nan")
        when = f"{epoch_s / 60:.1f} min" if epoch_s >= 120 else f"{epoch_s:.1f} s"
        cells = f"{train:,.1f} | {when} ({epoch:,} pairs) |" if epoch else "- | - |"
        print(f"| `{row.id}` | {infer:,.0f} | {cells}", flush=True)
        if args.json:
            print(
                json.dumps(
                    {
                        "row": row.id,
                        "inference_pairs_per_s": infer,
                        "train_pairs_per_s": train if epoch else None,
                        "epoch_s": epoch_s if epoch else None,
                        "epoch_pairs": epoch,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
