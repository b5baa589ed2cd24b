"""ONNX against torch on whole test splits: fp32's largest output difference, and the metric
before and after int8 (MAP for ranking, Pearson for regression, accuracy for classification),
for each int8 variant asked for (`--variants`), with its pairs/s on the split.

Models: MiniLM zero-shot (all-MiniLM-L6-v2, the cosine; on STS-B and the own-data similarity
pairs the uncalibrated line onto 0-5, whose Pearson is the cosine's; on the own-data paraphrase
pairs a threshold fitted on their train split, `Matcher.from_encoder`), and with `--cross` the
MiniLM cross-encoder zero-shot on WikiQA and STS-B: all-MiniLM-L6-v2's weights with the
bi-encoder's cosine head on each text's mean state from the joint pass (`pooling="segments"`,
the head `attnmatch train` fine-tunes from; no random weights, so its metric means something:
it starts near the bi-encoder), one packed graph.

int8 variants (`VARIANTS`, each `export_onnx(..., quantize="int8", int8=...)`): "per-tensor"
(int8 weights of the matrix products, one scale per tensor: what `--quantize int8` wrote
before), "per-channel" (one scale per output column), "per-channel-7bit" (reduce_range), and
sentence-transformers' dynamic configurations replicated with ONNX Runtime directly (its
`export_dynamic_quantized_onnx_model` needs optimum, not installed here; its "avx512_vnni" and
"avx2" configs are per-channel, full range, symmetric weights, every operator ONNX Runtime's
dynamic quantisation knows, the embeddings' Gather included: int8 weights for avx512_vnni,
uint8 for avx2). "st-avx512_vnni" is what `--quantize int8` writes now (`attnmatch.export.INT8`).

Each split's examples are scored once per backend, on one thread, in batches of `--batch-size`;
the metric is the split's protocol (`Matcher.evaluate`). fp32 must equal torch within 1e-5
(`attnmatch.export.EXACT_ATOL`). Rates are the split's pairs over the CPU seconds of the
process (a shared machine's load barely moves them) and over the wall seconds.

Run: nice -n 10 python benchmarks/onnx_exactness.py --cross --variants all \\
         --output results/onnx_exactness.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch.data.datasets import load_split
from attnmatch.evaluation import report_from_outputs
from attnmatch.export import EXACT_ATOL, INT8, export_onnx
from attnmatch.matcher import Matcher
from attnmatch.tasks import Task

SPLITS = {
    "wikiqa:test": Task(kind="ranking"),
    "wikiqa:dev": Task(kind="ranking"),  # where an int8 variant is chosen
    "sts-benchmark:test": Task(kind="regression", min_score=0, max_score=5),
    "pairs:examples/own_data/faq:test": Task(kind="ranking"),
    "pairs:examples/own_data/paraphrase:test": Task(kind="classification", class_names=("0", "1")),
    "pairs:examples/own_data/similarity:test": Task(kind="regression", min_score=0, max_score=5),
}
CROSS_SPLITS = ("wikiqa:test", "sts-benchmark:test")
PRIMARY = {"ranking": "map", "regression": "pearson", "classification": "accuracy"}
_EVERY_OP = list(INT8["operators"])  # every operator ONNX Runtime quantises
_BASE = {"weights": "int8", "reduce_range": False, "symmetric_weights": True, "exclude": []}
VARIANTS: dict[str, dict[str, Any]] = {
    "per-tensor": _BASE | {"per_channel": False, "operators": ["MatMul", "Gemm"]},
    "per-channel": _BASE | {"per_channel": True, "operators": ["MatMul", "Gemm"]},
    "per-channel-7bit": _BASE
    | {"per_channel": True, "reduce_range": True, "operators": ["MatMul", "Gemm"]},
    "st-avx512_vnni": _BASE | {"per_channel": True, "operators": _EVERY_OP},
    "st-avx2": _BASE | {"weights": "uint8", "per_channel": True, "operators": _EVERY_OP},
}


def zero_shot(ref: str, task: Task) -> Matcher:
    calibration = None
    if task.kind == "classification":
        folder = ref.split(":")[1]
        calibration = load_split("pairs", "train", data_dir=folder, task="classification").examples
    return Matcher.from_encoder("minilm-l6", task=task, calibration=calibration)


def cross_zero_shot(task: Task) -> Matcher:
    """The cross-encoder with all-MiniLM-L6-v2's weights and the cosine of each text's mean
    state (module docstring)."""
    overrides: dict[str, Any] = {"pooling": "segments", "scale": 20.0, "shift": 0.0}
    if task.kind == "regression":  # the cosine's line onto the score range, as the recipe's
        low, high = task.min_score, task.max_score  # type: ignore[attr-defined]
        overrides |= {"scale": float(high - low), "shift": float(low)}
    return Matcher.untrained(
        "cross_encoder", inputs="minilm-l6", task=task, overrides=overrides, seed=0
    )


def timed(run: Any, data: Any) -> tuple[np.ndarray, float, float]:
    """The outputs of `run(data)`, and its CPU and wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = run(data)
    return out, time.process_time() - cpu, time.perf_counter() - wall


def compare(
    matcher: Matcher, ref: str, folder: Path, name: str, variants: list[str], batch_size: int
) -> dict[str, Any]:
    # One export per model and head: the zero-shot matchers of one task are the same model.
    dirs = {"fp32": folder / f"{name}-fp32"} | {v: folder / f"{name}-{v}" for v in variants}
    for key, path in dirs.items():
        if not path.exists():
            int8 = VARIANTS.get(key)
            export_onnx(matcher, path, quantize=None if int8 is None else "int8", int8=int8)
    matcher.batch_size = batch_size
    backends = {"torch": matcher} | {
        k: Matcher.load(p, batch_size=batch_size) for k, p in dirs.items()
    }
    kind, split, *rest = ref.split(":")
    options: dict[str, Any] = {"task": matcher.task.kind} if kind == "pairs" else {}
    loaded = load_split(
        kind, rest[-1] if rest else split, data_dir=split if rest else None, **options
    )
    examples = loaded.examples
    protocol = matcher.task.protocol_for(loaded.protocol, examples, ref)
    data = matcher.encode(examples)
    metric = PRIMARY[matcher.task.kind]
    results = {k: timed(m.predict, data) for k, m in backends.items()}
    row: dict[str, Any] = {"split": ref, "model": name, "pairs": len(examples), "metric": metric}
    for key, (out, cpu, wall) in results.items():
        report = report_from_outputs(out, data, protocol, task=matcher.task)
        row[key] = {
            metric: report.metrics[metric],
            "max_abs_diff": float(np.abs(out - results["torch"][0]).max()),
            "pairs_per_s_cpu": round(len(examples) / cpu, 1),
            "pairs_per_s_wall": round(len(examples) / wall, 1),
        }
        row[key]["change"] = row[key][metric] - row["torch"][metric]
    row["fp32_exact"] = row["fp32"]["max_abs_diff"] <= EXACT_ATOL
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'split':34} {'model':22} {'backend':17} {'metric':>8} {'change':>8} {'cpu p/s':>8}")
    for row in rows:
        for key, cell in row.items():
            if isinstance(cell, dict):
                metric = cell[row["metric"]]
                print(
                    f"{row['split'][:34]:34} {row['model'][:22]:22} {key:17} {metric:8.4f} "
                    f"{cell['change']:+8.4f} {cell['pairs_per_s_cpu']:8.1f}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cross", action="store_true", help="Also the zero-shot cross-encoder.")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument(
        "--variants", default="st-avx512_vnni", help=f"int8 variants: all, or of {list(VARIANTS)}"
    )
    ap.add_argument("--cross-variants", default="per-tensor,st-avx512_vnni")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--output", type=Path, default=None)
    args = ap.parse_args()
    variants = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    assert VARIANTS["st-avx512_vnni"] == INT8, "the variant int8 writes"
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for ref in filter(None, args.splits.split(",")):
            task = SPLITS[ref]
            key = f"zero-shot-{task.kind}" if task.kind != "classification" else f"zero-shot-{ref}"
            name = key.replace(":", "_").replace("/", "_")
            rows.append(compare(zero_shot(ref, task), ref, folder, name, variants, args.batch_size))
        if args.cross:
            for ref in CROSS_SPLITS:
                cross = cross_zero_shot(SPLITS[ref])
                name = f"cross-zero-shot-{SPLITS[ref].kind}"
                variants = args.cross_variants.split(",")
                rows.append(compare(cross, ref, folder, name, variants, args.batch_size))
    if args.output is not None:
        args.output.write_text(json.dumps(rows, indent=2) + "\n")
    table(rows)


if __name__ == "__main__":
    main()
