"""`attnmatch score` on 10 million synthetic pairs, and the ways past one process side by side.

1. Writes N synthetic pairs (headerless TSV, seeded: a 5-word left text and a 12-word right
   text over a 5,000-word vocabulary) into DIR, unless they are there already.
2. Side by side, interleaved, on the first SIDE pairs: one process, `--workers W`, and W shards
   run one after the other (`--shard r/W`, what W machines would run at once); each output is
   compared byte for byte with the one process's.
3. The whole file in one process (`attnmatch score MODEL PAIRS --format tsv -o OUT`), and the
   two costs a shard pays besides its share of the scoring: reading past the other shards'
   chunks, and the merge (measured as reading every part line and writing it once).
4. The projection for M machines of C processes: startup + read + N / (M * C * rate) + merge,
   with the rate of one process measured in 3 (after its startup); a projection, not a
   measurement.

    nice -n 10 python benchmarks/bulk_score.py --dir /tmp/bulk10m --pairs 10000000

The model is a lexical scorer by default (`overlap`: no training, no download); pass a model
folder to project a neural model's figures. Results go to DIR/bulk_score.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path


def _write_pairs(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for start in range(0, n, 100_000):
            rows = []
            for _ in range(min(100_000, n - start)):
                left = " ".join(rng.choices(words, k=5))
                right = " ".join(rng.choices(words, k=12))
                rows.append(f"{left}\t{right}\n")
            f.write("".join(rows))
    tmp.replace(path)


def _head(src: Path, dst: Path, n: int) -> None:
    with src.open("rb") as f, dst.open("wb") as g:
        for _, line in zip(range(n), f, strict=False):
            g.write(line)


def _score(model: str, pairs: Path, out: Path, *extra: str) -> float:
    """Seconds of one `attnmatch score` run (a fresh process, as a user runs it)."""
    command = [sys.executable, "-m", "attnmatch", "score", model, str(pairs), "--format", "tsv"]
    start = time.perf_counter()
    subprocess.run([*command, "-o", str(out), *extra], check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _side_by_side(model: str, pairs: Path, folder: Path, workers: int, rounds: int) -> dict:
    times: dict[str, list[float]] = {"one process": [], f"--workers {workers}": [], "shards": []}
    same = {}
    for _ in range(rounds):
        one = folder / "side-one.tsv"
        times["one process"].append(_score(model, pairs, one))
        pooled = folder / "side-workers.tsv"
        times[f"--workers {workers}"].append(
            _score(model, pairs, pooled, "--workers", str(workers))
        )
        sharded = folder / "side-shards.tsv"
        shard_times = [
            _score(model, pairs, sharded, "--shard", f"{r}/{workers}") for r in range(workers)
        ]
        times["shards"].append(max(shard_times))  # W machines run them at once
        same = {
            f"--workers {workers}": pooled.read_bytes() == one.read_bytes(),
            f"{workers} shards": sharded.read_bytes() == one.read_bytes(),
        }
    best = {k: min(v) for k, v in times.items()}
    return {"seconds": times, "best": best, "identical_to_one_process": same}


def _read_and_merge_costs(pairs: Path, scored: Path) -> dict[str, float]:
    from attnmatch.scoring import PairsFile

    start = time.perf_counter()
    with PairsFile(pairs, "tsv") as records:
        for _ in records.chunks(2048, keep=lambda i: False):
            pass
    read = time.perf_counter() - start
    start = time.perf_counter()
    with scored.open("rb") as f, open(os.devnull, "w", encoding="utf-8") as out:
        for line in f:
            out.write(line.decode("utf-8"))
    return {"skip_read_s": read, "merge_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=10_000_000)
    parser.add_argument("--side", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="overlap")
    parser.add_argument("--skip-full", action="store_true", help="Only steps 1 and 2.")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    pairs = args.dir / f"pairs-{args.pairs}.tsv"
    if not pairs.exists():
        _write_pairs(pairs, args.pairs)
    side = args.dir / f"side-{args.side}.tsv"
    _head(pairs, side, args.side)
    report: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), load "
        f"{os.getloadavg()[0]:.1f} at start",
        "model": args.model,
        "side_by_side": _side_by_side(args.model, side, args.dir, args.workers, args.rounds),
    }
    print(json.dumps(report, indent=1), flush=True)
    if not args.skip_full:
        one = args.dir / "one-pair.tsv"
        _head(pairs, one, 1)
        startup = min(_score(args.model, one, args.dir / "one-scored.tsv") for _ in range(2))
        scored = args.dir / "scored.tsv"
        seconds = _score(args.model, pairs, scored)
        rate = args.pairs / (seconds - startup)
        costs = _read_and_merge_costs(pairs, scored)
        report["full"] = {
            "pairs": args.pairs,
            "seconds": seconds,
            "startup_s": startup,
            "pairs_per_s_after_startup": rate,
            **costs,
        }
        report["projection"] = {
            f"{m} machines x {c} processes": startup
            + costs["skip_read_s"]
            + args.pairs / (m * c * rate)
            + costs["merge_s"]
            for m, c in ((1, 2), (4, 8), (16, 8), (64, 8))
        }
    (args.dir / "bulk_score.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
