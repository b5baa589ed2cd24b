"""MV-LSTM inference (and training) pairs/s of this source tree against another, side by side.

Each measurement runs in a fresh subprocess with PYTHONPATH set to one tree's `src/`, the two
trees alternating (this tree first in odd rounds, the baseline first in even ones), so that load
from other jobs hits both alike; the report gives each tree's median over the rounds, their
ratio, and the largest difference between the two trees' outputs.

Setting (the reference one of benchmarks/speed.py): WikiQA test (6,165 pairs), GloVe 6B 50d,
seed 0 weights (the same in both trees), texts cut to `--truncate` tokens (default 10 question /
40 answer tokens); MV-LSTM and aMV-LSTM with hidden size 50 and k-max 50, any other model
(`--models hcrn,damm,...`) at its preset's sizes. Inference is `Matcher.predict` over the whole
test split at each `--batch-sizes` (best of `--repeats` calls in a worker); `--train` also times
training steps on WikiQA batches (1 positive + 4 negatives, 32 groups a batch; best of 3 passes
over 20 batches, as benchmarks/speed.py).

Run: python benchmarks/speed_vs.py --baseline ../attnmatch-base --threads 1 [--rounds 5]
     git worktree add /tmp/base <commit>   (a checkout of the baseline)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent
# MV-LSTM at the sizes of the MatchZoo-py comparison; every other model at its preset's sizes.
OVERRIDES: dict[str, dict[str, int]] = {
    "mvlstm": {"hidden_size": 50, "k": 50},
    "amvlstm_q": {"hidden_size": 50, "k": 50},
}


def _worker(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from attnmatch.data.encoding import EncodedPairs
    from attnmatch.training import ExperimentConfig, build_experiment

    torch.set_num_threads(args.threads)
    config = ExperimentConfig.from_dict(
        {
            "model": args.model,
            "model_overrides": OVERRIDES.get(args.model, {}),
            "data": {"dataset": "wikiqa"},
            "train": {"num_negatives": 4, "batch_size": 32},
        }
    )
    torch.manual_seed(0)
    exp = build_experiment(config)
    assert exp.test is not None
    data = exp.test.data
    left_max, right_max = (int(v) for v in args.truncate.split(","))
    n = len(data.texts)
    # Each text cut once as a left text and once as a right text (a table twice as long).
    data = EncodedPairs(
        texts=[t[:left_max] for t in data.texts] + [t[:right_max] for t in data.texts],
        left=data.left,
        right=data.right + n,
        labels=data.labels,
        group_ids=data.group_ids,
        group_names=data.group_names,
    )
    result: dict[str, object] = {"torch": torch.__version__}
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        exp.matcher.batch_size = batch_size
        outputs = exp.matcher.predict(data)  # warm-up
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            exp.matcher.predict(data)
            best = min(best, time.perf_counter() - start)
        result[f"infer_{batch_size}"] = len(data) / best
        np.save(Path(args.out) / f"outputs_{batch_size}.npy", outputs)
    if args.flops:
        sys.path.insert(0, str(HERE.parent))
        from roofline import forward_flops, matmul_gflops  # benchmarks/roofline.py

        from attnmatch.data.collate import collate

        model = exp.matcher.model.eval()
        sample = np.random.default_rng(0).choice(len(data), min(args.flops, len(data)), False)
        total = sum(forward_flops(model, collate(data, np.array([i])))[0] for i in sample)
        result["flops_per_pair"] = total / len(sample)
        result["peak_gflops"] = matmul_gflops(2048, 5)
    if args.train:
        sys.path.insert(0, str(HERE.parent))
        from speed import train_throughput  # benchmarks/speed.py: the same training timing

        from attnmatch.training.loop import make_sampler

        train_pps, _ = train_throughput(exp, make_sampler(exp).epoch(1)[:23], steps=20)
        result["train"] = train_pps
    (Path(args.out) / "result.json").write_text(json.dumps(result))


def _run(
    tree: Path, model: str, args: argparse.Namespace, out: Path, flops: bool = False
) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "src")
    env["OMP_NUM_THREADS"] = str(args.threads)
    command = [
        sys.executable,
        str(HERE),
        "--worker",
        "--model",
        model,
        "--threads",
        str(args.threads),
        "--batch-sizes",
        args.batch_sizes,
        "--repeats",
        str(args.repeats),
        "--truncate",
        args.truncate,
        "--out",
        str(out),
    ] + (["--train"] if args.train else [])
    if flops:
        command += ["--flops", str(args.flops)]
    done = subprocess.run(command, env=env, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        raise SystemExit(
            f"speed_vs.py: {model} in {tree} failed (exit {done.returncode}): "
            f"{lines[-1] if lines else 'no message'}"
        )
    sys.stderr.write(done.stderr)  # the worker's warnings, if any
    return dict(json.loads((out / "result.json").read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--baseline", type=Path, help="root of the baseline source tree")
    ap.add_argument("--models", default="mvlstm,amvlstm_q")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-sizes", default="32,512")
    ap.add_argument("--rounds", type=int, default=5, help="worker runs per tree and model")
    ap.add_argument("--repeats", type=int, default=3, help="timed predict calls per worker")
    ap.add_argument("--truncate", default="10,40", help="left,right tokens kept per text")
    ap.add_argument("--train", action="store_true", help="also time training steps")
    ap.add_argument(
        "--flops",
        type=int,
        default=0,
        help="also count the forward FLOPs of this many sampled test pairs (batch 1, first round) "
        "and time a 2048^3 matmul, to give each figure's fraction of the matmul peak",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return
    if args.baseline is None or not (args.baseline / "src" / "attnmatch").is_dir():
        raise SystemExit("--baseline: give the root of a source tree with src/attnmatch")
    for option, text in (("--batch-sizes", args.batch_sizes), ("--truncate", args.truncate)):
        if not all(v.strip().isdigit() and int(v) > 0 for v in text.split(",")):
            ap.error(f"{option}: expected positive whole numbers separated by commas, got {text!r}")
    if len(args.truncate.split(",")) != 2:
        ap.error(f"--truncate: expected left,right token counts, got {args.truncate!r}")
    import numpy as np

    trees = {"new": TREE, "base": args.baseline.resolve()}
    load = os.getloadavg()
    print(
        f"{args.threads} threads, rounds {args.rounds} (alternating), best of {args.repeats} "
        f"per run, truncate {args.truncate}; load average before {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}\nnew: {trees['new']}\nbase: {trees['base']}",
        flush=True,
    )
    keys = [f"infer_{b}" for b in args.batch_sizes.split(",")] + (["train"] if args.train else [])
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            runs: dict[str, list[dict[str, float]]] = {"new": [], "base": []}
            for r in range(args.rounds):
                for name in ("new", "base") if r % 2 == 0 else ("base", "new"):
                    out = Path(tmp) / model / name
                    runs[name].append(
                        _run(trees[name], model, args, out, flops=r == 0 and name == "new")
                    )
            for key in keys:
                new = statistics.median(run[key] for run in runs["new"])
                base = statistics.median(run[key] for run in runs["base"])
                diff = ""
                if key.startswith("infer_"):
                    batch = key.removeprefix("infer_")
                    a = np.load(Path(tmp) / model / "new" / f"outputs_{batch}.npy")
                    b = np.load(Path(tmp) / model / "base" / f"outputs_{batch}.npy")
                    diff = f"  max |new - base| {float(np.abs(a - b).max()):.1e}"
                peak = ""
                if args.flops:  # FLOPs of the plain forward per pair, over the matmul peak
                    first = runs["new"][0]
                    flops, gflops = first["flops_per_pair"], first["peak_gflops"]
                    peak = (
                        f"  of peak: base {flops * base / gflops / 1e9:5.1%} new "
                        f"{flops * new / gflops / 1e9:5.1%} ({flops / 1e6:.2f} MFLOP/pair, "
                        f"matmul {gflops:.0f} GFLOP/s)"
                    )
                print(
                    f"{model:10s} {key:10s} base {base:9,.0f}  new {new:9,.0f} pairs/s  "
                    f"ratio {new / base:5.2f}{diff}{peak if key.startswith('infer_') else ''}",
                    flush=True,
                )
    load = os.getloadavg()
    print(f"load average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
