"""Do model-scored hard negatives win on dev? A table row trained with its own (random)
negatives and with `train.negatives = "model"`, seed by seed; prints the dev metric of each
(the test split is not looked at: this chooses a recipe). The random-negative runs are the
claims' runs (`attnmatch reproduce claims`) when those exist.

Run: OMP_NUM_THREADS=1 python benchmarks/hard_negatives_dev.py hcrn_table5:hcrn --seeds 1,2
     [--share 0.5] [--pool 20] [--runs-dir runs/hard_negatives]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
from rich.console import Console

from attnmatch import configs
from attnmatch.research.claims import experiment, find_claims, load_claims, run_folder
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.trainer import train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", help="TABLE:ROW, e.g. hcrn_table5:hcrn")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--share", type=float, default=0.5, help="hard_share (HCRN's mix: 0.5)")
    parser.add_argument("--pool", type=int, default=20, help="hard_pool")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/hard_negatives"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    glove = load_claims(find_claims()).setting("glove")
    base = experiment(args.system, glove).to_dict()
    metric = None
    rows: dict[str, list[float]] = {"random": [], "model": []}
    for seed in (int(s) for s in args.seeds.split(",")):
        for kind in ("random", "model"):
            extra = {"seed": seed, "floors": "none"}
            if kind == "model":
                extra |= {"negatives": "model", "hard_pool": args.pool, "hard_share": args.share}
            config = configs.merge(base, {"train": extra})
            folder = args.runs_dir / args.system.replace(":", "-") / f"{kind}-seed-{seed}"
            if kind == "random":  # the claims' run of the same experiment, when there is one
                folder = run_folder("runs", "glove", args.system, seed)
            result = train(
                ExperimentConfig.from_dict(config), folder, resume=True, progress=False,
                console=Console(stderr=True, quiet=True),
            )  # fmt: skip
            dev = result.dev or {}
            metric = metric or next(iter(dev))
            rows[kind].append(float(dev[metric]))
            print(json.dumps({"seed": seed, "negatives": kind, f"dev {metric}": dev[metric]}))
    for kind, values in rows.items():
        print(f"{kind}: dev {metric} mean {statistics.fmean(values):.4f} over {len(values)} seeds")


if __name__ == "__main__":
    main()
