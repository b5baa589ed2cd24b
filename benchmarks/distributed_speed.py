"""Data-parallel training speed: 1 process against `torchrun --nproc-per-node N`, side by side.

Trains MV-LSTM (`--model mvlstm`, its defaults: GloVe 6B 50d inputs, 32 ranking groups of
1 + 4 pairs a batch) on the bundled WikiQA with `attnmatch train`, once in one process and once
under `torchrun --standalone --nproc-per-node N` (gloo), every process on one thread, for the
same budget of optimiser steps (`train.steps`, rounded up to whole epochs) and the same global
batch. Runs alternate (1, N, 1, N, ...) so that a load change on the machine hits both alike.

Training pairs/s is rank 0's: the pairs of the global batches trained over the seconds spent in
training epochs (`log.jsonl`: train_pairs / epoch_time_s, summed over epochs; dev evaluation,
start-up and the final evaluation are not counted). It prints each run's figure, the median of
each setting and the ratio of the medians.

Run: python benchmarks/distributed_speed.py [--steps 96] [--repeats 3] [--nproc 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def train_command(run: Path, steps: int, nproc: int, inputs: str | None) -> list[str]:
    """The `attnmatch train` command of one run (under torchrun when nproc > 1)."""
    launcher = [sys.executable]
    if nproc > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    sets = [
        f"train.steps={steps}",
        "train.patience=0",
        "train.floors=none",
        "train.threads=1",
    ]
    return [
        *launcher,
        "-m",
        "attnmatch",
        "train",
        "--model",
        "mvlstm",
        "--dataset",
        "wikiqa",
        *(("--inputs", inputs) if inputs else ()),
        "--no-progress",
        "-o",
        str(run),
        *(arg for s in sets for arg in ("--set", s)),
    ]


def pairs_per_second(run: Path) -> tuple[float, int, int]:
    """(training pairs/s, optimiser steps, pairs) of a finished run, from its log.jsonl."""
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    pairs = sum(h["train_pairs"] for h in log)
    seconds = sum(h["epoch_time_s"] for h in log)
    return pairs / seconds, log[-1]["step"], pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=int,
        default=96,
        help="optimiser steps per run (rounded up to whole epochs of 32)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting")
    parser.add_argument("--nproc", type=int, default=2, help="processes of the torchrun runs")
    parser.add_argument(
        "--inputs",
        help="the input representation (attnmatch train --inputs; default: MV-LSTM's, GloVe), "
        "e.g. random (trained word vectors) where the glove extra is not installed",
    )
    args = parser.parse_args()

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    print(
        f"# MV-LSTM on WikiQA, inputs {args.inputs or 'glove-6b-50d'}, {args.steps} steps a "
        "run, 1 thread a process; "
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}, "
        f"load average before {os.getloadavg()[0]:.2f}"
    )
    figures: dict[int, list[float]] = {1: [], args.nproc: []}
    with tempfile.TemporaryDirectory(prefix="attnmatch-ddp-") as tmp:
        for repeat in range(args.repeats):
            for nproc in (1, args.nproc):
                run = Path(tmp) / f"p{nproc}-r{repeat}"
                start = time.perf_counter()
                command = train_command(run, args.steps, nproc, args.inputs)
                done = subprocess.run(
                    command,
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    sys.exit(f"run failed ({' '.join(command)}):\n{done.stderr[-2000:]}")
                speed, steps, pairs = pairs_per_second(run)
                figures[nproc].append(speed)
                print(
                    f"{nproc} process{'es' if nproc > 1 else ''}: {speed:8.1f} training pairs/s "
                    f"({steps} steps, {pairs} pairs; run {time.perf_counter() - start:.0f} s "
                    f"with start-up and evaluation)",
                    flush=True,
                )
    one, many = statistics.median(figures[1]), statistics.median(figures[args.nproc])
    print(f"median 1 process:    {one:8.1f} pairs/s")
    print(f"median {args.nproc} processes: {many:8.1f} pairs/s")
    print(
        f"ratio {args.nproc} / 1: {many / one:.2f}x (load average after {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
