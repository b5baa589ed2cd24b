"""MP-CNN inference on the CPU: batches run in slices of `MPCNN.inference_slice` pairs (the
default) against whole batches, alternating in one process on the same batches.

Run: OMP_NUM_THREADS=1 python benchmarks/mpcnn_slices.py [--batches 32,128,512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from roofline import build, random_batch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mpcnn_attention,mpcnn")
    parser.add_argument("--batches", default="128,512")
    parser.add_argument("--slices", default="16,32,64")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.threads} thread(s), "
        f"load average {os.getloadavg()[0]:.2f}; question 10 / answer 40 tokens (random ids)"
    )
    for spec in args.models.split(","):
        model = build(spec).eval()
        vocab = model.token_encoder.embedding.num_embeddings
        for size in (int(b) for b in args.batches.split(",")):
            batch = random_batch(size, 10, 40, vocab)
            slices = [int(s) for s in args.slices.split(",")] + [10**9]
            times: dict[int, list[float]] = {s: [] for s in slices}
            with torch.inference_mode():
                ref = None
                for _ in range(args.repeats):
                    for s in slices:  # alternating
                        model.inference_slice = s
                        start = time.perf_counter()
                        out = model(batch)
                        times[s].append(time.perf_counter() - start)
                        ref = out if ref is None else ref
                        assert torch.allclose(out, ref, atol=1e-5), "slices changed the scores"
            whole = statistics.median(times[10**9])
            row = ", ".join(
                f"slice {s}: {size / statistics.median(times[s]):.0f} pairs/s "
                f"({whole / statistics.median(times[s]):.2f}x)"
                for s in slices[:-1]
            )
            print(f"{spec:16s} batch {size:4d}: whole {size / whole:.0f} pairs/s; {row}")


if __name__ == "__main__":
    main()
