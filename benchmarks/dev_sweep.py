"""Choose training settings on WikiQA *dev* only: the test split is never loaded here.

Each candidate setting trains one run per seed with `data.test_split = None` and prints the best
dev MAP. Usage:

    python benchmarks/dev_sweep.py --model amvlstm_q --seeds 1 --out runs/sweep
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path

from attnmatch.training import ExperimentConfig, train

CANDIDATES: dict[str, dict] = {
    "base": {},
    "lr3e-4": {"train": {"lr": 3e-4}},
    "mlp32": {"model_overrides": {"mlp_hidden": [32]}},
    "drop0.2": {"model_overrides": {"dropout": 0.2}},
    "neg8": {"train": {"num_negatives": 8}},
    "trainable_emb": {"inputs": {"trainable": True}},  # fine-tune the model's own inputs
    "listwise": {"train": {"loss": "listwise"}},
}


def candidate_config(base: ExperimentConfig, overrides: dict) -> ExperimentConfig:
    """`base` with a candidate's overrides; `inputs` overrides apply to the model's own inputs
    (its default ones when `base` names none: GloVe word vectors, trigrams for DSSM/CDSSM, ...)."""
    if "inputs" in overrides and base.inputs is None:
        base = dataclasses.replace(base, inputs=base.resolved_inputs())
    return base.with_overrides(overrides)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="amvlstm_q")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--only", default=None, help="comma-separated candidate names")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--out", default="runs/sweep")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(CANDIDATES)
    for name in names:
        scores = []
        for seed in [int(s) for s in args.seeds.split(",")]:
            base = ExperimentConfig.from_dict(
                {
                    "model": args.model,
                    "data": {"dataset": "wikiqa", "test_split": None},
                    "train": {"epochs": args.epochs, "patience": 8, "seed": seed},
                }
            )
            exp = candidate_config(base, CANDIDATES[name])
            out = Path(args.out) / args.model / name / f"seed-{seed}"
            result = train(exp, out, resume=True, progress=False)
            scores.append(result.dev["map"])
        print(
            json.dumps(
                {
                    "model": args.model,
                    "candidate": name,
                    "dev_map": scores,
                    "mean": statistics.fmean(scores),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
