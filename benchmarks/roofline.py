"""A roofline for CPU inference: how close each seed model comes to the machine's matmul speed.

(a) The peak: a float32 matmul of --size x --size by --size x --size (2 n^3 FLOPs), timed
--repeats times after a warm-up, median, at each --threads; printed as GFLOP/s.

(b) For each model (a preset with its own sizes, GloVe 6B 50d inputs, built as
benchmarks/speed.py builds its WikiQA models): the forward FLOPs per pair, counted by
`torch.utils.flop_counter.FlopCounterMode` on one forward pass at batch 1, at fixed WikiQA-like
shapes (--left question tokens, --right answer tokens, every token real). The counter counts
matmuls, convolutions and attention (the CPU attention kernel is added here); elementwise work
(activations, masking, softmax, norms, pooling) is not counted, so this is the matmul work a
forward pass cannot avoid. For MV-LSTM models the count is checked against the arithmetic by
hand (`mvlstm_flops`). Then inference is timed (eval mode, `torch.inference_mode`, forward
passes on ready-made batches of --batches distinct pairs, no collation), the median of
--repeats runs of about --seconds each, and printed as pairs/s, achieved GFLOP/s (FLOPs per
pair x pairs/s) and that as a fraction of the measured matmul peak at the same threads.
--profile N also prints, per model, the N aten ops with the most self CPU time (torch.profiler,
the largest batch, the first thread count): what the time goes to.

Run: OMP_NUM_THREADS=1 python benchmarks/roofline.py [--threads 1,2] [--batches 32,512]
     python benchmarks/roofline.py --models amvlstm_q,damm --threads 1 --json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import TASKS, _model_type, _parse_model  # noqa: E402

from attnmatch.data.schema import PairBatch  # noqa: E402
from attnmatch.training import ExperimentConfig, build_experiment  # noqa: E402

SEED_MODELS = (
    "amvlstm_q",
    "mvlstm",
    "hcrn",
    "damm",
    "mpcnn_attention",
    "iarnn_gate",
    "iarnn_context",
)


def matmul_gflops(size: int, repeats: int) -> float:
    """Median GFLOP/s of a float32 (size x size) @ (size x size) on torch's current threads."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen)
    b = torch.randn(size, size, generator=gen)
    out = torch.empty(size, size)
    torch.mm(a, b, out=out)  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        seconds.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(seconds) / 1e9


def _cpu_attention_flops(
    query_shape: Any, key_shape: Any, value_shape: Any, *_: Any, **__: Any
) -> int:
    """FLOPs of `aten._scaled_dot_product_flash_attention_for_cpu` (which FlopCounterMode does
    not count): those of QK^T and AV, as for the GPU kernels."""
    return int(sdpa_flop_count(query_shape, key_shape, value_shape))


_EXTRA_FLOPS: dict[Any, Callable[..., int]] = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_flops,
}


def random_batch(size: int, left: int, right: int, vocab: int, seed: int = 0) -> PairBatch:
    """`size` pairs of distinct random token ids (every token real), `left` and `right` long."""
    gen = torch.Generator().manual_seed(seed)
    return PairBatch(
        left_ids=torch.randint(2, vocab, (size, left), generator=gen),  # (B, L)
        left_mask=torch.ones(size, left, dtype=torch.bool),  # (B, L)
        right_ids=torch.randint(2, vocab, (size, right), generator=gen),  # (B, R)
        right_mask=torch.ones(size, right, dtype=torch.bool),  # (B, R)
        labels=torch.zeros(size),  # (B,)
        group_index=torch.arange(size),  # (B,)
    )


def forward_flops(model: torch.nn.Module, batch: PairBatch) -> tuple[int, dict[str, int]]:
    """FLOPs of one forward pass (FlopCounterMode, plus the CPU attention kernel) and by op."""
    counter = FlopCounterMode(display=False, custom_mapping=_EXTRA_FLOPS)
    with torch.inference_mode(), counter:
        model(batch)
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    return int(counter.get_total_flops()), by_op


def mvlstm_flops(config: Any, left: int, right: int) -> int:
    """MV-LSTM's matmul FLOPs per pair by hand (cosine interaction over [fwd; bwd] states, no
    hidden layers): per token and direction the LSTM's four gates are 4H x E input and
    4H x H recurrent multiply-adds; then one dot product of 2H per (question, answer) token
    pair; then the output layer over the k pooled values."""
    h, e = config.hidden_size, config.encoder.embedding_dim
    lstm = 2 * 4 * h * (e + h) * 2 * (left + right)  # 2 FLOPs per multiply-add, 2 directions
    interaction = 2 * left * right * 2 * h
    output = 2 * config.k * config.num_outputs
    return lstm + interaction + output


def pairs_per_second(
    model: torch.nn.Module, batch: PairBatch, seconds: float, repeats: int
) -> float:
    """Median pairs/s of forward passes on `batch`, each run about `seconds` long."""
    with torch.inference_mode():
        start = time.perf_counter()
        model(batch)  # warm-up, and how many passes make a run
        once = time.perf_counter() - start
        passes = max(1, round(seconds / max(once, 1e-6)))
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(passes):
                model(batch)
            runs.append(time.perf_counter() - start)
    return len(batch) * passes / statistics.median(runs)


def top_ops(model: torch.nn.Module, batch: PairBatch, count: int) -> str:
    """The `count` aten ops with the most self CPU time in forward passes on `batch` (share of
    the total), from torch.profiler: what the time goes to."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        model(batch)  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                model(batch)
    rows = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    rows.sort(key=lambda e: -e.self_cpu_time_total)
    calls = {e.key: e.count // 3 for e in rows}
    return ", ".join(
        f"{e.key.removeprefix('aten::')} {e.self_cpu_time_total / total:.0%} ({calls[e.key]} calls)"
        for e in rows[:count]
    )


def build(spec: str) -> torch.nn.Module:
    """A preset or model with its own sizes on WikiQA with its default inputs (GloVe 6B 50d for
    these models), as benchmarks/speed.py builds it; eval mode."""
    name, own = _parse_model(spec)
    config = ExperimentConfig.from_dict(
        {"model": name, "model_overrides": own, **TASKS["wikiqa"]}  # type: ignore[dict-item]
    )
    torch.manual_seed(0)
    return build_experiment(config).model.eval()


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--models", default=",".join(SEED_MODELS), help="presets or model types")
    ap.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
    ap.add_argument("--batches", default="32,512", help="inference batch sizes")
    ap.add_argument("--left", type=int, default=10, help="question tokens")
    ap.add_argument("--right", type=int, default=40, help="answer tokens")
    ap.add_argument("--size", type=int, default=2048, help="n of the n x n matmul")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs (median)")
    ap.add_argument("--seconds", type=float, default=0.5, help="length of one inference run")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per row")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print the N aten ops with the most self CPU time per model (largest batch, "
        "first thread count)",
    )
    args = ap.parse_args()
    for option, text in (("--threads", args.threads), ("--batches", args.batches)):
        if not all(v.strip().isdigit() and int(v) > 0 for v in text.split(",")):
            ap.error(f"{option}: expected positive whole numbers separated by commas, got {text!r}")
    threads = [int(t) for t in args.threads.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    torch.set_flush_denormal(True)  # as the trainer and benchmarks/speed.py do

    cpu = platform.processor() or platform.machine()
    print(
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, torch {torch.__version__}, "
        f"{cpu}, {os.cpu_count()} CPUs, load average before {_load()}"
    )
    print(f"command: python {' '.join(sys.argv)}")
    peak: dict[int, float] = {}
    for t in threads:
        torch.set_num_threads(t)
        peak[t] = matmul_gflops(args.size, args.repeats)
        print(f"matmul {args.size}x{args.size} float32, {t} thread(s): {peak[t]:.1f} GFLOP/s")
    print(
        f"shapes: question {args.left} tokens, answer {args.right} tokens, every pair distinct; "
        "FLOPs per pair at batch 1 (matmul, convolution, attention)"
    )
    print(
        f"{'model':16s} {'MFLOP/pair':>10s} {'threads':>7s} {'batch':>5s} {'pairs/s':>9s} "
        f"{'GFLOP/s':>8s} {'of peak':>7s}"
    )
    for spec in (s for s in args.models.split(",") if s):
        model = build(spec)
        vocab = model.config.encoder.vocab_size
        flops, by_op = forward_flops(model, random_batch(1, args.left, args.right, vocab))
        note = ""
        if _model_type(spec.split(":")[0]) == "mvlstm":
            by_hand = mvlstm_flops(model.config, args.left, args.right)
            note = f"  (by hand {by_hand / 1e6:.4f} M{'' if by_hand == flops else ': DIFFERS'})"
        ops = ", ".join(f"{op.removeprefix('aten.')} {n / 1e6:.2f}M" for op, n in by_op.items())
        print(f"{spec:16s} {flops / 1e6:10.2f}  [{ops}]{note}", flush=True)
        if args.profile:
            torch.set_num_threads(threads[0])
            batch = random_batch(max(batches), args.left, args.right, vocab, seed=max(batches))
            where = top_ops(model, batch, args.profile)
            print(f"{'':16s} self CPU time, batch {max(batches)}: {where}", flush=True)
        for t in threads:
            torch.set_num_threads(t)
            for size in batches:
                batch = random_batch(size, args.left, args.right, vocab, seed=size)
                pps = pairs_per_second(model, batch, args.seconds, args.repeats)
                gflops = flops * pps / 1e9
                print(
                    f"{'':16s} {'':10s} {t:7d} {size:5d} {pps:9,.0f} {gflops:8.2f} "
                    f"{gflops / peak[t]:7.1%}",
                    flush=True,
                )
                if args.json:
                    row = {"model": spec, "flops_per_pair": flops, "threads": t, "batch": size}
                    row |= {"pairs_per_s": round(pps, 1), "gflops": round(gflops, 3)}
                    print(json.dumps(row | {"peak_gflops": round(peak[t], 2)}))
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
